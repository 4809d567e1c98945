"""The typed face of a run's steps: one method per end-state tool.

``Run.apply(tool, **args)`` names a tool by string and takes its arguments
as keywords, which a type checker cannot check. The methods here call it
with each tool's own arguments spelt out, so a misspelt argument or a
wrong type is caught before the program runs. They add no behaviour:
``run.replace_text(p, old, new)`` is exactly
``run.apply("replace_text", path=p, old=old, new=new)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base.ids import Lsn


@dataclass(frozen=True)
class StepResult:
    lsn: Lsn  # the intent's LSN
    tool: str
    target: tuple[str, ...]
    status: str  # "committed"
    post: tuple[str, ...]
    # False: the commit record is held back (group commit) until the run's
    # next append or ``run.flush()``; a crash before leaves the step for
    # recovery to commit ("applied, commit missing").
    durable: bool = True


class ToolSteps:
    """Mixed into :class:`gitwal.run.Run`, which implements :meth:`apply`.

    Every method appends one logged step (intent, apply, verify, commit) and
    returns its :class:`StepResult`; a refusal raises ``ToolRefused`` before
    anything is logged, a failed check ``StepFailed`` after the abort record.
    ``check``: a shell command the step commits only if it exits 0;
    ``step``: the plan step (1-based) it carries out; ``timeout``: seconds
    the check may run (default: ``wal.commandTimeout``).
    """

    def apply(self, tool: str, check: str | None = None, step: int | None = None,
              timeout: float | None = None, **args: Any) -> StepResult:
        raise NotImplementedError  # Run's

    def write_file(self, path: str, content: bytes | str, *, check: str | None = None,
                   step: int | None = None, timeout: float | None = None) -> StepResult:
        """Set ``path`` to exactly ``content`` (a ``str`` is written as UTF-8)."""
        return self.apply("write_file", check, step, timeout, path=path, content=content)

    def replace_symbol(self, path: str, old: str, new: str, *, check: str | None = None,
                       step: int | None = None, timeout: float | None = None) -> StepResult:
        """Rename the identifier ``old`` to ``new`` in ``path`` (whole identifiers only)."""
        return self.apply("replace_symbol", check, step, timeout, path=path, old=old, new=new)

    def replace_text(self, path: str, old: str, new: str, *, check: str | None = None,
                     step: int | None = None, timeout: float | None = None) -> StepResult:
        """Replace the single occurrence of ``old`` in ``path`` with ``new``."""
        return self.apply("replace_text", check, step, timeout, path=path, old=old, new=new)

    def ensure_line(self, path: str, line: str, *, check: str | None = None,
                    step: int | None = None, timeout: float | None = None) -> StepResult:
        """Make sure ``path`` holds the line ``line`` (appended if missing)."""
        return self.apply("ensure_line", check, step, timeout, path=path, line=line)

    def delete_file(self, path: str, *, check: str | None = None, step: int | None = None,
                    timeout: float | None = None) -> StepResult:
        """Delete ``path`` (which must exist)."""
        return self.apply("delete_file", check, step, timeout, path=path)

    def move_file(self, src: str, dst: str, *, check: str | None = None,
                  step: int | None = None, timeout: float | None = None) -> StepResult:
        """Move ``src`` to ``dst`` (``dst`` must not exist)."""
        return self.apply("move_file", check, step, timeout, src=src, dst=dst)
