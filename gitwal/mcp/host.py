"""What each MCP tool does, without the SDK.

A :class:`Host` picks the run, runs one call at a time through the library's
step protocol (``Run.apply`` / ``Run.exec``: intent -> apply -> verify ->
commit | abort), and turns the outcome into a :class:`Reply`: a short text
for the model and the same facts as data. A refusal is a reply too, never an
exception, carrying the error's message and hint.

Invariant: calls are serialized by one lock, so the server works on one step
at a time, as a gitwal process does (the run's own lock also keeps other
processes out while a step is open).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from .. import documents
from ..base.errors import StepFailed, ToolRefused, UnknownRun, WalError
from ..base.ids import Lsn, RunId, TreeId
from ..checkpoints import checkpoint as cp
from ..records.model import Abort, Commit, Intent, Record, calling_agent
from ..records.rows import log_rows
from ..recovery.prompt import render
from ..run import Run, StepResult
from ..shellwords.guard import refusal as guard_refusal
from ..shellwords.match import first_match
from ..shellwords.unwrap import aliases_of
from ..wal import Wal

OUTPUT_TAIL = 8000  # characters of a command's output returned to the model
DEFAULT_TASK = "changes made through the gitwal MCP server"


@dataclass(frozen=True)
class Reply:
    ok: bool  # False: the client sees a tool error (isError)
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Captured:
    text: str = ""


@contextlib.contextmanager
def captured_output() -> Iterator[Captured]:
    """Point fds 1 and 2 at a temporary file while a step runs a command.

    Commands inherit the server's standard streams (commands.run_command). The
    protocol itself never goes through fd 1 while serving (the SDK writes to a
    private duplicate), and the server's own messages go to ``sys.stderr``,
    which ``isolate_stderr`` moved off fd 2; so the file receives exactly what
    the command and its children print. Calls are serialized: one capture at
    a time.
    """
    out = Captured()
    with tempfile.TemporaryFile() as f:
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            yield out
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 4 * OUTPUT_TAIL))
            out.text = f.read().decode("utf-8", "replace")[-OUTPUT_TAIL:]


def isolate_stderr() -> None:
    """Give Python's ``sys.stderr`` its own descriptor, so that redirecting
    fd 2 for a command's output never captures the server's log lines."""
    sys.stderr.flush()
    sys.stderr = open(os.dup(2), "w", buffering=1, encoding="utf-8",  # noqa: SIM115
                      errors="replace")


def refuse_agent_only(repo: pygit2.Repository, argv: Sequence[str]) -> None:
    """An `exec` the model may not run (docs/security.md, "What an agent's tool call
    cannot do"): a person's decision or a change of gitwal's settings, read as the
    agents' hooks read a shell call; and a `wal.irreversible` command, which this
    server cannot put to the user (nothing is logged or run)."""
    line = shlex.join(argv)
    entries = [(str(e.name), e.value) for e in repo.config]
    aliases = aliases_of(entries)
    if why := guard_refusal(line, aliases):
        raise ToolRefused(f"exec: {why}", "this is a person's to do: ask the user to run it "
                          "themselves, in their own terminal")
    patterns = tuple(str(v) for name, v in entries
                     if name.lower() == "wal.irreversible" and v and str(v).strip())
    if hit := first_match(line, patterns, aliases):
        raise ToolRefused(f"exec: `{line[:200]}` is irreversible here ({hit.why}) and needs "
                          "a person's approval, which this server cannot ask for",
                          "ask the user to run it with `git wal exec --irreversible` and "
                          "`git wal approve LSN`")


def refusal(e: WalError, extra: dict[str, Any] | None = None) -> Reply:
    text = f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else "")
    data = documents.wal_error(e)  # the shape `--json` prints (docs/json.md, "Errors")
    data.update(extra or {})
    if data.get("output"):
        text += f"\n--- output (last {OUTPUT_TAIL} characters) ---\n{data['output']}"
    return Reply(False, text, data)


class Host:
    """One repository's tools; see docs/mcp.md for run selection."""

    def __init__(self, repo: str | os.PathLike[str] = ".", run_id: str | None = None,
                 task: str | None = None) -> None:
        wal = Wal(repo)  # refuses a directory outside any repository now
        self.root: Path = wal.wt.root
        if run_id:
            wal.run(run_id)  # refuses an unknown run before anything is served
        self.pinned: RunId | None = RunId(run_id) if run_id else None
        self.task = task or DEFAULT_TASK
        self._lock = threading.Lock()

    # -- plumbing ----------------------------------------------------------

    def _serialized(self, work: Callable[[], Reply],
                    state: dict[str, Any] | None = None) -> Reply:
        """Run one call under the lock; every failure becomes a refusal."""
        with self._lock:
            try:
                return work()
            except WalError as e:
                return refusal(e, _failure_data(state or {}, e))
            except (pygit2.GitError, OSError) as e:
                err = WalError(str(e) or type(e).__name__,
                               "`status` shows the log; `recover` decides a step left open")
                return refusal(err, _failure_data(state or {}, err))

    def _wal(self) -> Wal:
        return Wal(self.root)

    def _run(self, wal: Wal, create: bool) -> tuple[Run, bool]:
        """The run this call works on, and whether it was begun just now."""
        if self.pinned is not None:
            return wal.run(self.pinned), False
        try:
            return wal.run(None), False
        except UnknownRun:
            if not create:
                raise
        return wal.begin(task=self.task), True

    # -- mutating tools ----------------------------------------------------

    def apply(self, tool: str, check: str | None = None, step: int | None = None,
              **args: Any) -> Reply:
        """One end-state file tool as a logged, verified step."""
        state: dict[str, Any] = {}

        def work() -> Reply:
            run, begun = self._run(self._wal(), create=True)
            state["run"] = run
            result = run.apply(tool, check=check, step=step, **args)
            return _step_reply(run, result, self.task if begun else None)

        return self._serialized(work, state)

    def write_file(self, path: str, content: str, encoding: str = "utf-8",
                   check: str | None = None, step: int | None = None) -> Reply:
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except binascii.Error as e:
                return refusal(ToolRefused(f"write_file: content is not valid base64: {e}",
                                           "encode the bytes with standard base64"))
        elif encoding == "utf-8":
            data = content.encode("utf-8")
        else:
            return refusal(ToolRefused(f"write_file: unknown encoding {encoding!r}",
                                       "use \"utf-8\" or \"base64\""))
        return self.apply("write_file", check=check, step=step, path=path, content=data)

    def exec(self, argv: Sequence[str], idempotent: bool = False, check: str | None = None,
             step: int | None = None) -> Reply:
        """A command whose effect is unknown in advance, as a logged step."""
        state: dict[str, Any] = {}

        def work() -> Reply:
            wal = self._wal()
            refuse_agent_only(wal.repo, argv)
            run, begun = self._run(wal, create=True)
            state["run"] = run
            with captured_output() as out:
                state["out"] = out
                result = run.exec(list(argv), check=check, idempotent=idempotent, step=step)
            reply = _step_reply(run, result, self.task if begun else None)
            return _with_output(reply, out.text)

        return self._serialized(work, state)

    def begin(self, task: str, steps: Sequence[str] = (), run_id: str | None = None) -> Reply:
        def work() -> Reply:
            run = self._wal().begin(task=task, run_id=run_id, steps=steps)
            self.pinned = run.id
            numbered = "".join(f"\n  {n}. {s}" for n, s in enumerate(steps, start=1))
            return Reply(True, f"began run {run.id}: {task}{numbered}",
                         {"run": run.id, "ref": run.ref_name, "task": task,
                          "steps": list(steps)})

        return self._serialized(work)

    def checkpoint(self, message: str | None = None, check: str | None = None,
                   detached: bool = False, include_unlogged: bool = False) -> Reply:
        def work() -> Reply:
            run, _ = self._run(self._wal(), create=False)
            r = cp.checkpoint(run, message, check, detached, include_unlogged)
            how = "HEAD already held this tree" if r.reused_head else f"commit {r.git[:12]}"
            text = f"LSN {r.lsn} checkpoint: {how} on {r.ref}, covers LSN {r.covers}"
            if r.unlogged:
                text += f"; included unlogged paths: {', '.join(r.unlogged)}"
            return Reply(True, text, {
                "run": run.id, "lsn": r.lsn, "git": r.git, "ref": r.ref, "covers": r.covers,
                "unlogged": list(r.unlogged), "reused_head": r.reused_head})

        return self._serialized(work)

    def undo(self, lsns: Sequence[int] = (), to: int | None = None, last: int | None = None,
             dry_run: bool = False, run_id: str | None = None,
             turn: int | None = None) -> Reply:
        def work() -> Reply:
            from ..decisions import undo as undoing

            wal = self._wal()
            # ``run_id``: another run of this worktree, e.g. an agent session's own
            # (its hooks log to claude-<session>, not to this server's run).
            run = wal.run(run_id) if run_id else self._run(wal, create=False)[0]
            done = undoing.undo(run, lsns, to, last, dry_run=dry_run, turn=turn)
            data = undoing.document(wal.repo, done, run.id, dry_run)
            what = f"LSN {', '.join(map(str, done.lsns))}: {', '.join(done.paths)}"
            text = (f"would undo {what}\n{data['diff']}" if dry_run
                    else f"LSN {done.lsn} undid {what}")
            return Reply(True, text, data)

        return self._serialized(work)

    def recover(self, redo: bool = False, restore: bool = False) -> Reply:
        def work() -> Reply:
            wal = self._wal()
            try:
                run, _ = self._run(wal, create=False)
            except UnknownRun:
                return Reply(True, "no run in this worktree: nothing to recover", {"run": None})
            with captured_output() as out:
                report = wal.recover(run.id, redo=redo, restore=restore,
                                     inside=calling_agent(os.environ))
            data = report.to_dict()
            data["prompt"] = render(report)
            return _with_output(Reply(True, data["prompt"], data), out.text)

        return self._serialized(work)

    # -- reading -----------------------------------------------------------

    def status(self) -> Reply:
        def work() -> Reply:
            wal = self._wal()
            try:
                run, _ = self._run(wal, create=False)
            except UnknownRun:
                return Reply(True, "no run in this worktree yet: the first change begins one "
                             f"(task: {self.task!r}), or call `begin` first",
                             {"run": None})
            st = wal.status(run.id)
            text = (f"run {st.run}: {st.task}\n{len(st.committed)} committed, "
                    f"{len(st.aborted)} aborted, {len(st.open)} open; next LSN {st.next_lsn}")
            if st.checkpoint:
                text += f"\nnewest checkpoint: LSN {st.checkpoint} (counts are after it)"
            if st.open:
                text += (f"\nopen intents: {', '.join(map(str, st.open))}: call `recover` "
                         "before any other change")
            # The same document as `git wal status --json` (docs/json.md).
            return Reply(True, text, documents.status(st))

        return self._serialized(work)


    # -- prompt and resources (read-only: they decide and write nothing) ----

    def resume_prompt(self, run_id: str | None = None) -> str:
        """What `git wal prompt [--run RUN]` prints: the resume prompt of a dry
        run of recovery (``Wal.report``), for ``run_id`` or this server's run."""
        with self._lock:  # never in the middle of this server's own step
            return render(self._wal().report(run_id or self.pinned))

    def run_ids(self) -> list[str]:
        """Every run of the repository, oldest first (`git wal runs`)."""
        with self._lock:
            return [info.run for info in self._wal().runs()]

    def status_json(self, run_id: str) -> str:
        """`git wal status --run RUN --json`: the same bytes."""
        with self._lock:
            doc = documents.status(self._wal().status(run_id))
        return json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n"  # as emit_json

    def log_jsonl(self, run_id: str) -> str:
        """`git wal log --run RUN --json`: one record a line (docs/json.md, ``log_line``)."""
        with self._lock:
            stream = self._wal().run(run_id, read_only=True).stream()
            return "".join((row.decode() if isinstance(row, bytes) else _compact(row)) + "\n"
                           for row in log_rows(stream))


# -- results ---------------------------------------------------------------

def _recent(run: Run, lsn: Lsn) -> list[Record]:
    """Records that hold intent ``lsn`` and what closes it: normally the newest
    two appends (one commit and one tree each); the whole segment only when
    another process appended in between."""
    records = run.recent(appends=2)
    if not any(isinstance(r, Intent) and r.lsn == lsn for r in records):
        records = run.since_checkpoint()
    return records


def _closing(records: list[Record], lsn: Lsn) -> Commit | Abort | None:
    for r in records:
        if isinstance(r, (Commit, Abort)) and r.intent == lsn:
            return r
    return None


def _step_reply(run: Run, result: StepResult, begun_task: str | None) -> Reply:
    """``begun_task``: the task of the run this call began, None if it existed."""
    records = _recent(run, result.lsn)
    intent = next((r for r in records if isinstance(r, Intent) and r.lsn == result.lsn), None)
    close = _closing(records, result.lsn)
    verified = close.verified if isinstance(close, Commit) else ""
    data: dict[str, Any] = {
        "run": run.id, "lsn": result.lsn, "commit_lsn": None if close is None else close.lsn,
        "tool": result.tool, "target": list(result.target), "status": result.status,
        "post": list(result.post), "verified": verified,
        "step": None if intent is None else intent.step, "began_run": begun_task is not None,
    }
    targets = " -> ".join(result.target)
    text = f"LSN {result.lsn} {result.tool} {targets}: {result.status} (verified: {verified})"
    if intent is not None and result.tool == "exec":
        theirs = {t[0] for t in close.theirs} if isinstance(close, Commit) else set()
        changed = [p for p in run.wt.changed_paths(TreeId(intent.pre[0]),
                                                   TreeId(result.post[0]))
                   if p not in theirs]  # other runs' work is not this step's
        data["changed"] = list(changed)
        text += f"; changed: {', '.join(changed) if changed else 'nothing'}"
    elif intent is not None:
        data["pre"] = list(intent.pre)
        data["changed"] = [p for p, a, b in zip(intent.target, intent.pre, result.post,
                                                 strict=True) if a != b]
        if not data["changed"]:
            text += "; no change: already in that state"
    if begun_task is not None:
        text = f"began run {run.id} (task: {begun_task})\n" + text
    return Reply(True, text, data)


def _compact(doc: dict[str, Any]) -> str:
    """A log row as `git wal log --json` prints it: the canonical form records are
    stored in (keys sorted, no spaces)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _with_output(reply: Reply, output: str) -> Reply:
    if not output:
        return reply
    text = reply.text + f"\n--- output (last {OUTPUT_TAIL} characters) ---\n{output}"
    return Reply(reply.ok, text, {**reply.data, "output": output})


def _failure_data(state: dict[str, Any], error: WalError) -> dict[str, Any]:
    """Facts a refused or aborted step adds to its error: the run, the abort
    record (a step that failed verification is closed by one), the output."""
    data: dict[str, Any] = {}
    run: Run | None = state.get("run")
    out: Captured | None = state.get("out")
    if out is not None and out.text:
        data["output"] = out.text
    if run is None:
        return data
    data["run"] = run.id
    if not isinstance(error, StepFailed):
        return data  # refused before anything was logged
    with contextlib.suppress(WalError, pygit2.GitError, OSError):
        newest = run.recent()
        last = newest[-1] if newest else None
        if isinstance(last, Abort):
            data["aborted"] = {"intent": last.intent, "lsn": last.lsn, "reason": last.reason,
                               "restored": list(last.restored), "output": last.output}
    return data

