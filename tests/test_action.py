"""The GitHub Action's run step (.ci/action-verify.sh), run as a runner would.

The "CI workspace" is a fresh clone of a file:// origin, as actions/checkout
leaves it; the agent's repository pushed its branch and its run's log there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

from gitwal.signing.add_signer import trust_add
from gitwal.signing.keys import generate_key

from .conftest import git, init_repo, ok

ROOT = Path(__file__).resolve().parents[1]


def _agent_pushes_a_run(tmp_path: Path, key: Path | None = None) -> tuple[Path, Path, str]:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    agent = init_repo(tmp_path / "agent")
    git(agent, "remote", "add", "origin", origin.as_uri())
    if key is not None:
        git(agent, "config", "wal.signingKey", str(key))
    run = ok(agent, "begin", "--task", "add notes").strip()
    ok(agent, "apply", "write-file", "notes.txt", "--from", "-", input=b"one\n")
    ok(agent, "apply", "ensure-line", "notes.txt", "two")
    ok(agent, "checkpoint")  # a commit on main that the log explains
    git(agent, "push", "-q", "origin", "main")
    ok(agent, "push")
    return origin, agent, run


def _run_action(tmp_path: Path, origin: Path, env: dict[str, str],
                action_path: Path = ROOT) -> tuple[subprocess.CompletedProcess[str], Path]:
    workspace = tmp_path / "workspace"
    if not workspace.exists():
        git(tmp_path, "clone", "-q", origin.as_uri(), str(workspace))
    runner = tmp_path / "runner"
    runner.mkdir(exist_ok=True)
    full = {**os.environ, "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_ACTION_PATH": str(action_path), "RUNNER_TEMP": str(runner),
            "GITHUB_OUTPUT": str(runner / "output"),
            "GITHUB_STEP_SUMMARY": str(runner / "summary"), "INPUT_ARGS": "--all",
            "INPUT_REMOTE": "origin", "INPUT_REPORT": "reports/gitwal.xml", **env}
    proc = subprocess.run(["bash", str(action_path / ".ci" / "action-verify.sh")],
                          cwd=workspace, env=full, capture_output=True, text=True)
    return proc, workspace / "reports" / "gitwal.xml"


def _tamper(agent: Path, ref: str, lsn: int) -> None:
    """Rewrite the log: the commit record ``lsn`` now claims another post-image.

    The later appends are re-parented unchanged, as a consistent rewrite would.
    """
    chain = git(agent, "rev-list", "--reverse", ref).split()
    env = {**os.environ, "GIT_AUTHOR_NAME": "gitwal", "GIT_AUTHOR_EMAIL": "gitwal@localhost",
           "GIT_COMMITTER_NAME": "gitwal", "GIT_COMMITTER_EMAIL": "gitwal@localhost"}
    parent = ""
    for commit in chain:
        lines = []
        for entry in git(agent, "ls-tree", commit).splitlines():
            meta, name = entry.split("\t")
            mode, kind, oid = meta.split()
            if name == f"{lsn:012d}.json":
                record = json.loads(git(agent, "cat-file", "blob", oid))
                assert record["type"] == "commit"
                forged = git(agent, "hash-object", "-w", "--stdin", input=b"forged\n")
                record["post"] = [forged.strip()]
                data = json.dumps(record, sort_keys=True, separators=(",", ":"),
                                  ensure_ascii=False).encode()
                oid = git(agent, "hash-object", "-w", "--stdin", input=data).strip()
            lines.append(f"{mode} {kind} {oid}\t{name}")
        tree = git(agent, "mktree", input=("\n".join(lines) + "\n").encode()).strip()
        message = git(agent, "log", "-1", "--format=%B", commit)
        parents = ["-p", parent] if parent else []
        parent = subprocess.run(["git", "commit-tree", tree, *parents, "-m", message],
                                cwd=agent, env=env, check=True, capture_output=True,
                                text=True).stdout.strip()
    git(agent, "push", "-q", "--force", "origin", f"{parent}:{ref}")


def _junit(report: Path) -> ET.Element:
    suite = ET.parse(report).getroot()
    assert suite.tag == "testsuite" and suite.get("name") == "gitwal-verify"
    return suite


def test_action_verifies_the_remote_logs_and_fails_on_a_tampered_one(tmp_path: Path) -> None:
    origin, agent, run = _agent_pushes_a_run(tmp_path)
    proc, report = _run_action(tmp_path, origin, {"INPUT_VERSION": "installed"})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    suite = _junit(report)
    assert (suite.get("tests"), suite.get("failures")) == ("1", "0")
    [case] = suite.findall("testcase")
    assert case.get("name") == run and case.find("failure") is None
    # The plan's branch was found (from the remote's main) and checked.
    assert "was not checked" not in ET.tostring(case, encoding="unicode")
    assert "gitwal verify: 1 run(s), 0 failed (exit 0)" in proc.stdout
    outputs = (tmp_path / "runner" / "output").read_text().splitlines()
    assert outputs == [f"report={report}", "ok=true"]
    workspace = tmp_path / "workspace"
    assert not git(workspace, "for-each-ref", "refs/wal/")  # the workspace's logs untouched

    _tamper(agent, f"refs/wal/{run}", 5)
    proc, report = _run_action(tmp_path, origin, {"INPUT_VERSION": "installed"})
    assert proc.returncode == 1, proc.stderr + proc.stdout
    suite = _junit(report)
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.text is not None
    assert f"{run} LSN 5: intent: commit LSN 5 records notes.txt" in failure.text
    # The failure as a GitHub annotation too, naming the run and the LSN.
    assert f"::error title=gitwal verify::run {run}: " in proc.stdout
    assert f"{run} LSN 5: intent: commit LSN 5 records notes.txt" in proc.stdout
    assert "gitwal verify: 1 run(s), 1 failed (exit 1)" in (
        tmp_path / "runner" / "summary").read_text()
    assert (tmp_path / "runner" / "output").read_text().splitlines()[-1] == "ok=false"


def test_action_checks_signatures_against_the_allowed_signers_input(tmp_path: Path) -> None:
    key, other = tmp_path / "keys" / "agent", tmp_path / "keys" / "other"
    trusted, wrong = tmp_path / "trusted", tmp_path / "wrong"
    trust_add(trusted, generate_key(key), "agent@example.com")
    trust_add(wrong, generate_key(other), "other@example.com")
    origin, _agent, run = _agent_pushes_a_run(tmp_path, key)
    args = {"INPUT_VERSION": "installed", "INPUT_ARGS": "--all --require-signed"}
    proc, report = _run_action(tmp_path, origin, {**args, "INPUT_ALLOWED_SIGNERS": str(trusted)})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert _junit(report).get("failures") == "0"
    proc, report = _run_action(tmp_path, origin, {**args, "INPUT_ALLOWED_SIGNERS": str(wrong)})
    assert proc.returncode == 1
    failure = _junit(report).find("testcase/failure")
    assert failure is not None and failure.text is not None
    assert f"{run} LSN 1:" in failure.text and "signed by untrusted key" in failure.text


def test_action_installs_gitwal_from_its_own_checkout(tmp_path: Path) -> None:
    origin, _agent, run = _agent_pushes_a_run(tmp_path)
    # The action's checkout: what `uses: <owner>/gitwal@<ref>` puts on the runner.
    action = tmp_path / "action"
    for name in ("action.yml", "pyproject.toml", "README.md", "LICENSE", ".ci/action-verify.sh"):
        (action / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, action / name)
    for package in ("gitwal", "hooks", "man"):  # hooks/ ships as gitwal._hooks
        shutil.copytree(ROOT / package, action / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    # pip builds the action's checkout as on a runner (the build backend comes
    # from the package index); the runtime dependencies are this interpreter's
    # (pygit2, click, ...), seen through a .pth file, but not its gitwal.
    venv = tmp_path / "runner" / "gitwal-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {"INPUT_VERSION": "", "PATH": "/usr/bin:/bin",
           "INPUT_PIP_ARGS": "--no-deps"}
    proc, report = _run_action(tmp_path, origin, env, action_path=action)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert (venv / "bin" / "git-wal").exists()
    [case] = _junit(report).findall("testcase")
    assert case.get("name") == run
    assert "reusing the install" not in proc.stdout
    # A second job with the install restored (the cache step): not reinstalled.
    proc, report = _run_action(tmp_path, origin, env, action_path=action)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "gitwal: reusing the install" in proc.stdout
    # Another gitwal in the action's checkout: the stamp differs, reinstalled.
    with (action / "gitwal" / "version.py").open("a") as f:
        f.write("# changed\n")
    proc, report = _run_action(tmp_path, origin, env, action_path=action)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "reusing the install" not in proc.stdout


def test_action_fails_when_the_remote_holds_no_log_unless_allowed(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    agent = init_repo(tmp_path / "agent")
    git(agent, "remote", "add", "origin", origin.as_uri())
    ok(agent, "begin", "--task", "never pushed")
    git(agent, "push", "-q", "origin", "HEAD:main")  # the branch, not the log
    proc, report = _run_action(tmp_path, origin, {"INPUT_VERSION": "installed"})
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert "::error title=gitwal verify::no gitwal run log on origin" in proc.stdout
    assert not report.exists()
    assert (tmp_path / "runner" / "output").read_text().splitlines()[-1] == "ok=false"
    proc, _ = _run_action(tmp_path, origin, {"INPUT_VERSION": "installed",
                                             "INPUT_ALLOW_EMPTY": "true"})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "::notice title=gitwal verify::no gitwal run log on origin" in proc.stdout


def test_action_refuses_a_python_older_than_gitwal_needs(tmp_path: Path) -> None:
    origin, _agent, _run = _agent_pushes_a_run(tmp_path)
    old = tmp_path / "old-python"
    old.mkdir()
    # A python3 that is 3.10 as far as the version check can tell.
    (old / "python3").write_text("#!/bin/sh\n"
                                 "[ \"$1\" = -V ] && { echo 'Python 3.10.12'; exit 0; }\n"
                                 "exit 1\n")
    (old / "python3").chmod(0o755)
    proc, _ = _run_action(tmp_path, origin, {"INPUT_VERSION": "",
                                             "PATH": f"{old}:/usr/bin:/bin"})
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert ("::error title=gitwal verify::gitwal needs Python 3.11 or newer; found "
            "Python 3.10.12") in proc.stdout


def test_action_yml_hands_every_input_to_the_script() -> None:
    text = (ROOT / "action.yml").read_text()
    inputs_block = text[text.index("\ninputs:\n"):text.index("\noutputs:\n")]
    names = re.findall(r"^  ([a-z-]+):$", inputs_block, re.M)
    assert names == ["version", "args", "allowed-signers", "remote", "report", "pip-args",
                     "allow-empty", "python-version", "cache"]
    script = (ROOT / ".ci" / "action-verify.sh").read_text()
    steps_only = {"python-version", "cache"}  # used by the action's own steps
    for name in names:
        var = "INPUT_" + name.upper().replace("-", "_")
        if name in steps_only:
            assert f"inputs.{name}" in text[text.index("\nruns:\n"):]
            continue
        assert f"{var}: ${{{{ inputs.{name} }}}}" in text
        assert var in script
    assert 'run: bash "$GITHUB_ACTION_PATH/.ci/action-verify.sh"' in text
