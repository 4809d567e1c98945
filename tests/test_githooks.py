"""gitwal's git hooks, exercised through real git commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from gitwal.signing.add_signer import trust_add
from gitwal.signing.keys import generate_key

from .conftest import git, init_repo, ok, wal

BARE_PATH = "/usr/bin:/bin"  # no virtualenv: the hooks must need only sh and git


def git_env(repo: Path, *args: str, path: str = BARE_PATH) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PATH": path})


def test_install_chains_user_hooks_is_idempotent_and_uninstall_restores(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    user = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/user-hook-ran\"\n"
    (hooks / "pre-commit").write_text(user)
    (hooks / "pre-commit").chmod(0o755)
    assert ok(repo, "hooks", "install").split() == [
        "pre-commit:", "chained", "reference-transaction:", "installed"]
    first = {p.name: p.read_bytes() for p in hooks.iterdir() if not p.name.endswith(".sample")}
    assert ok(repo, "hooks", "install").split() == [
        "pre-commit:", "updated", "reference-transaction:", "updated"]
    again = {p.name: p.read_bytes() for p in hooks.iterdir() if not p.name.endswith(".sample")}
    assert again == first and "pre-commit.gitwal-chained" in again

    (repo / "README").write_text("changed\n")
    assert git_env(repo, "commit", "-qam", "c").returncode == 0
    assert (repo / ".git" / "user-hook-ran").read_text() == "ran\n"

    ok(repo, "hooks", "uninstall")
    assert (hooks / "pre-commit").read_text() == user
    assert not (hooks / "reference-transaction").exists()
    assert not (hooks / "pre-commit.gitwal-chained").exists()


@pytest.mark.slow
def test_pre_commit_refuses_while_an_intent_is_open(repo: Path) -> None:
    ok(repo, "hooks", "install")
    run = ok(repo, "begin").strip()
    killed = wal(repo, "apply", "ensure-line", "README", "x",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL
    (repo / "other.txt").write_text("x\n")
    git(repo, "add", "other.txt")
    refused = git_env(repo, "commit", "-qm", "half-applied")
    assert refused.returncode == 1
    assert f"git wal recover --run {run}" in refused.stderr
    assert wal(repo, "hooks", "check").returncode == 1
    ok(repo, "recover")
    assert git_env(repo, "commit", "-qm", "fine now").returncode == 0
    assert wal(repo, "hooks", "check").returncode == 0


@pytest.mark.slow
def test_reference_transaction_allows_appends_refuses_rewrites(repo: Path) -> None:
    ok(repo, "hooks", "install")
    run = ok(repo, "begin").strip()
    ok(repo, "apply", "ensure-line", "README", "x")
    ref = f"refs/wal/{run}"
    head = git(repo, "rev-parse", ref).strip()

    deleted = git_env(repo, "update-ref", "-d", ref)
    assert deleted.returncode != 0 and f"git wal drop {run}" in deleted.stderr
    reset = git_env(repo, "update-ref", ref, f"{ref}~1")
    assert reset.returncode != 0 and "does not extend" in reset.stderr
    assert git(repo, "rev-parse", ref).strip() == head

    assert git_env(repo, "gc", "-q", "--prune=now").returncode == 0  # pack-refs is fine
    ok(repo, "apply", "ensure-line", "README", "y")  # gitwal appends (libgit2: no hook)
    assert git_env(repo, "update-ref", "-d", ref).returncode != 0
    ok(repo, "log")


HOOK = Path(__file__).parents[1] / "hooks" / "git" / "reference-transaction"
ZERO = "0" * 40


def transaction(hook: Path, cwd: Path, state: str, lines: str, path: str
                ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", str(hook), state], cwd=cwd, input=lines, text=True,
                          capture_output=True, env={**os.environ, "PATH": path})


def test_reference_transaction_forks_nothing_for_other_refs(repo: Path, tmp_path: Path) -> None:
    """git runs the hook several times per ref update: for a branch it must not
    start a single process (with nothing on PATH it still passes)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    head = git(repo, "rev-parse", "HEAD").strip()
    branch = f"{ZERO} {head} refs/heads/topic\n{head} {ZERO} refs/heads/old\n"
    for state in ("prepared", "committed"):
        done = transaction(HOOK, repo, state, branch, str(empty))
        assert (done.returncode, done.stderr) == (0, "")
    # A log's ref in the same transaction is checked (with git on PATH).
    ok(repo, "begin", "--run", "r")
    log = branch + f"{git(repo, 'rev-parse', 'refs/wal/r').strip()} {ZERO} refs/wal/r\n"
    refused = transaction(HOOK, repo, "prepared", log, BARE_PATH)
    assert refused.returncode == 1 and "refusing to delete refs/wal/r" in refused.stderr
    # A chained hook still gets the transaction, byte for byte.
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "reference-transaction").write_bytes(HOOK.read_bytes())
    chained = hooks / "reference-transaction.gitwal-chained"
    chained.write_text(f"#!/bin/sh\ncat > {tmp_path / 'seen'}\n")
    chained.chmod(0o755)
    assert transaction(hooks / "reference-transaction", repo, "prepared", branch,
                       BARE_PATH).returncode == 0
    assert (tmp_path / "seen").read_text() == branch


def test_server_side_refuses_force_push_and_delete_of_a_log(tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    ok(server, "hooks", "install")
    a = init_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(server))
    run = ok(a, "begin").strip()
    ok(a, "apply", "ensure-line", "README", "x")
    ref = f"refs/wal/{run}"
    assert git_env(a, "push", "-q", "origin", f"{ref}:{ref}").returncode == 0
    ok(a, "apply", "ensure-line", "README", "y")
    assert git_env(a, "push", "-q", "origin", f"{ref}:{ref}").returncode == 0  # an append

    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(server), str(b))
    git(b, "fetch", "-q", "origin", f"{ref}:{ref}")
    forced = git_env(b, "push", "-q", "--force", "origin", f"{ref}~2:{ref}")
    assert forced.returncode != 0 and "does not extend" in forced.stderr
    gone = git_env(b, "push", "-q", "origin", f":{ref}")
    assert gone.returncode != 0 and "refusing to delete" in gone.stderr
    assert git(server, "rev-parse", ref) == git(a, "rev-parse", ref)


def _server(tmp_path: Path) -> tuple[Path, Path, str]:
    """A bare server with the hooks installed, and a clone whose run is pushed to it."""
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    assert ok(server, "hooks", "install").split() == ["pre-receive:", "installed"]
    a = init_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(server))
    run = ok(a, "begin").strip()
    ok(a, "apply", "ensure-line", "README", "x")
    assert git_env(a, "push", "-q", "origin", f"refs/wal/{run}:refs/wal/{run}").returncode == 0
    return server, a, run


def test_bare_install_puts_pre_receive_only_and_replaces_working_repo_hooks(
        tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    hooks = server / "hooks"
    # As an older install left it: the working-repository hooks in a bare repo.
    (hooks / "reference-transaction").write_bytes(
        (Path(__file__).parents[1] / "hooks" / "git" / "reference-transaction").read_bytes())
    user = "#!/bin/sh\ncat > \"$(git rev-parse --git-dir)/user-pre-receive-saw\"\n"
    (hooks / "pre-receive").write_text(user)
    (hooks / "pre-receive").chmod(0o755)
    assert ok(server, "hooks", "install").split() == [
        "pre-receive:", "chained", "reference-transaction:", "removed"]
    assert not (hooks / "reference-transaction").exists()
    assert not (hooks / "pre-commit").exists()

    a = init_repo(tmp_path / "a")
    pushed = git_env(a, "push", "-q", str(server), "main:refs/heads/main")
    assert pushed.returncode == 0, pushed.stderr
    head = git(a, "rev-parse", "main").strip()
    assert (server / "user-pre-receive-saw").read_text().split()[1:] == [head, "refs/heads/main"]

    assert ok(server, "hooks", "uninstall").split() == ["pre-receive:", "restored"]
    assert (hooks / "pre-receive").read_text() == user


def test_pre_receive_refuses_each_bad_ref_and_names_why(tmp_path: Path) -> None:
    server, a, run = _server(tmp_path)
    ref = f"refs/wal/{run}"
    ok(a, "apply", "ensure-line", "README", "y")
    ok(a, "checkpoint", "--detached")
    cp = git(a, "for-each-ref", "--format=%(refname)", "refs/wal-checkpoints/").strip()
    assert git_env(a, "push", "-q", "origin", f"{ref}:{ref}", f"{cp}:{cp}").returncode == 0
    before = git(server, "for-each-ref")

    git(a, "update-ref", "refs/tmp/other", "HEAD")
    refused = git_env(a, "push", "--force", "origin", f"{ref}~1:{ref}", f":{cp}",
                      "refs/tmp/other:refs/heads/side")
    assert refused.returncode != 0
    assert f"refusing to rewrite {ref}" in refused.stderr
    assert "does not extend" in refused.stderr
    assert f"refusing to delete {cp} (history a write-ahead log keeps)" in refused.stderr
    archive = f"refs/wal-archive/{run}/1"
    assert git_env(a, "push", "-q", "origin", f"{ref}~1:{archive}").returncode == 0
    changed = git_env(a, "push", "--force", "origin", f"{ref}:{archive}")
    assert f"refusing to change {archive}: archives and detached checkpoints are written once" \
        in changed.stderr
    assert git(server, "for-each-ref").replace(
        f"{git(a, 'rev-parse', f'{ref}~1').strip()} commit\t{archive}\n", "") == before


@pytest.mark.slow
def test_pre_receive_lets_a_rewrite_through_when_an_archive_keeps_the_old_head(
        tmp_path: Path) -> None:
    server, a, run = _server(tmp_path)
    ref = f"refs/wal/{run}"
    old = git(a, "rev-parse", ref).strip()
    ok(a, "checkpoint", "--detached")
    ok(a, "apply", "ensure-line", "README", "y")
    git_env(a, "push", "-q", "origin", "refs/wal-checkpoints/*:refs/wal-checkpoints/*")
    ok(a, "compact")  # the live chain is rewritten; refs/wal-archive/<run>/1 keeps the old one
    new = git(a, "rev-parse", ref).strip()
    alone = git_env(a, "push", "--force", "origin", f"{ref}:{ref}")
    assert alone.returncode != 0 and "does not extend" in alone.stderr
    assert git(server, "rev-parse", ref).strip() == old
    both = git_env(a, "push", "--force", "origin", f"{ref}:{ref}",
                   f"refs/wal-archive/{run}/1:refs/wal-archive/{run}/1")
    assert both.returncode == 0, both.stderr
    assert git(server, "rev-parse", ref).strip() == new
    assert wal(server, "verify", "--all").returncode == 0


def test_pre_receive_without_gitwal_keeps_the_git_checks(tmp_path: Path) -> None:
    server, a, run = _server(tmp_path)
    ref = f"refs/wal/{run}"
    git(server, "config", "wal.receive.allowedSigners", str(tmp_path / "allowed"))
    ok(a, "apply", "ensure-line", "README", "y")
    appended = git_env(a, "push", "origin", f"{ref}:{ref}")  # PATH without git-wal
    assert appended.returncode == 0
    assert "gitwal: warning: gitwal cannot run here" in appended.stderr
    assert "signatures were not checked" in appended.stderr
    forced = git_env(a, "push", "--force", "origin", f"{ref}~1:{ref}")
    assert forced.returncode != 0 and f"refusing to rewrite {ref}" in forced.stderr

    git(server, "config", "wal.receive.requireSigned", "true")
    ok(a, "apply", "ensure-line", "README", "z")
    required = git_env(a, "push", "origin", f"{ref}:{ref}")
    assert required.returncode != 0
    assert "wal.receive.requireSigned is set, but gitwal cannot run here" in required.stderr
    assert git(server, "rev-parse", ref) != git(a, "rev-parse", ref)


@pytest.mark.slow
def test_pre_receive_checks_signatures_of_new_appends(tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    ok(server, "hooks", "install")
    trusted, untrusted = tmp_path / "keys" / "trusted", tmp_path / "keys" / "untrusted"
    allowed = tmp_path / "allowed_signers"
    trust_add(allowed, generate_key(trusted), "agent@example.com")
    generate_key(untrusted)
    git(server, "config", "wal.receive.requireSigned", "true")
    git(server, "config", "wal.receive.allowedSigners", str(allowed))

    def agent(name: str, key: Path | None) -> tuple[Path, str]:
        repo = init_repo(tmp_path / name)
        git(repo, "remote", "add", "origin", str(server))
        if key is not None:
            git(repo, "config", "wal.signingKey", str(key))
        run = ok(repo, "begin", "--task", name).strip()
        ok(repo, "apply", "ensure-line", "README", name)
        return repo, f"refs/wal/{run}"

    signed, ref = agent("signed", trusted)
    assert wal(signed, "push").returncode == 0
    ok(signed, "checkpoint", "--detached")
    ok(signed, "apply", "ensure-line", "README", "more")
    ok(signed, "compact")  # a rewritten chain, re-signed: it goes through with its archive
    pushed = wal(signed, "push", "--json")
    assert pushed.returncode == 0, pushed.stderr
    assert git(server, "rev-parse", ref) == git(signed, "rev-parse", ref)

    unsigned, uref = agent("unsigned", None)
    refused = wal(unsigned, "push")
    assert refused.returncode == 1
    first = git(unsigned, "rev-list", "--reverse", uref).split()[0]
    assert f"remote: gitwal: refusing {uref}: append {first[:12]}: append not signed" \
        in refused.stderr
    assert f"error: {uref}: rejected ([remote rejected] (pre-receive hook declined))" \
        in refused.stderr

    stranger, sref = agent("stranger", untrusted)
    refused = wal(stranger, "push")
    assert refused.returncode == 1 and f"refusing {sref}: append" in refused.stderr
    assert "signed by untrusted key SHA256:" in refused.stderr
    assert git(server, "for-each-ref", "--format=%(refname)", "refs/wal/").split() == [ref]

    (allowed).write_text("not a valid line\n")  # fail closed: nothing is let through
    ok(signed, "apply", "ensure-line", "README", "after the file broke")
    broken = wal(signed, "push")
    assert broken.returncode == 1 and "pre-receive hook declined" in broken.stderr
    assert git(server, "rev-parse", ref) != git(signed, "rev-parse", ref)


def test_local_hooks_keep_archives_and_detached_checkpoints_and_verify_names_one_gone(
        repo: Path) -> None:
    """Compacted history and detached checkpoints are written once, like the
    server's pre-receive keeps them: `git update-ref -d` is refused here too;
    deleted anyway (hooks bypassed) and collected, verify says so."""
    ok(repo, "hooks", "install")
    run = ok(repo, "begin", "--run", "r").strip()
    for n, line in enumerate(("x", "y", "z"), start=1):
        ok(repo, "apply", "ensure-line", "README", line)
        ok(repo, "checkpoint", "--detached")
        ok(repo, "compact")
        assert git(repo, "rev-parse", "-q", "--verify", f"refs/wal-archive/{run}/{n}")
    archive = f"refs/wal-archive/{run}/2"
    [checkpoint] = git(repo, "for-each-ref", "--format=%(refname)",
                       f"refs/wal-checkpoints/{run}/").split()[-1:]
    head = git(repo, "rev-parse", "HEAD").strip()
    for ref in (archive, checkpoint):
        gone = git_env(repo, "update-ref", "-d", ref)
        assert gone.returncode != 0 and f"refusing to delete {ref}" in gone.stderr
        moved = git_env(repo, "update-ref", ref, head)
        assert moved.returncode != 0 and f"refusing to change {ref}" in moved.stderr
    assert git_env(repo, "gc", "-q", "--prune=now").returncode == 0  # pack-refs is fine
    assert json.loads(ok(repo, "verify", "--all", "--json"))["ok"]

    for ref in (archive, checkpoint):
        assert git_env(repo, "-c", "core.hooksPath=/dev/null", "update-ref", "-d",
                       ref).returncode == 0
    assert git_env(repo, "gc", "-q", "--prune=now").returncode == 0
    proc = wal(repo, "verify", "--all")
    assert proc.returncode == 1, proc.stdout
    assert f"the archive {archive} is missing" in proc.stdout
    assert f"the detached checkpoint {checkpoint} is missing" in proc.stdout
