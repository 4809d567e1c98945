"""Keys, allowed signers, sshsig and signed commits against the real tools:
ssh-keygen -Y, git verify-commit, git commit -S.

No mocks: keys, signatures and commits cross between gitwal and OpenSSH/git
in both directions. Tests that need ssh-keygen skip when it is absent.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import shutil
import stat
import struct
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitwal.base.errors import WalError
from gitwal.signing import add_signer, allowed_signers, keys, sshsig
from gitwal.signing import commits as signing
from gitwal.signing.errors import (
    BadAllowedSigners,
    BadKey,
    BadSignature,
    KeyExists,
    SigningError,
    UntrustedSigner,
)
from gitwal.signing.keys import SigningKey

from .conftest import git, init_repo

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh_keygen = pytest.mark.skipif(
    SSH_KEYGEN is None,
    reason="ssh-keygen not found: install openssh-client (apt-get install -y openssh-client) "
    "to run the OpenSSH/git interop tests",
)
PRINCIPAL = "gitwal@test"
DATA = b"wal 7 replace_symbol src/a.ts: getUserById -> fetchUser\n"


def keygen(*args: str, stdin: bytes | None = None, cwd: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    assert SSH_KEYGEN is not None
    return subprocess.run([SSH_KEYGEN, *args], input=stdin.decode() if stdin else None,
                          capture_output=True, text=True, cwd=cwd)


def ssh_key(tmp_path: Path, name: str = "sshkey", kind: str = "ed25519") -> Path:
    """A key made by ssh-keygen itself (no passphrase)."""
    path = tmp_path / name
    proc = keygen("-q", "-t", kind, "-N", "", "-C", f"{name}@ssh-keygen", "-f", str(path))
    assert proc.returncode == 0, proc.stderr
    return path


def blob_of(pub_line: str) -> bytes:
    return base64.b64decode(pub_line.split()[1])


@pytest.fixture
def key_path(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "signing_key"
    keys.generate_key(path)
    return path


@pytest.fixture
def key(key_path: Path) -> SigningKey:
    return keys.load_key(key_path)


@pytest.fixture
def allowed(tmp_path: Path, key: SigningKey) -> Path:
    file = tmp_path / "allowed_signers"
    assert add_signer.trust_add(file, key.public_line, PRINCIPAL)
    return file


def rearmor(blob: bytes) -> str:
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "\n".join(["-----BEGIN SSH SIGNATURE-----", *lines, "-----END SSH SIGNATURE-----"])


def dearmor(armored: str) -> bytes:
    return base64.b64decode("".join(armored.strip().splitlines()[1:-1]))


def git_ssh(repo: Path, allowed: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}", *args],
        cwd=repo, capture_output=True, text=True,
    )


def signed_commit(repo_path: Path, key: SigningKey, message: str = "wal 2 signed\n") -> str:
    repo = pygit2.Repository(str(repo_path))
    head = repo.head.peel(pygit2.Commit)
    who = pygit2.Signature("gitwal", "gitwal@localhost", 1764680000, 60)
    oid = signing.create_signed_commit(repo, key, head.tree_id, [head.id], who, who, message)
    return str(oid)


# -- (e) keys: location, permissions, no overwrite ----------------------------------


def test_generate_key_writes_0600_in_0700_dirs_and_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "gitwal" / "signing_key"
    line = keys.generate_key(path, comment="agent-hooks@box")
    assert line.startswith("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI")
    assert line.endswith(" agent-hooks@box") and len(line.split()) == 3
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    assert path.read_bytes().startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    pub = path.with_name("signing_key.pub")
    assert pub.read_text() == line + "\n"
    assert stat.S_IMODE(pub.stat().st_mode) == 0o644
    assert sorted(os.listdir(path.parent)) == ["signing_key", "signing_key.pub"]  # no temp files

    before = path.read_bytes()
    with pytest.raises(KeyExists) as exc:
        keys.generate_key(path)
    assert isinstance(exc.value, WalError)
    assert "exists already" in exc.value.message and "never overwrites" in exc.value.message
    assert "move it away" in exc.value.hint
    assert path.read_bytes() == before
    assert keys.load_key(path).public_line == line

    # a dangling symlink is "something at the path" too: nothing is written through it
    link = tmp_path / "link_key"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(KeyExists):
        keys.generate_key(link)
    assert not (tmp_path / "elsewhere").exists()


def test_default_key_path_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert keys.default_key_path() == tmp_path / "xdg" / "gitwal" / "signing_key"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # the XDG spec says: ignore it
    assert keys.default_key_path() == Path.home() / ".config" / "gitwal" / "signing_key"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert keys.default_key_path() == Path.home() / ".config" / "gitwal" / "signing_key"


def test_load_key_refuses_missing_open_and_foreign_keys(key_path: Path, tmp_path: Path) -> None:
    with pytest.raises(BadKey, match="no signing key at") as exc:
        keys.load_key(tmp_path / "nope")
    assert "ssh-keygen -t ed25519" in exc.value.hint

    for mode in (0o640, 0o604, 0o660, 0o602):
        key_path.chmod(mode)
        with pytest.raises(BadKey, match=f"permissions {mode:04o} .* too open") as exc:
            keys.load_key(key_path)
        assert exc.value.hint.startswith(f"chmod 600 {key_path}")
    key_path.chmod(0o400)
    keys.load_key(key_path)  # read-only for the owner is fine, as for ssh

    junk = tmp_path / "junk"
    junk.write_text("not a key\n")
    junk.chmod(0o600)
    with pytest.raises(BadKey, match="is not an OpenSSH private key"):
        keys.load_key(junk)

    with pytest.raises(BadKey, match="not a regular file"):
        keys.load_key(tmp_path)


@needs_ssh_keygen
def test_load_key_refuses_non_ed25519_and_encrypted_keys(tmp_path: Path) -> None:
    ecdsa = ssh_key(tmp_path, "ecdsa", "ecdsa")
    with pytest.raises(BadKey, match="holds an ECDSA key; gitwal signs with Ed25519"):
        keys.load_key(ecdsa)
    rsa = ssh_key(tmp_path, "rsa", "rsa")
    with pytest.raises(BadKey, match="holds an RSA key; gitwal signs with Ed25519"):
        keys.load_key(rsa)
    # DSA: named from the file, with no key object of a deprecated type built
    # (the suite turns cryptography's DeprecationWarning into an error)
    if keygen("-q", "-t", "dsa", "-N", "", "-f", str(tmp_path / "dsa")).returncode == 0:
        with pytest.raises(BadKey, match="holds a DSA key; gitwal signs with Ed25519"):
            keys.load_key(tmp_path / "dsa")
    # an encrypted key of another type is refused as that type, without its passphrase
    assert keygen("-q", "-t", "rsa", "-N", "pw", "-f", str(tmp_path / "rsa_enc")).returncode == 0
    with pytest.raises(BadKey, match="holds an RSA key"):
        keys.load_key(tmp_path / "rsa_enc")
    # a damaged body is reported, never half-read
    broken = tmp_path / "broken"
    text = (tmp_path / "ecdsa").read_text().splitlines()
    broken.write_text("\n".join([text[0], "b3BlbnNzaC1rZXktdjEAAAAA", text[-1]]) + "\n")
    broken.chmod(0o600)
    with pytest.raises(BadKey, match=r"cannot read the signing key .*ends early"):
        keys.load_key(broken)

    enc = tmp_path / "enc"
    assert keygen("-q", "-t", "ed25519", "-N", "s3cret", "-f", str(enc)).returncode == 0
    with pytest.raises(BadKey, match=r"cannot read the signing key .*password-protected"):
        keys.load_key(enc)
    if importlib.util.find_spec("bcrypt") is None:  # cryptography decrypts with bcrypt only
        with pytest.raises(BadKey, match=r"passphrase-protected, .* needs the `bcrypt` package"):
            keys.load_key(enc, passphrase=b"s3cret")
    else:
        assert keys.load_key(enc, passphrase=b"s3cret").public_line.split()[:2] == (
            enc.with_name("enc.pub").read_text().split()[:2])


@needs_ssh_keygen
def test_keys_interoperate_with_ssh_keygen(key_path: Path, tmp_path: Path) -> None:
    # ssh-keygen reads our key and derives the same public key
    proc = keygen("-y", "-f", str(key_path))
    assert proc.returncode == 0, proc.stderr
    ours = keys.load_key(key_path)
    assert proc.stdout.split()[:2] == ours.public_line.split()[:2]
    # and prints the same fingerprint
    proc = keygen("-l", "-f", str(key_path.with_name("signing_key.pub")))
    assert proc.stdout.split()[1] == ours.fingerprint
    # we read a key ssh-keygen made
    theirs = ssh_key(tmp_path)
    loaded = keys.load_key(theirs)
    assert loaded.public_line == theirs.with_name("sshkey.pub").read_text().strip()
    assert loaded.comment == "sshkey@ssh-keygen"


# -- (f) allowed signers ----------------------------------------------------------


def test_trust_add_is_idempotent_and_creates_0644(tmp_path: Path, key: SigningKey) -> None:
    file = tmp_path / "trust" / "allowed_signers"
    assert add_signer.trust_add(file, key.public_line, PRINCIPAL) is True
    assert stat.S_IMODE(file.stat().st_mode) == 0o644
    first = file.read_text()
    assert first == f"{PRINCIPAL} {key.public_line}\n"
    assert add_signer.trust_add(file, key.public_line, PRINCIPAL) is False
    assert add_signer.trust_add(file, key.public_line.rsplit(" ", 1)[0], PRINCIPAL) is False
    assert file.read_text() == first

    other = SigningKey.generate("other")
    assert add_signer.trust_add(file, other.public_line, "other@test") is True
    assert add_signer.trust_add(file, key.public_line, "alias@test") is True  # a second name
    entries = allowed_signers.load_allowed(file)
    assert [(e.principals, e.line) for e in entries] == [
        ((PRINCIPAL,), 1), (("other@test",), 2), (("alias@test",), 3)]
    assert entries[0].public_key == key.public_key
    assert entries[0].fingerprint == key.fingerprint
    assert allowed_signers.find_signer(entries, key.public_key) == PRINCIPAL
    assert allowed_signers.find_signer(entries, other.public_key) == "other@test"
    assert allowed_signers.find_signer(entries, SigningKey.generate().public_key) is None


def test_trust_add_refuses_bad_input(tmp_path: Path, key: SigningKey) -> None:
    file = tmp_path / "allowed_signers"
    for name in ("two words", "a,b", "", "*", 'q"uote', "#x"):
        with pytest.raises(SigningError, match="cannot be a principal"):
            add_signer.trust_add(file, key.public_line, name)
    with pytest.raises(SigningError, match="not a public key line"):
        add_signer.trust_add(file, "ssh-ed25519", PRINCIPAL)
    kind, b64, _ = key.public_line.split()
    with pytest.raises(SigningError, match="the line says ssh-rsa but the key is ssh-ed25519"):
        add_signer.trust_add(file, f"ssh-rsa {b64}", PRINCIPAL)
    with pytest.raises(SigningError, match="not valid base64"):
        add_signer.trust_add(file, f"{kind} {b64[:-3]}!!!", PRINCIPAL)
    assert not file.exists()

    file.write_text("broken line\n")
    with pytest.raises(BadAllowedSigners, match=r"allowed_signers:1: "):
        add_signer.trust_add(file, key.public_line, PRINCIPAL)
    assert file.read_text() == "broken line\n"

    file.write_text(f"x@y {key.public_line}")  # no final newline: ours goes on a line of its own
    assert add_signer.trust_add(file, key.public_line, PRINCIPAL)
    assert [e.principals for e in allowed_signers.load_allowed(file)] == [("x@y",), (PRINCIPAL,)]


def test_trust_add_replaces_the_file_keeping_its_mode_and_a_symlink_to_it(
        tmp_path: Path, key: SigningKey) -> None:
    real = tmp_path / "dotfiles" / "allowed_signers"
    real.parent.mkdir()
    real.write_text(f"x@y {key.public_line}\n")
    real.chmod(0o600)
    inode = real.stat().st_ino
    link = tmp_path / "config" / "allowed_signers"
    link.parent.mkdir()
    link.symlink_to(real)
    other = SigningKey.generate("other")
    assert add_signer.trust_add(link, other.public_line, "other@test") is True
    # the user's link stays, the list it names got the line, in a new file (rename)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == f"x@y {key.public_line}\nother@test {other.public_line}\n"
    assert real.stat().st_ino != inode
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(os.listdir(real.parent)) == ["allowed_signers"]  # no temp file left
    assert sorted(os.listdir(link.parent)) == ["allowed_signers"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only file")
def test_trust_add_leaves_a_read_only_file_alone(tmp_path: Path, key: SigningKey) -> None:
    file = tmp_path / "allowed_signers"
    file.write_text(f"x@y {key.public_line}\n")
    file.chmod(0o444)
    with pytest.raises(PermissionError):
        add_signer.trust_add(file, SigningKey.generate().public_line, "other@test")
    assert file.read_text() == f"x@y {key.public_line}\n"


def _add_after(gate: Any, file: Path, line: str, name: str) -> None:
    gate.wait()  # every adder starts together
    add_signer.trust_add(file, line, name)


def test_concurrent_trust_adds_lose_no_line(tmp_path: Path) -> None:
    """Each add replaces the file; adders that raced on the old one add to the new one."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    file = tmp_path / "trust" / "allowed_signers"
    adders = [(SigningKey.generate().public_line, f"n{i}@test") for i in range(6)]
    gate = ctx.Barrier(len(adders))
    procs = [ctx.Process(target=_add_after, args=(gate, file, line, name))
             for line, name in adders]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    got = sorted(file.read_text().splitlines())
    assert got == sorted(f"{name} {line}" for line, name in adders)
    assert os.listdir(file.parent) == ["allowed_signers"]


def test_load_allowed_reads_git_format_with_options(tmp_path: Path) -> None:
    a, b, c, d = (SigningKey.generate(n) for n in "abcd")
    file = tmp_path / "allowed_signers"
    file.write_text(
        "# people and hooks allowed to sign\n"
        "\n"
        f"alice@x,bob@x {a.public_line}\n"
        f'"carol@x" namespaces="file,git",valid-after="20200101" {b.public_line}\n'
        f'dave@x namespaces="file" {c.public_line}\n'
        f"ca@x cert-authority {d.public_line}\n"
        f'old@x valid-before="20200101Z" {d.public_line}\n'
        f'  eve@x   NAMESPACES="*,!file"   {d.public_line.split(" ", 2)[0]} '
        f'{d.public_line.split()[1]}   a comment with spaces  \n'
    )
    entries = allowed_signers.load_allowed(file)
    assert [e.line for e in entries] == [3, 4, 5, 6, 7, 8]
    assert entries[0].principals == ("alice@x", "bob@x") and entries[0].comment == "a"
    assert entries[1].principals == ("carol@x",)
    assert entries[1].namespaces == ("file", "git")
    assert entries[1].valid_after is not None and entries[1].valid_after.year == 2020
    assert entries[3].cert_authority
    assert entries[4].valid_before == datetime(2020, 1, 1, tzinfo=UTC)
    assert entries[5].namespaces == ("*", "!file") and entries[5].comment == "a comment with spaces"

    assert allowed_signers.find_signer(entries, a.public_key) == "alice@x,bob@x"
    assert allowed_signers.find_signer(entries, b.public_key) == "carol@x"
    assert allowed_signers.find_signer(entries, c.public_key) is None  # namespaces="file" only
    assert allowed_signers.find_signer(entries, c.public_key, namespace="file") == "dave@x"
    # d: the cert-authority line never matches a plain key, old@x expired, eve@x matches git
    assert allowed_signers.find_signer(entries, d.public_key) == "eve@x"
    assert allowed_signers.find_signer(entries, d.public_key, namespace="file") is None
    assert allowed_signers.find_signer(entries, d.public_key,
                                       at=datetime(2019, 6, 1, tzinfo=UTC)) == "old@x"
    assert allowed_signers.find_signer(entries, b.public_key,
                                       at=datetime(2019, 6, 1, tzinfo=UTC)) is None


@pytest.mark.parametrize(("line", "why"), [
    ("alice@x", "no key"),
    ("alice@x ssh-ed25519", "no key after the principals"),
    ("alice@x ssh-ed25519 AAAA!", "not valid base64"),
    ("alice@x ssh-ed25519 AAAA", "malformed"),
    ('alice@x nope="1" {key}', "unknown option"),
    ('alice@x valid-after="yesterday" {key}', "is not a time"),
    ('"alice@x {key}', "double quote is not closed"),
    ("alice@x,,bob@x {key}", "empty principal"),
])
def test_load_allowed_names_the_bad_line(tmp_path: Path, line: str, why: str) -> None:
    key = SigningKey.generate()
    file = tmp_path / "allowed_signers"
    file.write_text(f"ok@x {key.public_line}\n# fine\n" + line.format(key=key.public_line) + "\n")
    with pytest.raises(BadAllowedSigners, match=f"allowed_signers:3: .*{why}") as exc:
        allowed_signers.load_allowed(file)
    assert "allowedSignersFile" in exc.value.hint
    with pytest.raises(BadAllowedSigners, match="no allowed signers file at"):
        allowed_signers.load_allowed(tmp_path / "missing")


@needs_ssh_keygen
def test_git_format_file_is_read_the_same_by_ssh_keygen(tmp_path: Path, key: SigningKey,
                                                        allowed: Path) -> None:
    add_signer.trust_add(allowed, SigningKey.generate().public_line, "someone@else")
    sig = tmp_path / "data.sig"
    sig.write_text(sshsig.sign(key, DATA))
    proc = keygen("-Y", "find-principals", "-f", str(allowed), "-s", str(sig))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [PRINCIPAL]
    entries = allowed_signers.load_allowed(allowed)
    assert allowed_signers.find_signer(entries, key.public_key) == PRINCIPAL


# -- (a), (b) sshsig both ways ------------------------------------------------------


@needs_ssh_keygen
def test_our_signature_verifies_with_ssh_keygen(tmp_path: Path, key: SigningKey,
                                                allowed: Path) -> None:
    sig = tmp_path / "data.sig"
    sig.write_text(sshsig.sign(key, DATA))
    proc = keygen("-Y", "verify", "-f", str(allowed), "-I", PRINCIPAL, "-n", "git",
                  "-s", str(sig), stdin=DATA)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        f'Good "git" signature for {PRINCIPAL} with ED25519 key {key.fingerprint}')
    # ssh-keygen rejects it for other data and another namespace, like we do
    assert keygen("-Y", "verify", "-f", str(allowed), "-I", PRINCIPAL, "-n", "git",
                  "-s", str(sig), stdin=DATA + b"x").returncode != 0
    assert keygen("-Y", "verify", "-f", str(allowed), "-I", PRINCIPAL, "-n", "file",
                  "-s", str(sig), stdin=DATA).returncode != 0


@needs_ssh_keygen
def test_our_signature_is_byte_identical_to_ssh_keygens(tmp_path: Path, key_path: Path,
                                                        key: SigningKey) -> None:
    # Ed25519 is deterministic: same key, data, namespace -> the same armored block
    data = tmp_path / "data"
    data.write_bytes(DATA)
    proc = keygen("-Y", "sign", "-f", str(key_path), "-n", "git", str(data))
    assert proc.returncode == 0, proc.stderr
    assert sshsig.sign(key, DATA) == data.with_name("data.sig").read_text()


@needs_ssh_keygen
@pytest.mark.parametrize("hashalg", ["sha512", "sha256"])
def test_ssh_keygen_signature_verifies_with_ours(tmp_path: Path, hashalg: str) -> None:
    their_key = ssh_key(tmp_path)
    data = tmp_path / "data"
    data.write_bytes(DATA)
    proc = keygen("-Y", "sign", "-f", str(their_key), "-n", "git", "-O", f"hashalg={hashalg}",
                  str(data))
    assert proc.returncode == 0, proc.stderr
    armored = data.with_name("data.sig").read_text()
    pub_line = their_key.with_name("sshkey.pub").read_text()
    assert sshsig.verify(armored, DATA) == blob_of(pub_line)
    assert sshsig.verify(armored.encode(), DATA, namespace="git") == blob_of(pub_line)
    with pytest.raises(BadSignature, match="bad signature"):
        sshsig.verify(armored, DATA + b"\n")


@needs_ssh_keygen
def test_ssh_keygen_signature_with_other_key_types_is_refused_clearly(tmp_path: Path) -> None:
    their_key = ssh_key(tmp_path, "ecdsa", "ecdsa")
    data = tmp_path / "data"
    data.write_bytes(DATA)
    assert keygen("-Y", "sign", "-f", str(their_key), "-n", "git", str(data)).returncode == 0
    with pytest.raises(BadSignature,
                       match="unsupported key type ecdsa-sha2-nistp256: gitwal verifies "
                             "ssh-ed25519 signatures only"):
        sshsig.verify(data.with_name("data.sig").read_text(), DATA)


# -- (d) tampering -------------------------------------------------------------------


def test_tampering_fails_with_a_precise_message(key: SigningKey) -> None:
    armored = sshsig.sign(key, DATA)
    assert sshsig.verify(armored, DATA) == key.public_key

    with pytest.raises(BadSignature, match=r"^bad signature from key SHA256:.*changed after"):
        sshsig.verify(armored, DATA.replace(b"7", b"8"))

    other_ns = sshsig.sign(key, DATA, namespace="file")
    with pytest.raises(BadSignature, match="wrong signature namespace: signed for 'file', "
                                           "expected 'git'"):
        sshsig.verify(other_ns, DATA)
    assert sshsig.verify(other_ns, DATA, namespace="file") == key.public_key

    lines = armored.splitlines()
    with pytest.raises(BadSignature, match="truncated: no -----END SSH SIGNATURE----- line"):
        sshsig.verify("\n".join(lines[:-1]), DATA)
    with pytest.raises(BadSignature, match=r"not valid base64 \(truncated or edited\)"):
        sshsig.verify("\n".join([lines[0], lines[1], lines[-1]]), DATA)  # whole lines cut
    with pytest.raises(BadSignature, match=r"not valid base64 \(truncated or edited\)"):
        sshsig.verify("\n".join([lines[0], lines[1][:-1], *lines[2:]]), DATA)
    with pytest.raises(BadSignature, match="does not start with -----BEGIN SSH SIGNATURE"):
        sshsig.verify("\n".join(lines[1:]), DATA)
    with pytest.raises(BadSignature, match="does not start with -----BEGIN SSH SIGNATURE"):
        sshsig.verify("", DATA)
    with pytest.raises(BadSignature, match="the SSH signature is empty"):
        sshsig.verify(f"{lines[0]}\n{lines[-1]}\n", DATA)

    blob = dearmor(armored)
    with pytest.raises(BadSignature, match="the blob does not start with SSHSIG"):
        sshsig.verify(rearmor(b"SSHSIH" + blob[6:]), DATA)
    with pytest.raises(BadSignature, match="unsupported SSH signature version 2"):
        sshsig.verify(rearmor(blob[:6] + struct.pack(">I", 2) + blob[10:]), DATA)
    with pytest.raises(BadSignature, match=r"truncated or malformed \(ends early\)"):
        sshsig.verify(rearmor(blob[:60]), DATA)  # cut, then armored again
    with pytest.raises(BadSignature, match="4 bytes of trailing data"):
        sshsig.verify(rearmor(blob + b"\0\0\0\0"), DATA)
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(BadSignature, match="bad signature"):
        sshsig.verify(rearmor(flipped), DATA)

    # a valid signature by another key with this key's blob swapped in does not verify
    other = SigningKey.generate()
    forged = dearmor(sshsig.sign(other, DATA)).replace(other.public_key, key.public_key)
    with pytest.raises(BadSignature, match=f"bad signature from key {re.escape(key.fingerprint)}"):
        sshsig.verify(rearmor(forged), DATA)

    with pytest.raises(SigningError, match="namespace is empty"):
        sshsig.sign(key, DATA, namespace="")


# -- (c) signed commits ----------------------------------------------------------------


@needs_ssh_keygen
def test_signed_commit_passes_git_verify_commit(tmp_path: Path, key: SigningKey,
                                                allowed: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    oid = signed_commit(repo, key)

    proc = git_ssh(repo, allowed, "verify-commit", oid)
    assert proc.returncode == 0, proc.stderr
    good = f'Good "git" signature for {PRINCIPAL} with ED25519 key {key.fingerprint}'
    assert good in proc.stderr
    log = git_ssh(repo, allowed, "log", "--show-signature", "-1", oid)
    assert log.returncode == 0 and good in log.stdout
    assert git_ssh(repo, allowed, "log", "-1", "--format=%G?|%GS|%GF", oid).stdout.strip() == (
        f"G|{PRINCIPAL}|{key.fingerprint}")

    # the header is laid out as git lays it out (no line holding a lone space)
    raw = git(repo, "cat-file", "commit", oid)
    header = raw.split("\n\n", 1)[0].splitlines()
    assert [h.split()[0] for h in header[:5]] == ["tree", "parent", "author", "committer",
                                                  "gpgsig"]
    assert header[4] == "gpgsig -----BEGIN SSH SIGNATURE-----"
    assert header[-1] == " -----END SSH SIGNATURE-----"
    assert all(h.startswith(" ") and h.strip() for h in header[5:])

    verified = signing.verify_commit(pygit2.Repository(str(repo)), oid,
                                     allowed_signers.load_allowed(allowed))
    assert verified == signing.VerifiedSignature(PRINCIPAL, key.fingerprint, "ssh-ed25519",
                                                 key.public_key)


@needs_ssh_keygen
def test_commit_signed_by_git_verifies_with_ours(tmp_path: Path, key_path: Path,
                                                 key: SigningKey, allowed: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "README").write_text("changed\n")
    git(repo, "-c", "gpg.format=ssh", "-c", f"user.signingKey={key_path}",
        "commit", "-q", "-S", "-am", "signed by git")
    oid = git(repo, "rev-parse", "HEAD").strip()
    verified = signing.verify_commit(pygit2.Repository(str(repo)), oid,
                                     allowed_signers.load_allowed(allowed))
    assert verified is not None
    assert (verified.principal, verified.fingerprint) == (PRINCIPAL, key.fingerprint)


def test_unsigned_commit_gives_none_and_non_commits_are_refused(tmp_path: Path,
                                                                key: SigningKey) -> None:
    repo = init_repo(tmp_path / "repo")
    pyrepo = pygit2.Repository(str(repo))
    head = str(pyrepo.head.target)
    assert signing.verify_commit(pyrepo, head, []) is None
    tree = str(pyrepo.head.peel(pygit2.Commit).tree_id)
    with pytest.raises(SigningError, match="is not a commit"):
        signing.verify_commit(pyrepo, tree, [])
    with pytest.raises(SigningError, match="is not a commit"):
        signing.verify_commit(pyrepo, "0" * 40, [])


def test_commit_signature_checks_fail_precisely(tmp_path: Path, key: SigningKey,
                                                allowed: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    pyrepo = pygit2.Repository(str(repo))
    oid = signed_commit(repo, key)
    trusted = allowed_signers.load_allowed(allowed)

    # untrusted: a valid signature by a key nobody listed
    stranger = SigningKey.generate()
    other = signed_commit(repo, stranger)
    with pytest.raises(UntrustedSigner, match=f"commit {other[:12]}: good signature, but key "
                                              f"{re.escape(stranger.fingerprint)} is not in"
                       ) as exc:
        signing.verify_commit(pyrepo, other, trusted)
    assert exc.value.fingerprint == stranger.fingerprint
    assert "trust_add" in exc.value.hint

    # tampered: same signature header, changed message
    raw = pyrepo.odb.read(oid)[1]
    forged = pyrepo.odb.write(pygit2.enums.ObjectType.COMMIT,
                              raw.replace(b"wal 2 signed", b"wal 2 SIGNED"))
    with pytest.raises(BadSignature, match=f"commit {str(forged)[:12]}: bad signature from key "
                                           f"{re.escape(key.fingerprint)}"):
        signing.verify_commit(pyrepo, forged, trusted)

    # the key is trusted for another namespace only
    file_only = tmp_path / "file_only"
    file_only.write_text(f'{PRINCIPAL} namespaces="file" {key.public_line}\n')
    with pytest.raises(UntrustedSigner):
        signing.verify_commit(pyrepo, oid, allowed_signers.load_allowed(file_only))

    # a commit whose content already carries a signature cannot be signed again
    with pytest.raises(SigningError, match="carries a signature header already"):
        signing.sign_commit_buffer(key, raw)
    me = pygit2.Signature("Test", "test@example.com")  # the home has no user.name
    with pytest.raises(SigningError, match="must be UTF-8"):
        signing.create_signed_commit(pyrepo, key, pyrepo.head.peel(pygit2.Commit).tree_id, [],
                                     me, me, b"\xff\n")

    if SSH_KEYGEN is not None:  # git agrees on both failures
        proc = git_ssh(repo, allowed, "verify-commit", str(forged))
        assert proc.returncode != 0 and "incorrect signature" in proc.stderr
        proc = git_ssh(repo, allowed, "verify-commit", other)
        assert proc.returncode != 0 and "No principal matched" in proc.stderr


def test_sign_commit_buffer_signs_the_raw_content(key: SigningKey) -> None:
    content = (b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
               b"author a <a@b> 1700000000 +0000\ncommitter a <a@b> 1700000000 +0000\n\nm\n")
    armored = signing.sign_commit_buffer(key, content)
    assert sshsig.verify(armored, content, namespace="git") == key.public_key
    assert os.linesep == "\n" and armored.endswith("-----END SSH SIGNATURE-----\n")
