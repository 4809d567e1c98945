"""`git wal verify`: the CI verifier of run logs (docs/verify.md).

Exit 0 when every check holds for every selected run, 1 when anything fails
(or the request itself is wrong: `error:`/`hint:`), 2 on a usage error.

With ``--remote NAME`` the logs are the remote's, fetched into
``refs/wal-remote/NAME/`` as `git wal order --remote` fetches them and read
there: no local log is created or moved.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pygit2

from ..base import progress
from ..base.errors import EXIT_ERROR, WalError
from ..base.ids import valid_run_id
from ..base.repository import open_repository
from ..log.runs import LOCAL, all_runs, select_runs
from ..remote.fetch import remote_heads
from ..remote.refs import staging_prefix
from ..signing.trust import allowed_signers_file
from ..verify.checks import Options
from ..verify.run_checks import Report, RunResult, verify
from .failures import handled
from .options import RUN
from .stdout import emit_json

# Characters XML 1.0 cannot carry at all; a reason may quote a path or a record.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def failure_lines(result: RunResult) -> list[str]:
    """One line per failure, each naming the run, the LSN when there is one, and why."""
    return [f"{result.run}{'' if f.lsn is None else f' LSN {f.lsn}'}: {f.check}: {f.reason}"
            for f in result.failures]


def render_text(report: Report, remote: str | None = None) -> str:
    lines: list[str] = []
    for r in report.runs:
        lines += failure_lines(r)
        lines += [f"{r.run}: note: {n}" for n in r.notes]
        where = f", branch {r.branch}" if r.branch else ""
        if r.ok:
            lines.append(f"ok   {r.run}: {r.records} records verified{where}")
        else:
            lines.append(f"FAIL {r.run}: {len(r.failures)} failure(s) in {r.records} "
                         f"records{where}")
    failed = sum(not r.ok for r in report.runs)
    on = "" if remote is None else f" on remote {remote}"
    if not report.runs:
        lines.append(f"no runs to verify{on}")
    else:
        lines.append(f"verified {len(report.runs)} run(s){on}: "
                     + ("all ok" if not failed else f"{failed} failed"))
    if report.allowed_signers is not None:
        lines.append(f"signatures checked against {report.allowed_signers}")
    return "\n".join(lines)


def render_junit(report: Report, remote: str | None = None) -> str:
    """One <testsuite> named gitwal-verify, one <testcase> per run, a <failure> per failing
    run; with ``remote``, a property naming it."""
    failed = sum(not r.ok for r in report.runs)
    suite = ET.Element("testsuite", name="gitwal-verify", tests=str(len(report.runs)),
                       failures=str(failed), errors="0",
                       time=f"{sum(r.seconds for r in report.runs):.3f}")
    if remote is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="remote", value=_xml(remote))
    for r in report.runs:
        case = ET.SubElement(suite, "testcase", classname="gitwal-verify", name=r.run,
                             time=f"{r.seconds:.3f}")
        if not r.ok:
            first = r.failures[0]
            message = f"{len(r.failures)} failure(s); first: {first.check}: {first.reason}"
            node = ET.SubElement(case, "failure", message=_xml(message), type="gitwal-verify")
            node.text = _xml("\n".join(failure_lines(r)))
        if r.notes:
            ET.SubElement(case, "system-out").text = _xml("\n".join(r.notes))
    body = ET.tostring(suite, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body


def _allowed_signers(repo: pygit2.Repository, explicit: Path | None) -> Path | None:
    """--allowed-signers; else the file git config names (which must then exist); else
    gitwal's default file, when there is one."""
    found = allowed_signers_file(repo, explicit)
    if found.source == "default" and not found.path.exists():
        return None
    return found.path


def _remote_runs(remote: str,
                 run_id: str | None) -> tuple[str, pygit2.Repository, list[str]]:
    """Fetch the remote's logs for reading only (as `git wal order --remote` does):
    (its name, the repository, the selected runs it holds)."""
    name, _heads = remote_heads(Path("."), remote)
    repo = open_repository(".")  # reopened: the fetched objects are visible
    # Its live logs and its dropped runs' archives, as `--all` means here.
    runs = [r for r in all_runs(repo, staging_prefix(name)) if valid_run_id(r)]
    if run_id is not None:
        if run_id not in runs:
            raise WalError(f"remote {name} has no log of run {run_id}",
                           f"`git ls-remote {name} 'refs/wal/*'` lists the runs it has "
                           f"(`git wal verify --all --remote {name}` verifies them all)")
        runs = [run_id]
    return name, repo, runs


@click.command("verify")
@RUN
@click.option("--all", "everything", is_flag=True,
              help="Every run in the repository, dropped (archived) runs included, and "
                   "their steps put in one order (forks, cycles and lost changes fail).")
@click.option("--branch", metavar="REF",
              help="Branch whose diff from each run's base must be explained "
                   "(default: the run's plan branch, if it exists).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]),
              default="text", show_default=True, help="Output for people, tools, or CI.")
@click.option("--allowed-signers", "allowed", type=click.Path(path_type=Path), metavar="FILE",
              help="Check every signed append against this allowed-signers file (default: "
                   "git config gpg.ssh.allowedSignersFile, else "
                   "$XDG_CONFIG_HOME/gitwal/allowed_signers if it exists).")
@click.option("--require-signed", is_flag=True, help="An unsigned append is a failure.")
@click.option("--require-sealed", is_flag=True,
              help="A run that does not end in a valid seal is a failure.")
@click.option("--remote", metavar="NAME",
              help="Verify the logs as the remote holds them (fetched for reading only), "
                   "not this clone's; with --all or --run.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@handled
def verify_(run_id: str | None, everything: bool, branch: str | None, fmt: str,
            allowed: Path | None, require_signed: bool, require_sealed: bool,
            remote: str | None, as_json: bool) -> None:
    """Check run logs: chain, intents, checkpoints, unlogged changes, order, signatures, seals."""
    if run_id and everything:
        raise click.UsageError("--run and --all exclude each other",
                               click.get_current_context())
    if as_json:
        if fmt not in ("text", "json"):
            raise click.UsageError("--json and --format junit exclude each other",
                                   click.get_current_context())
        fmt = "json"
    if remote is not None and not (run_id or everything):
        raise click.UsageError("--remote needs --all or --run", click.get_current_context())
    repo = open_repository(".", "run `git wal verify` inside a clone or a mirror")
    namespace = LOCAL
    if remote is None:
        runs = select_runs(repo, run_id, everything)
    else:
        remote, repo, runs = _remote_runs(remote, run_id)
        namespace = staging_prefix(remote)
    options = Options(branch=branch, allowed_signers=_allowed_signers(repo, allowed),
                      require_signed=require_signed, require_sealed=require_sealed,
                      order=everything)
    with progress.status("verifying") as line:
        report = verify(repo, runs, options, namespace=namespace,
                        progress=lambda n, of, run, what: line.update(f"[{n}/{of}] {run}: {what}"))
    if fmt == "json":
        emit_json(report.to_dict() | {"remote": remote})
    elif fmt == "junit":
        click.echo(render_junit(report, remote))
    else:
        click.echo(render_text(report, remote))
    if not report.ok:
        sys.exit(EXIT_ERROR)
