"""`git wal doctor`: check this repository's integrations (gitwal/doctor.py)."""

from __future__ import annotations

import sys

import click

from ..base.display import safe
from ..doctor import doctor
from .failures import handled
from .options import JSON
from .stdout import emit_json


@click.command("doctor")
@JSON
@handled
def doctor_(as_json: bool) -> None:
    """Check every integration here: git hooks, logs, agent hooks (each probed
    once with a read the hooks do not log), agent trust, the signing key.
    Exit 1 when a check fails; each failure names its fix."""
    from pathlib import Path

    findings = doctor(Path("."))
    if as_json:
        emit_json({"ok": all(f.ok for f in findings),
                   "checks": [{"check": f.check, "ok": f.ok, "detail": f.detail,
                               "fix": f.fix} for f in findings]})
    else:
        for f in findings:
            # Paths and messages may come from settings files or logs.
            click.echo(f"{'ok  ' if f.ok else 'FAIL'} {safe(f.check)}: {safe(f.detail)}")
            if f.fix and not f.ok:
                click.echo(f"     fix: {safe(f.fix)}")
        if not findings:
            click.echo("nothing to check")
    if not all(f.ok for f in findings):
        sys.exit(1)
