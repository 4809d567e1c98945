"""`git wal verify --allowed-signers/--require-signed/--require-sealed`: signatures and seals.

Two runs are built once through the real CLI with a key `git wal keygen` made:
SEALED (every tool kind, a detached checkpoint, a compaction that archived the
old chain, and a seal) and OPEN (signed, not sealed). Each test copies them and
tampers with git plumbing or pygit2 the way someone without (or with another)
key could; git itself (`git verify-commit`) confirms the signature verdicts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitwal.base.ids import Lsn, RunId
from gitwal.records.codec import encode
from gitwal.records.model import Seal, Unlogged
from gitwal.signing.add_signer import trust_add
from gitwal.signing.commits import create_signed_commit
from gitwal.signing.keys import generate_key, load_key
from gitwal.trust.signatures import signature_problems

from .conftest import git, init_repo, ok, sealed, wal

pytestmark = [
    pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                       reason="ssh-keygen not installed (git verifies with it)"),
    # One test process builds the module's `template` for all (`--dist loadgroup`).
    pytest.mark.xdist_group("verify_signatures"),
]

SEALED, OPEN = "sealed", "open"
RUN_ID = RunId(SEALED)
PRINCIPAL = "walsigner@ci"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trusted key, an untrusted one, and the allowed-signers file (outside any repo)."""
    d = tmp_path_factory.mktemp("keys")
    trust_add(d / "allowed_signers", generate_key(d / "trusted"), PRINCIPAL)
    generate_key(d / "intruder")
    return d


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, keys: Path) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("sig-home")
    with sealed(home, tmp_path_factory.mktemp("sig-run")):
        repo = init_repo(tmp_path_factory.mktemp("sig") / "repo",
                         {"a.txt": "alpha\n", "notes.txt": "one\ntwo\n"})
        git(repo, "config", "wal.signingKey", str(keys / "trusted"))
        ok(repo, "begin", "--run", SEALED, "--task", "sealed run")         # 1
        ok(repo, "apply", "write-file", "b.txt", input=b"bee\n")           # 2, 3
        ok(repo, "apply", "ensure-line", "a.txt", "beta")                  # 4, 5
        ok(repo, "checkpoint", "--detached")                               # 6
        ok(repo, "compact")
        ok(repo, "apply", "replace-text", "notes.txt", "--old", "two", "--new", "2")  # 7, 8
        ok(repo, "exec", "--", "sh", "-c", "echo made > made.txt")         # 9, 10
        ok(repo, "seal")                                                   # 11
        ok(repo, "begin", "--run", OPEN, "--task", "open run")             # 1
        ok(repo, "apply", "ensure-line", "a.txt", "gamma")                 # 2, 3
        yield repo


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "repo", symlinks=True))


def verify_json(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    proc = wal(repo, "verify", "--format", "json", *args)
    assert proc.stderr == "", proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def failures(report: dict[str, Any], run: str) -> list[tuple[str, int | None, str]]:
    (result,) = [r for r in report["runs"] if r["run"] == run]
    return [(f["check"], f["lsn"], f["reason"]) for f in result["failures"]]


def strict(keys: Path) -> tuple[str, ...]:
    return ("--allowed-signers", str(keys / "allowed_signers"), "--require-signed",
            "--require-sealed")


def git_verify(repo: Path, keys: Path, commit: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-c", "gpg.format=ssh", "-c",
                           f"gpg.ssh.allowedSignersFile={keys / 'allowed_signers'}",
                           "verify-commit", commit], cwd=repo, capture_output=True, text=True)


def rev(repo: Path, what: str) -> str:
    return git(repo, "rev-parse", what).strip()


def fp(keys: Path, name: str) -> str:
    return load_key(keys / name).fingerprint


def pygit(repo: Path) -> pygit2.Repository:
    return pygit2.Repository(str(repo))


# -- clean ------------------------------------------------------------------


def test_signed_sealed_run_passes_strict_checks_after_gc_and_in_a_mirror(
        repo: Path, keys: Path, tmp_path: Path) -> None:
    assert git(repo, "for-each-ref", "--format=%(refname)", f"refs/wal-archive/{SEALED}") \
        == f"refs/wal-archive/{SEALED}/1\n"
    appends = git(repo, "rev-list", f"refs/wal/{SEALED}", f"refs/wal-archive/{SEALED}/1",
                  f"refs/wal/{OPEN}").split()
    assert len(appends) == 15  # 6 archived, 6 live (from the re-signed checkpoint), 3 open
    for c in appends:
        assert git_verify(repo, keys, c).returncode == 0, c  # git agrees: all good

    code, report = verify_json(repo, "--run", SEALED, *strict(keys))
    assert code == 0, report
    assert report == {"ok": True, "allowed_signers": str(keys / "allowed_signers"),
                      "remote": None, "runs": [
                          {"run": SEALED, "ok": True, "records": 11, "failures": [],
                           "notes": [], "branch": "refs/heads/main"}]}
    text = ok(repo, "verify", "--run", SEALED, *strict(keys))
    assert text.splitlines() == [
        f"ok   {SEALED}: 11 records verified, branch refs/heads/main",
        "verified 1 run(s): all ok",
        f"signatures checked against {keys / 'allowed_signers'}",
    ]

    gc = subprocess.run(["git", "gc", "--prune=now", "--quiet"], cwd=repo, capture_output=True,
                        text=True)
    assert gc.returncode == 0, gc.stderr
    assert verify_json(repo, "--run", SEALED, *strict(keys)) == (0, report)

    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirror))
    assert verify_json(mirror, "--run", SEALED, *strict(keys)) == (0, report)

    clone = tmp_path / "clone"  # a CI checkout: refs/wal/* fetched by hand
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "fetch", "-q", "origin", "+refs/wal/*:refs/wal/*",
        "+refs/wal-archive/*:refs/wal-archive/*",
        "+refs/wal-checkpoints/*:refs/wal-checkpoints/*")
    code, in_clone = verify_json(clone, "--run", SEALED, "--branch", "origin/main",
                                 *strict(keys))
    assert code == 0 and in_clone["runs"][0]["branch"] == "origin/main"


def test_options_default_to_the_configured_file_and_refuse_without_one(
        repo: Path, keys: Path) -> None:
    # No file anywhere: signatures are not checked, and requiring them is an error.
    code, report = verify_json(repo, "--run", SEALED)
    assert code == 0 and report["allowed_signers"] is None
    assert report["runs"][0]["notes"] == [
        "the seal's signature was not checked: pass --allowed-signers"]
    for flag in ("--require-signed", "--require-sealed"):
        proc = wal(repo, "verify", flag)
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr.splitlines() == [
            f"error: {flag} needs an allowed-signers file: a signature by any key proves "
            "nothing",
            "hint: pass --allowed-signers FILE (git's gpg.ssh.allowedSignersFile format; "
            "`git wal trust add` writes one)"]
    # git's own setting is the default
    git(repo, "config", "gpg.ssh.allowedSignersFile", str(keys / "allowed_signers"))
    code, report = verify_json(repo, "--run", SEALED, "--require-signed", "--require-sealed")
    assert code == 0 and report["allowed_signers"] == str(keys / "allowed_signers")
    # a malformed file fails closed: no report at all
    bad = keys.parent / "bad_signers"
    bad.write_text("walsigner@ci ssh-ed25519 AAAA!!!\n")
    proc = wal(repo, "verify", "--allowed-signers", str(bad))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: {bad}:1: the key is not valid base64")


# -- the tamper corpus ------------------------------------------------------


def test_append_signed_by_an_untrusted_key(repo: Path, keys: Path) -> None:
    """The newest append of OPEN, re-signed (same content) with a key nobody trusts."""
    r = pygit(repo)
    old = r[rev(repo, f"refs/wal/{OPEN}")]
    assert isinstance(old, pygit2.Commit)
    forged = str(create_signed_commit(r, load_key(keys / "intruder"), old.tree_id,
                                      old.parent_ids, old.author, old.committer, old.message))
    git(repo, "update-ref", f"refs/wal/{OPEN}", forged)
    code, report = verify_json(repo, "--run", OPEN, "--allowed-signers",
                               str(keys / "allowed_signers"))
    assert code == 1
    assert failures(report, OPEN) == [("signature", 3, f"append {forged[:12]}: signed by "
                                       f"untrusted key {fp(keys, 'intruder')}")]
    proc = git_verify(repo, keys, forged)
    assert proc.returncode != 0 and "No principal matched" in proc.stderr

    # An archived segment is checked too: re-sign the head of SEALED's archive.
    archive = f"refs/wal-archive/{SEALED}/1"
    old = r[rev(repo, archive)]
    assert isinstance(old, pygit2.Commit)
    resigned = str(create_signed_commit(r, load_key(keys / "intruder"), old.tree_id,
                                        old.parent_ids, old.author, old.committer,
                                        old.message))
    git(repo, "update-ref", archive, resigned)
    code, report = verify_json(repo, "--run", SEALED, *strict(keys))
    assert code == 1 and failures(report, SEALED) == [
        ("signature", 6, f"append {resigned[:12]}: signed by untrusted key "
                         f"{fp(keys, 'intruder')}")]

    # Listed, but retired before the commit was made: untrusted too, and says why.
    retired = keys.parent / "retired_signers"
    kind, b64 = (keys / "trusted.pub").read_text().split()[:2]
    retired.write_text(f'walsigner@ci valid-before="20200101" {kind} {b64}\n')
    code, report = verify_json(repo, "--run", OPEN, "--allowed-signers", str(retired))
    expected = []
    for n, lsn in ((2, 1), (1, 2)):
        commit = rev(repo, f"refs/wal/{OPEN}~{n}")
        when = datetime.fromtimestamp(int(git(repo, "log", "-1", "--format=%ct", commit)), UTC)
        expected.append(("signature", lsn, f"append {commit[:12]}: signed by untrusted key "
                         f"{fp(keys, 'trusted')} (its allowed-signers line does not cover "
                         f"namespace git at {when:%Y-%m-%d %H:%M:%S} UTC)"))
    expected.append(("signature", 3, f"append {forged[:12]}: signed by untrusted key "
                     f"{fp(keys, 'intruder')}"))
    assert code == 1 and failures(report, OPEN) == expected


def test_signature_over_different_content(repo: Path, keys: Path) -> None:
    """The commit record of OPEN (LSN 3) now claims a check ran; the signature header is
    kept and the commit re-hashed, as anyone without the key would have to."""
    tip = rev(repo, f"refs/wal/{OPEN}")
    entries = git(repo, "ls-tree", tip).splitlines()
    (line,) = [e for e in entries if e.endswith("\t000000000003.json")]
    record = json.loads(git(repo, "cat-file", "blob", line.split()[2]))
    record["verified"] = "hash==post && check ok: make test"
    blob = git(repo, "hash-object", "-w", "--stdin", input=json.dumps(
        record, sort_keys=True, separators=(",", ":")).encode()).strip()
    tree = git(repo, "mktree", input="".join(
        (f"100644 blob {blob}\t000000000003.json" if e == line else e) + "\n"
        for e in entries).encode()).strip()
    raw = git(repo, "cat-file", "commit", tip)
    assert "\ngpgsig -----BEGIN SSH SIGNATURE-----\n" in raw
    forged = git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=re.sub(
        r"^tree [0-9a-f]{40}$", f"tree {tree}", raw, count=1, flags=re.M).encode()).strip()
    git(repo, "update-ref", f"refs/wal/{OPEN}", forged)

    code, report = verify_json(repo, "--run", OPEN, "--allowed-signers",
                               str(keys / "allowed_signers"))
    assert code == 1
    assert failures(report, OPEN) == [(
        "signature", 3, f"append {forged[:12]}: bad signature from key {fp(keys, 'trusted')}: "
        "the signed data or the signature was changed after signing")]
    proc = git_verify(repo, keys, forged)
    assert proc.returncode != 0 and "incorrect signature" in proc.stderr
    # Without an allowed-signers file the forgery is invisible: nothing else is wrong.
    assert verify_json(repo, "--run", OPEN)[0] == 0


def test_tail_cut_of_a_sealed_run_is_caught_only_by_require_sealed(
        repo: Path, keys: Path) -> None:
    git(repo, "update-ref", f"refs/wal/{SEALED}", f"refs/wal/{SEALED}~1")
    assert verify_json(repo, "--run", SEALED, "--allowed-signers",
                       str(keys / "allowed_signers"), "--require-signed")[0] == 0
    code, report = verify_json(repo, "--run", SEALED, *strict(keys))
    assert code == 1
    assert failures(report, SEALED) == [("seal", 10, "run not sealed: the tail may have been "
                                         "cut (the log ends with the commit record at LSN 10)")]
    suite = ET.fromstring(ok_or_fail(repo, "verify", "--run", SEALED, "--format", "junit",
                                     *strict(keys)))
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("message") == (
        "1 failure(s); first: seal: run not sealed: the tail may have been cut (the log ends "
        "with the commit record at LSN 10)")
    assert failure.text == (f"{SEALED} LSN 10: seal: run not sealed: the tail may have been "
                            "cut (the log ends with the commit record at LSN 10)")


def ok_or_fail(repo: Path, *args: str) -> str:
    proc = wal(repo, *args)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    return proc.stdout


def forge_append(repo: Path, record: Seal | Unlogged, keep: list[tuple[str, bool]],
                 sign: str | None, parent: str) -> str:
    """An append commit as gitwal would write it (identity, layout), made with pygit2."""
    r = pygit(repo)
    tb = r.TreeBuilder()
    tb.insert(f"{record.lsn:012d}.json", r.create_blob(encode(record)), pygit2.GIT_FILEMODE_BLOB)
    for oid, is_tree in keep:
        tb.insert(f"obj-{oid}", pygit2.Oid(hex=oid),
                  pygit2.GIT_FILEMODE_TREE if is_tree else pygit2.GIT_FILEMODE_BLOB)
    head = r[parent]
    assert isinstance(head, pygit2.Commit)
    who = head.author
    message = f"wal {record.lsn} forged\n"
    if sign is None:
        return str(r.create_commit(None, who, who, message, tb.write(), [pygit2.Oid(hex=parent)]))
    return str(create_signed_commit(r, load_key(Path(sign)), tb.write(), [parent], who, who,
                                    message))


def test_records_after_a_seal_are_caught(repo: Path, keys: Path) -> None:
    tip = rev(repo, f"refs/wal/{SEALED}")
    blob = str(pygit(repo).create_blob(b"slipped in\n"))
    late = Unlogged(RUN_ID, Lsn(12), ("late.txt",), ("absent",), (blob,), "forger")
    forged = forge_append(repo, late, [(blob, False)], None, tip)
    git(repo, "update-ref", f"refs/wal/{SEALED}", forged)
    code, report = verify_json(repo, "--run", SEALED)
    assert code == 1
    after = ("chain", 12, "records after the seal at LSN 11: LSN 12 (nothing may follow a seal)")
    assert failures(report, SEALED) == [after]
    code, report = verify_json(repo, "--run", SEALED, *strict(keys))
    assert failures(report, SEALED) == [
        ("signature", 12, f"append {forged[:12]}: append not signed"),
        after,
        ("seal", 12, "run not sealed: the tail may have been cut (the log ends with the "
                     "unlogged record at LSN 12)"),
    ]


def test_seal_that_names_the_wrong_head_or_tree(repo: Path, keys: Path) -> None:
    """Forged seals, signed with the trusted key (a signer that signs what it is handed)."""
    seal_commit = rev(repo, f"refs/wal/{SEALED}")
    before = rev(repo, f"{seal_commit}~1")
    real = json.loads(git(repo, "cat-file", "blob", f"{seal_commit}:000000000011.json"))
    trusted = str(keys / "trusted")
    # the sealed tree, but with made.txt (written by the exec step) holding other bytes
    made = git(repo, "rev-parse", f"{real['tree']}:made.txt").strip()
    other = git(repo, "hash-object", "-w", "--stdin", input=b"forged\n").strip()
    other_tree = git(repo, "mktree", input=git(repo, "ls-tree", real["tree"]).replace(
        made, other).encode()).strip()

    wrong_tree = Seal(RUN_ID, Lsn(11), 10, before, other_tree)
    forged = forge_append(repo, wrong_tree, [(other_tree, True)], trusted, before)
    git(repo, "update-ref", f"refs/wal/{SEALED}", forged)
    code, report = verify_json(repo, "--run", SEALED, *strict(keys))
    assert code == 1 and failures(report, SEALED) == [
        ("seal", 11, f"its tree {other_tree[:12]}: made.txt is {other[:12]}, but the log "
                     f"leaves it {made[:12]}")]

    grand = rev(repo, f"{before}~1")
    wrong_head = Seal(RUN_ID, Lsn(11), 10, grand, real["tree"])
    forged = forge_append(repo, wrong_head, [(real["tree"], True)], trusted, before)
    git(repo, "update-ref", f"refs/wal/{SEALED}", forged)
    code, report = verify_json(repo, "--run", SEALED, *strict(keys))
    assert failures(report, SEALED) == [
        ("seal", 11, f"seal names head {grand[:12]}, but its append {forged[:12]} follows "
                     f"{before[:12]}")]

    unsigned = Seal(RUN_ID, Lsn(11), 10, before, real["tree"])
    forged = forge_append(repo, unsigned, [(real["tree"], True)], None, before)
    git(repo, "update-ref", f"refs/wal/{SEALED}", forged)
    code, report = verify_json(repo, "--run", SEALED)  # no signature options at all
    assert failures(report, SEALED) == [
        ("seal", 11, f"the seal's append {forged[:12]} is not signed (gitwal signs every seal)")]


def test_unsigned_appends_fail_only_when_required(repo: Path, keys: Path) -> None:
    git(repo, "config", "--unset", "wal.signingKey")
    ok(repo, "apply", "--run", OPEN, "ensure-line", "a.txt", "delta")  # LSN 4, 5 unsigned
    tip = rev(repo, f"refs/wal/{OPEN}")
    assert verify_json(repo, "--run", OPEN, "--allowed-signers",
                       str(keys / "allowed_signers"))[0] == 0
    code, report = verify_json(repo, "--run", OPEN, "--allowed-signers",
                               str(keys / "allowed_signers"), "--require-signed")
    assert code == 1 and failures(report, OPEN) == [
        ("signature", 4, f"append {rev(repo, tip + '~1')[:12]}: append not signed"),
        ("signature", 5, f"append {tip[:12]}: append not signed"),
    ]


def test_signature_problems_is_a_library_call_for_hooks(repo: Path, keys: Path) -> None:
    """What a pre-receive hook calls with the commits a push brings."""
    r = pygit(repo)
    good = rev(repo, f"refs/wal/{OPEN}")
    old = r[good]
    assert isinstance(old, pygit2.Commit)
    untrusted = str(create_signed_commit(r, load_key(keys / "intruder"), old.tree_id,
                                         old.parent_ids, old.author, old.committer,
                                         "other message\n"))
    unsigned = str(r.create_commit(None, old.author, old.committer, "x\n", old.tree_id,
                                   old.parent_ids))
    allowed = keys / "allowed_signers"
    ids = [good, untrusted, unsigned, good, "0" * 40]
    assert signature_problems(r, ids, allowed, require_signed=True) == [
        (untrusted, f"signed by untrusted key {fp(keys, 'intruder')}"),
        (unsigned, "append not signed"),
        ("0" * 40, "not a commit in this repository"),
    ]
    assert signature_problems(r, ids, allowed, require_signed=False) == [
        (untrusted, f"signed by untrusted key {fp(keys, 'intruder')}"),
        ("0" * 40, "not a commit in this repository"),
    ]
    # without a file: validity only (any key's good signature passes)
    assert signature_problems(r, [good, untrusted], None, require_signed=True) == []
