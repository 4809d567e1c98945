"""The traced workloads: an initial repository and an agent script.

Each agent is idempotent, as a resumed agent is: it opens its run (or begins
it), skips every step the log says is committed, and does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    name: str
    run: str  # the run id the agent uses
    files: dict[str, str]  # the initial commit
    agent: str  # python source; argv[1] is the repository


def _rename_files(n: int) -> dict[str, str]:
    body = "import { getUserById } from './users';\n" + "".join(
        f"export const v{j} = getUserById('{j}') ?? getUserByIdCache;\n" for j in range(60)
    )
    return {f"src/m{i:02d}.ts": body for i in range(n)}


_RENAME_AGENT = r'''
import sys
from gitwal import Wal
from gitwal.base.errors import UnknownRun
from gitwal.records.model import Commit

RUN, GROUPED = "@RUN@", @GROUPED@
wal = Wal(sys.argv[1])
try:
    run = wal.run(RUN, group_commit=GROUPED)
except UnknownRun:
    run = wal.begin(task="rename getUserById -> fetchUser", run_id=RUN, group_commit=GROUPED)
records = run.records()
by_lsn = {r.lsn: r for r in records}
done = {by_lsn[r.intent].target[0] for r in records if isinstance(r, Commit)}
for i in range(40):
    path = f"src/m{i:02d}.ts"
    if path not in done:
        run.apply("replace_symbol", path=path, old="getUserById", new="fetchUser")
'''

def _agent(source: str, run: str, grouped: bool) -> str:
    return source.replace("@RUN@", run).replace("@GROUPED@", str(grouped))


RENAME = Workload(name="rename", run="rename", files=_rename_files(40),
                  agent=_agent(_RENAME_AGENT, "rename", False))

# The same steps under group commit: each step's commit rides in the next
# intent's append; the last is written at the process's exit.
RENAME_GROUPED = Workload(name="rename-grouped", run="rename-grouped", files=_rename_files(40),
                          agent=_agent(_RENAME_AGENT, "rename-grouped", True))

_MIXED_FILES = {
    "notes.txt": "alpha\nsecond line\n" * 10,
    "old.txt": "to be moved\n" * 30,
    "gone.txt": "to be deleted\n" * 30,
    "keep.txt": "untouched\n",
}

_MIXED_AGENT = r'''
import sys
from gitwal import Wal
from gitwal.base.errors import UnknownRun
from gitwal.records.model import Commit, Intent

SH = "mkdir -p out && printf built > out/b.txt && printf 'y\\n' >> notes.txt"
STEPS = [
    ("ensure_line", {"path": "notes.txt", "line": "X=1"}),
    ("write_file", {"path": "new/dir/a.txt", "content": b"fresh\n" * 50}),
    ("delete_file", {"path": "gone.txt"}),
    ("move_file", {"src": "old.txt", "dst": "moved/old.txt"}),
    ("exec", ["sh", "-c", SH]),
    ("ensure_line", {"path": "notes.txt", "line": "Z=2"}),
]

RUN, GROUPED = "@RUN@", @GROUPED@
wal = Wal(sys.argv[1])
try:
    run = wal.run(RUN, group_commit=GROUPED)
except UnknownRun:
    run = wal.begin(task="mixed steps", run_id=RUN, steps=[t for t, _ in STEPS],
                    group_commit=GROUPED)
records = run.records()
intents = {r.lsn: r for r in records if isinstance(r, Intent)}
done = {intents[r.intent].step for r in records if isinstance(r, Commit)}
for n, (tool, args) in enumerate(STEPS, start=1):
    if n in done:
        continue
    if tool == "exec":
        run.exec(args, step=n)
    else:
        run.apply(tool, step=n, **args)
'''

MIXED = Workload(name="mixed", run="mixed", files=_MIXED_FILES,
                 agent=_agent(_MIXED_AGENT, "mixed", False))
MIXED_GROUPED = Workload(name="mixed-grouped", run="mixed-grouped", files=_MIXED_FILES,
                         agent=_agent(_MIXED_AGENT, "mixed-grouped", True))

WORKLOADS = {w.name: w for w in (RENAME, RENAME_GROUPED, MIXED, MIXED_GROUPED)}

# Paths whose presence or contents no reader depends on: the temporary files of
# libgit2 and git next to the objects (object lookup and fsck only read
# objects/xx/<hash> and objects/pack/), git's bulk-checkin directory, and the
# empty flock files (opened with O_CREAT whenever needed). States that differ
# only there are checked once.
IGNORED = (
    ".git/objects/tmp_object_git2_*",
    ".git/objects/tmp_objdir-*",
    ".git/objects/??/tmp_obj_*",
    ".git/wal/locks/*",
)
