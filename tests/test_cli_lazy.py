"""The CLI imports a subcommand's module only when that command runs (or when
--help lists them all): `git wal status` does not load the verifier, the
signing code, the MCP server or the other commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gitwal.cli import COMMANDS, main

from .conftest import ok, wal

# Run main(ARGS) in a fresh interpreter; afterwards write the modules it had
# loaded to the file FILE (stdout stays the command's own).
PROBE = """
import json, sys
from gitwal.cli import main
try:
    main(sys.argv[2:])
except SystemExit as e:
    code = e.code
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""

HEAVY = ("cryptography", "mcp", "xml", "gitwal.mcp", "gitwal.verify", "gitwal.agents",
         "gitwal.signing.sshsig", "gitwal.checkpoints.checkpoint", "gitwal.remote.setup")


def probe(repo: Path, tmp_path: Path, *args: str, input: str = ""
          ) -> tuple[int, set[str], subprocess.CompletedProcess[str]]:
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], cwd=repo,
                          input=input, capture_output=True, text=True)
    data = json.loads(out.read_text())
    return data["code"], set(data["modules"]), proc


def loaded_commands(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("gitwal.cli.")} - {
        "gitwal.cli.lazy", "gitwal.cli.options", "gitwal.cli.examples",  # no imports of theirs
        "gitwal.cli.failures", "gitwal.cli.stdout"}  # what every command shares


@pytest.mark.parametrize(("args", "module"), [
    (("status", "--help"), "inspect"),
    (("status", "--json"), "inspect"),
    (("apply", "--run", "r", "write-file", "a.txt"), "steps"),
])
def test_a_command_imports_its_own_module_only(repo: Path, tmp_path: Path,
                                               args: tuple[str, ...], module: str) -> None:
    ok(repo, "begin", "--run", "r", "--task", "lazy")
    code, modules, proc = probe(repo, tmp_path, *args, input="hello\n")
    assert code == 0, proc.stderr
    assert loaded_commands(modules) == {f"gitwal.cli.{module}"}
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == []
    if args[0] == "status":
        assert proc.stdout == wal(repo, *args).stdout  # the same output as git-wal's
        # Reading a log needs none of the step, recovery or repair machinery.
        assert not modules & {"gitwal.run", "gitwal.changes.effects", "gitwal.recovery.decide",
                              "gitwal.log.repair", "gitwal.recovery.report",
                              "gitwal.changes.ledger", "gitwal.changes.commands"}
    else:
        assert (repo / "a.txt").read_text() == "hello\n"
        assert proc.stdout == "LSN 2 write_file a.txt: committed\n"


def test_every_command_loads_under_its_own_name_and_help_lists_them_all() -> None:
    ctx = click.Context(main)
    assert main.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name, name
    listed = subprocess.run([sys.executable, "-m", "gitwal", "--help"], capture_output=True,
                            text=True, check=True).stdout
    table = listed.split("Commands:\n")[1].split("\n\n")[0]  # the epilog follows
    shown = {line.split()[0] for line in table.splitlines()}
    hidden = {n for n in COMMANDS if getattr(main.get_command(ctx, n), "hidden", False)}
    assert hidden == {"hook"} and shown == set(COMMANDS) - hidden


def test_a_mistyped_command_is_matched_against_every_command(repo: Path) -> None:
    proc = wal(repo, "stat")
    assert proc.returncode == 2
    assert proc.stderr == ("error: No such command 'stat'. Did you mean 'status'?\n"
                           "hint: see `git wal -h`\n")
