"""With `wal.signingKey` configured, every append commit carries an SSH
signature that plain git verifies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gitwal.signing.add_signer import trust_add
from gitwal.signing.keys import generate_key

from .conftest import git, ok


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_every_append_is_signed_and_git_verifies_it(repo: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signing_key"
    pub = generate_key(key)
    allowed = tmp_path / "allowed_signers"
    trust_add(allowed, pub, "gitwal@test")
    git(repo, "config", "wal.signingKey", str(key))
    run = ok(repo, "begin").strip()
    ok(repo, "apply", "ensure-line", "README", "signed")
    commits = git(repo, "rev-list", f"refs/wal/{run}").split()
    assert len(commits) == 3
    for c in commits:
        out = git(repo, "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}",
                  "log", "-1", "--format=%G?", c)
        assert out.strip() == "G", f"append {c} is not signed by the trusted key"
    ok(repo, "recover")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_compaction_keeps_the_chain_signed(repo: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signing_key"
    allowed = tmp_path / "allowed_signers"
    trust_add(allowed, generate_key(key), "gitwal@test")
    git(repo, "config", "wal.signingKey", str(key))
    run = ok(repo, "begin").strip()
    ok(repo, "apply", "ensure-line", "README", "one")
    ok(repo, "checkpoint")
    ok(repo, "apply", "ensure-line", "README", "two")
    ok(repo, "compact")
    out = git(repo, "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}",
              "log", "--format=%G?", f"refs/wal/{run}")
    assert out.split() == ["G", "G", "G"]
