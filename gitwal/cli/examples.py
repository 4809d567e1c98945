"""The Examples section of each command's help (and of the man page).

Kept apart from the commands so that one place shows how the commands are
used together; cli/__init__.py attaches each text as its command's click
``epilog`` when the command is loaded. ``\\b`` keeps click from rewrapping
a block.
"""

from __future__ import annotations


def _examples(*pairs: tuple[str, str]) -> str:
    """Examples from (what it does, the command line) pairs."""
    blocks = [f"\b\n  # {what}\n  {line}" for what, line in pairs]
    return "Examples:\n\n" + "\n\n".join(blocks)


EXAMPLES: dict[str, str] = {
    "begin": _examples(
        ("start a run with a two-step plan; prints its id",
         'git wal begin --task "rename getUserById -> fetchUser" --step src/a.ts '
         "--step src/b.ts"),
        ("choose the run id, and read the result as JSON",
         'git wal begin --run fix-42 --task "fix #42" --json'),
    ),
    "apply": _examples(
        ("rename an identifier in one file, as plan step 1",
         "git wal apply --step 1 replace-symbol src/a.ts getUserById fetchUser"),
        ("commit the edit only if the type checker passes",
         'git wal apply --check "npx tsc --noEmit" replace-text src/a.ts '
         '--old "x = 1" --new "x = 2"'),
        ("write a file from standard input",
         "printf 'done\\n' | git wal apply write-file NOTES.md"),
        ("move, then delete",
         "git wal apply move-file old.py new.py && git wal apply delete-file tmp.txt"),
    ),
    "exec": _examples(
        ("run a command as a logged step; recovery may run it again",
         "git wal exec --idempotent -- npm install"),
        ("include ignored build output in the snapshots, check it, time it out",
         'git wal exec --watch dist --check "test -f dist/app.js" --timeout 300 -- make'),
        ("a step a crash may leave in doubt: say how recovery can tell it happened",
         'git wal exec --confirm "git tag -l v1.2 | grep -q ." -- git tag v1.2'),
    ),
    "recover": _examples(
        ("after a crash: decide every open intent and print the resume prompt",
         "git wal recover"),
        ("redo the replay-safe steps that did not land",
         "git wal recover --redo"),
        ("the same facts for a harness",
         "git wal recover --json"),
    ),
    "resume": _examples(
        ("the machine that ran the agent is gone: go on with its run in this clone",
         "git wal resume 20261207T141501Z-3f2a --remote origin"),
        ("the same facts for a harness (the resume prompt in \"prompt\")",
         "git wal resume 20261207T141501Z-3f2a --json"),
    ),
    "order": _examples(
        ("every run's steps in one order, conflicts named, checked against the tree",
         "git wal order"),
        ("only the runs that began on main's current commit or later, as JSON",
         "git wal order --since main --json"),
        ("every run on the remote (several machines), read without integrating them",
         "git wal order --remote origin"),
    ),
    "undo": _examples(
        ("see what undoing the newest step would change, then do it",
         "git wal undo --dry-run && git wal undo"),
        ("go back to the tree as of LSN 4 (every later step, shell steps too)",
         "git wal undo --to 4"),
        ("a file changed since: keep its bytes in the log, then undo anyway",
         "git wal undo --force"),
    ),
    "redo": _examples(
        ("take back the newest undo",
         "git wal redo"),
    ),
    "claim": _examples(
        ("keep other runs off the API sources for half an hour",
         "git wal claim 'src/api/*' docs/api.md --ttl 1800"),
    ),
    "release": _examples(
        ("end every claim of the current run", "git wal release"),
    ),
    "approve": _examples(
        ("let the waiting push run (it runs when the same command is given again)",
         'git wal approve 9 --note "release 1.2 reviewed"'),
    ),
    "resolve": _examples(
        ("a step in doubt did happen: keep the tree as it is and close it",
         'git wal resolve 12 --applied --note "the migration ran; checked the table"'),
        ("it did not happen: close it without touching the tree",
         "git wal resolve 12 --not-applied"),
    ),
    "status": _examples(
        ("the current run: committed, aborted and open intents",
         "git wal status"),
        ("another run, as JSON",
         "git wal status --run fix-42 --json"),
    ),
    "log": _examples(
        ("the current run's steps, oldest first: time, outcome, duration",
         "git wal log"),
        ("one line per record, closing records too, without colour or pager",
         "git wal log --records --no-color --no-pager"),
        ("one JSON object per line, archived segments included",
         "git wal log --all --json | head -5"),
    ),
    "show": _examples(
        ("step 4 of the current run and its change as a diff",
         "git wal show 4"),
        ("the same as JSON: the record, its closing, each changed path",
         "git wal show 4 --run fix-42 --json"),
    ),
    "checkpoint": _examples(
        ("commit the tree the log explains on the current branch",
         'git wal checkpoint -m "rename done" --check "make test"'),
        ("keep the checkpoint off the branch (under refs/wal-checkpoints/)",
         "git wal checkpoint --detached"),
    ),
    "verify": _examples(
        ("every run in the repository, for people",
         "git wal verify --all"),
        ("in CI: signed and sealed logs, a JUnit report",
         "git wal verify --all --require-signed --require-sealed --format junit "
         "> wal.xml"),
    ),
    "runs": _examples(("the runs of this repository (* = current)", "git wal runs")),
    "prompt": _examples(("the resume prompt alone (changes nothing)", "git wal prompt")),
    "help": _examples(
        ("the help of a command, and of an apply tool",
         "git wal help status && git wal help apply write-file"),
    ),
    "completion": _examples(
        ("bash: load now, or install for every new shell",
         "source <(git wal completion bash)"),
        ("zsh (after compinit)",
         "source <(git wal completion zsh)"),
    ),
}
