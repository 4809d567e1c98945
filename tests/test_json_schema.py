"""Every `--json` document validates against docs/json-schema/gitwal.schema.json.

The schema is strict (every object closed, every field required unless the
format says optional), so a field added, dropped or retyped on either side
fails here. Each command runs on a real repository in the states that fill
its fields: committed, aborted, open and in-doubt steps, a checkpoint, a
seal, unlogged changes and a prediction miss, two runs and none, errors.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import click
import jsonschema  # type: ignore[import-untyped]  # no stubs: a test dependency only

from gitwal.cli import COMMANDS, main
from gitwal.mcp.host import Host

from .conftest import git, init_repo, loose_object, ok, wal
from .test_agent_payloads import claude_run, claude_tool, run_hook

ROOT = Path(__file__).resolve().parent.parent
SCHEMA: dict[str, Any] = json.loads((ROOT / "docs" / "json-schema" / "gitwal.schema.json")
                                    .read_text())
DOC = (ROOT / "docs" / "json.md").read_text()


def check(data: Any, name: str, shown: str = "") -> Any:
    """``data`` is a valid ``name`` document ($defs entry); returns it."""
    assert name in SCHEMA["$defs"], name
    schema = {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"],
              "$ref": f"#/$defs/{name}"}
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=str)
    assert not errors, f"{name}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]) + shown
    return data


def document(proc: subprocess.CompletedProcess[str], name: str, code: int = 0) -> Any:
    """stdout is exactly one JSON document of kind ``name``; the exit code is ``code``."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return check(json.loads(proc.stdout), name, f"\nstdout: {proc.stdout}")


def failed(proc: subprocess.CompletedProcess[str], code: int, kind: str) -> dict[str, Any]:
    """The error document on stdout, and the same error and hint on stderr."""
    err: dict[str, Any] = document(proc, "error", code)
    assert err["kind"] == kind and err["exit_code"] == code, err
    # (after whatever a command gitwal ran printed there)
    assert f"\nerror: {err['error']}\n" in f"\n{proc.stderr}", proc.stderr
    assert f"\nhint: {err['hint']}\n" in proc.stderr, proc.stderr
    return err


def log_lines(repo: Path, run: str) -> list[dict[str, Any]]:
    proc = wal(repo, "log", "--run", run, "--json")
    assert proc.returncode == 0, proc.stderr
    return [check(json.loads(line), "log_line") for line in proc.stdout.splitlines()]


def test_a_run_through_every_state(repo: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signing_key"
    keygen = document(wal(repo, "keygen", "--path", str(key), "--configure", "--json"),
                      "keygen")
    assert keygen["configured"] is True and keygen["path"] == str(key)
    allowed = tmp_path / "allowed_signers"
    added = document(wal(repo, "trust", "add", f"{key}.pub", "--name", "w@ci", "--file",
                         str(allowed), "--json"), "trust_add")
    assert added["added"] is True and added["fingerprint"] == keygen["fingerprint"]
    listed = document(wal(repo, "trust", "list", "--file", str(allowed), "--json"),
                      "trust_list")
    assert [s["principals"] for s in listed["signers"]] == [["w@ci"]]

    began = document(wal(repo, "begin", "--run", "r", "--task", "t", "--step", "one",
                         "--step", "two", "--json"), "begin")
    assert began == {"run": "r", "ref": "refs/wal/r", "task": "t", "steps": ["one", "two"]}
    a = document(wal(repo, "apply", "--json", "--step", "1", "write-file", "a.txt",
                     input=b"a\n"), "step")
    assert (a["lsn"], a["target"], a["step"], a["status"]) == (2, ["a.txt"], 1, "committed")

    # exec --json: the command's output goes to stderr; stdout is the document alone.
    shell = "printf '{\\n'; echo garbage; echo to-stderr >&2; echo x > x.txt"
    ex = wal(repo, "exec", "--json", "--", "sh", "-c", shell)
    x = document(ex, "step")
    assert (x["tool"], x["target"], x["step"]) == ("exec", ["."], None)
    assert ex.stdout.count("\n") == 1 and "{\ngarbage\n" in ex.stderr and "to-stderr" in ex.stderr

    cp = document(wal(repo, "checkpoint", "--json"), "checkpoint")
    assert cp["lsn"] == 6 and cp["covers"] == 4
    # After the checkpoint: an aborted step, a committed one, then one a crash leaves open.
    bad = failed(wal(repo, "apply", "--json", "--check", "false", "write-file", "b.txt",
                     input=b"b\n"), 1, "StepFailed")
    assert "false" in bad["error"]
    document(wal(repo, "apply", "--json", "--step", "2", "write-file", "c.txt",
                 input=b"c\n"), "step")
    gate = document(wal(repo, "gate", "--json"), "gate", 3)
    assert gate["safe"] is False and gate["checkpointed"] is None
    crashed = wal(repo, "exec", "--json", "--", "sh", "-c", "echo y > y.txt",
                  env={"GITWAL_CRASH_AT": "after-exec"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr

    st = document(wal(repo, "status", "--json"), "status")
    # Lists of intent LSNs, after the newest checkpoint.
    assert (st["checkpoint"], st["aborted"], st["committed"], st["open"]) == (6, [7], [9], [11])
    assert st["next_lsn"] == 12 and st["sealed"] is None and st["worktree"]["name"] == ""
    rows = log_lines(repo, "r")
    assert [r["type"] for r in rows] == ["plan", "intent", "commit", "intent", "commit",
                                         "checkpoint", "intent", "abort", "intent", "commit",
                                         "intent"]
    intents = {r["lsn"]: r for r in rows if r["type"] == "intent"}
    assert {n: i["status"] for n, i in intents.items()} == {
        2: "committed", 4: "committed", 7: "aborted", 9: "committed", 11: "open"}
    assert intents[4]["target"] == ["."] and intents[2]["pre"] == ["absent"]
    assert intents[2]["prediction_miss"] is False
    shown = document(wal(repo, "show", "4", "--json"), "show")  # the exec step and its diff
    assert [c["path"] for c in shown["changes"]] == ["x.txt"] and shown["closing"]["lsn"] == 5
    # The MCP server's status is the same document.
    assert check(Host(repo).status().data, "status") == st

    doubt = document(wal(repo, "recover", "--json"), "recover", 3)
    [open_] = doubt["intents"]
    assert (doubt["in_doubt"], open_["lsn"], open_["open"], open_["changed"]) == (
        True, 11, True, ["y.txt"])
    assert doubt["committed"] == [9] and doubt["aborted"] == [7]
    assert doubt["committed_steps"] == [{"lsn": 9, "tool": "write_file",
                                         "target": ["c.txt"], "step": 2}]
    done = document(wal(repo, "recover", "--restore", "--json"), "recover")
    assert [i["action"] for i in done["intents"]] == ["restored"] and not done["in_doubt"]
    after = document(wal(repo, "status", "--json"), "status")
    assert after["committed"] == done["committed"] == [9] and after["open"] == []
    compacted = document(wal(repo, "compact", "--json"), "compact")
    assert compacted["live_from"] == 6 and compacted["moved"] is True

    sealed = document(wal(repo, "seal", "--json"), "seal")
    assert document(wal(repo, "status", "--json"), "status")["sealed"] == sealed["lsn"] == 13
    assert log_lines(repo, "r")[-1]["type"] == "seal"

    ok(repo, "begin", "--run", "s", "--task", "unsealed")
    runs = document(wal(repo, "runs", "--json"), "runs")
    assert [(r["run"], r["current"], r["damaged"]) for r in runs] == [
        ("r", False, None), ("s", True, None)]
    passed = document(wal(repo, "verify", "--run", "r", "--require-sealed",
                          "--allowed-signers", str(allowed), "--json"), "verify")
    assert passed["ok"] is True and passed["allowed_signers"] == str(allowed)
    failing = document(wal(repo, "verify", "--all", "--require-sealed", "--allowed-signers",
                           str(allowed), "--format", "json"), "verify", 1)
    by_run = {r["run"]: r for r in failing["runs"]}
    assert failing["ok"] is False and by_run["r"]["ok"] and not by_run["s"]["ok"]
    assert by_run["s"]["failures"][0]["check"]


def test_an_agents_run_has_unlogged_changes_and_a_prediction_miss(repo: Path) -> None:
    run = claude_run()
    readme = repo / "README"
    edit = {"file_path": str(readme), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "t1")).code == 0
    readme.write_text("BYE\n")  # a formatter ran: not what the Edit predicted
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit, "t1")).code == 0
    (repo / "stray.txt").write_text("behind the log\n")
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", new, "t2")).code == 0
    rows = log_lines(repo, run)
    [unlogged] = [r for r in rows if r["type"] == "unlogged"]
    edit_intent = next(r for r in rows if r["type"] == "intent")
    assert edit_intent["prediction_miss"] is True and "auth" in edit_intent
    st = document(wal(repo, "status", "--run", run, "--json"), "status")
    assert st["prediction_miss"] == [edit_intent["lsn"]] and st["unlogged"] == [unlogged["lsn"]]
    assert st["open"] == [unlogged["lsn"] + 1]
    # An edit gitwal cannot compute: logged with the post "unknown", then in doubt.
    guess = {"file_path": str(readme), "old_string": "not there", "new_string": "x"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", guess, "t3")).code == 0
    readme.write_text("whatever the tool wrote\n")
    unknown = log_lines(repo, run)[-1]
    assert unknown["type"] == "intent" and unknown["post"] == ["unknown"]
    rec = document(wal(repo, "recover", "--run", run, "--json"), "recover", 3)
    assert [(i["outcome"], i["redo"]) for i in rec["intents"]] == [("in-doubt", "")]


def test_no_runs_is_an_empty_list_and_a_damaged_run_says_why(repo: Path) -> None:
    assert document(wal(repo, "runs", "--json"), "runs") == []
    ok(repo, "begin", "--run", "x")
    ok(repo, "apply", "write-file", "a.txt", input=b"a\n")
    ok(repo, "apply", "write-file", "b.txt", input=b"b\n")
    loose_object(repo, git(repo, "rev-parse", "refs/wal/x:000000000005.json").strip()).unlink()
    [info] = document(wal(repo, "runs", "--json"), "runs")
    assert "LSN 5" in info["damaged"]
    failed(wal(repo, "status", "--json"), 1, "CorruptLog")
    repaired = document(wal(repo, "repair", "x", "--json"), "repair")
    assert repaired["kept"] == 4 and repaired["lost"] == [5]


def test_errors_are_documents_with_the_usual_exit_codes(repo: Path) -> None:
    assert failed(wal(repo, "status", "--run", "nope", "--json"), 1, "UnknownRun")
    failed(wal(repo, "recover", "--json"), 1, "UnknownRun")
    # A usage error found while parsing, and one a command raises itself.
    usage = failed(wal(repo, "status", "--json", "--bogus"), 2, "UsageError")
    assert "--bogus" in usage["error"]
    failed(wal(repo, "verify", "--run", "a", "--all", "--json"), 2, "UsageError")
    failed(wal(repo, "verify", "--format", "junit", "--json"), 2, "UsageError")
    # An apply tool's --json is its group's option.
    ok(repo, "begin", "--run", "r")
    failed(wal(repo, "apply", "--json", "write-file", "../out.txt", input=b"x"), 1,
           "PathRefused")
    assert not (repo.parent / "out.txt").exists()
    # Without --json nothing is printed on stdout, as before.
    plain = wal(repo, "status", "--run", "nope")
    assert (plain.returncode, plain.stdout) == (1, "")
    assert plain.stderr.startswith("error: no run nope\nhint: ")


def test_exec_json_keeps_a_failing_commands_output_out_of_stdout(repo: Path) -> None:
    ok(repo, "begin", "--run", "r")
    proc = wal(repo, "exec", "--json", "--check", "echo '{\"ok\": true}'; exit 1", "--",
               "sh", "-c", "echo '{'; echo '[garbage'; echo z > z.txt")
    err = failed(proc, 1, "StepFailed")
    assert "check" in err["error"] and "{\n[garbage\n" in proc.stderr
    assert '{"ok": true}' in proc.stderr and not (repo / "z.txt").exists()


def test_checkpoint_names_the_same_lsn_in_gate_status_and_recover(repo: Path) -> None:
    ok(repo, "begin", "--run", "r")
    ok(repo, "apply", "write-file", "a.txt", input=b"a\n")
    gate = document(wal(repo, "gate", "--auto-checkpoint", "--json"), "gate")
    made = gate["checkpointed"]
    assert gate["safe"] is True and (made["lsn"], made["covers"]) == (4, 2)
    assert document(wal(repo, "status", "--json"), "status")["checkpoint"] == 4
    report = document(wal(repo, "recover", "--json"), "recover")
    assert report["checkpoint"] == 4 and report["checkpoint_commit"] == {
        "git": made["git"], "ref": made["ref"], "covers": 2}


def test_a_step_recover_redoes_prints_nothing_into_stdout(repo: Path) -> None:
    ok(repo, "begin", "--run", "r")
    shell = "echo '{'; echo 'garbage]'; echo z > z.txt"
    crashed = wal(repo, "exec", "--idempotent", "--", "sh", "-c", shell,
                  env={"GITWAL_CRASH_AT": "after-intent"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    proc = wal(repo, "recover", "--redo", "--json")
    report = document(proc, "recover")
    assert [(i["lsn"], i["action"]) for i in report["intents"]] == [(2, "redone")]
    assert "{\ngarbage]\n" in proc.stderr and (repo / "z.txt").read_text() == "z\n"


def test_remote_commands(repo: Path, tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    setup = document(wal(repo, "remote", "setup", "origin", "--json"), "remote_setup")
    assert setup and all(c["added"] for c in setup)
    ok(repo, "begin", "--run", "r")
    pushed = document(wal(repo, "push", "--json"), "transfer")
    assert [(o["ref"], o["status"]) for o in pushed["refs"]] == [("refs/wal/r", "created")]
    fetched = document(wal(repo, "fetch", "--json"), "transfer")
    assert fetched["ok"] is True


def test_installation_commands(repo: Path) -> None:
    hooks = document(wal(repo, "hooks", "install", "--json"), "hooks")
    assert [h["action"] for h in document(wal(repo, "hooks", "status", "--json"), "hooks")] \
        == ["installed", "installed"]
    assert hooks and document(wal(repo, "hooks", "uninstall", "--json"), "hooks")
    assert document(wal(repo, "doctor", "--json"), "doctor", code=1)["ok"] is False
    (repo / ".pre-commit-config.yaml").write_text("repos: []\n")  # a manager's entry
    managed = document(wal(repo, "hooks", "status", "--json"), "hooks", code=1)
    assert managed[0]["action"] == "add-to-manager" and managed[0]["entry"]
    installed = document(wal(repo, "install", "claude", "--json"), "agent_install")
    assert installed["agent"] == "claude" and installed["changes"]
    document(wal(repo, "uninstall", "claude", "--json"), "agent_install")
    check(json.loads(ok(repo, "mcp-config", "--json")), "mcp_entry")
    merged = document(wal(repo, "mcp-config", "--merge", "--json"), "mcp_config")
    assert merged["changed"] is True
    stopped = document(wal(repo, "agent-server", "--stop", "--json"), "agent_server_stop")
    assert stopped["stopped"] is None
    document(wal(repo, "agent-server", "--stop", "--all", "--json"), "agent_server_stop_all")


def test_mcp_status_without_a_run(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "empty")
    assert check(Host(repo).status().data, "mcp_no_run") == {"run": None}


# -- the documentation names a schema for every --json command ---------------------


def json_commands() -> set[str]:
    """Every command line (`git wal ...`) whose command or group has --json."""
    found: set[str] = set()

    def walk(cmd: click.Command, path: str) -> None:
        if any(p.name == "as_json" for p in cmd.params):
            found.add(path)  # a group's --json (`apply`) covers all its commands
        elif isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}")

    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        walk(command, name)
    return found


def documented() -> dict[str, str]:
    """docs/json.md's table: `git wal COMMAND` -> its $defs entry."""
    out: dict[str, str] = {}
    for line, name in re.findall(r"^\| `git wal ([^`]*)` \| `([a-z_]+)` \|", DOC, re.M):
        words = []
        for word in line.split():
            if word.startswith("-") or not word.islower():
                break  # options and placeholders (RUN, TOOL) end the command's name
            words.append(word)
        out[" ".join(words)] = name
    return out


def test_every_json_command_has_a_documented_schema() -> None:
    table = documented()
    assert json_commands() <= set(table), sorted(json_commands() - set(table))
    assert set(table) <= json_commands(), sorted(set(table) - json_commands())
    assert set(table.values()) <= set(SCHEMA["$defs"])
