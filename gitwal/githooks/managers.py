"""Hook managers: who owns the hooks directory, and how gitwal's hooks join it.

A team's hooks are often run by a manager: husky (``core.hooksPath`` is its
generated ``.husky/_``, which dispatches on each hook's file name to a tracked
``.husky/<hook>``), lefthook and the pre-commit framework (each writes its own
script into ``.git/hooks`` and renames a script it did not write: lefthook to
``<hook>.old``, which it never runs again), or a tracked directory named by
``core.hooksPath``. gitwal never writes into a manager's generated directory,
over a hook a manager runs, or into a tracked file: for those hooks it prints
the one entry to add to the manager's configuration, which calls
``git wal hooks run <hook>`` (install.py), and ``git wal hooks status`` checks
that the entry is there.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import WalError
from ..cloned import File

LEFTHOOK_CONFIGS = ("lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
                    "lefthook.toml", "lefthook.json")
PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"


def run_line(hook: str) -> str:
    """The command a manager runs for gitwal's ``hook`` (its arguments and
    stdin are passed through)."""
    return f"git wal hooks run {hook}"


@dataclass(frozen=True)
class Manager:
    """The manager of this repository's hooks (or the tracked hooks directory)."""

    name: str  # husky | lefthook | pre-commit | tracked-hooks-path
    config: str  # the file to edit, relative to the top of the working tree ({hook}: per hook)
    manages: frozenset[str]  # gitwal's hooks it runs (gitwal writes none of these)
    # gitwal's hooks it cannot run and gitwal must not write either (why)
    unavailable: dict[str, str] = field(default_factory=dict)

    def entry(self, hook: str) -> str:
        """What to add to ``config`` so the manager runs gitwal's ``hook``."""
        line = run_line(hook)
        if self.name == "lefthook":
            stdin = "\n      use_stdin: true" if hook == "reference-transaction" else ""
            return (f"{hook}:\n  commands:\n    gitwal:\n      run: {line} {{0}}{stdin}")
        if self.name == "pre-commit":
            return ("-   repo: local\n    hooks:\n    -   id: gitwal-no-open-intents\n"
                    "        name: gitwal (no open intents)\n"
                    f"        entry: {line}\n        language: system\n"
                    "        pass_filenames: false\n        always_run: true")
        return f'{line} "$@"'  # a line of a shell hook file (husky, tracked directory)

    def config_of(self, hook: str) -> str:
        return self.config.format(hook=hook)

    def wired(self, root: Path, hook: str) -> bool:
        """The manager's configuration runs gitwal's ``hook``."""
        text = _tree_text(root, self.config_of(hook))
        if self.name == "pre-commit":
            return run_line(hook) in text or "gitwal-no-open-intents" in text
        return run_line(hook) in text


def detect(root: Path, hooks_dir: Path) -> Manager | None:
    """The manager of ``hooks_dir`` (where git looks for hooks in the working
    tree at ``root``), or None: gitwal installs its scripts there itself."""
    rel = _inside(root, hooks_dir)
    if rel is not None and rel.parts[-2:] == (".husky", "_"):
        return Manager(
            "husky", str(rel.parent / "pre-commit"), frozenset({"pre-commit"}),
            {"reference-transaction": (
                f"husky owns core.hooksPath ({rel}, generated, not tracked) and runs no "
                "reference-transaction hook; the logs' refs are still protected where "
                "they are pushed (`git wal hooks install` in the bare repository)")})
    if rel is not None and _tracked(root, rel):
        return Manager("tracked-hooks-path", str(rel / "{hook}"),
                       frozenset({"pre-commit", "reference-transaction"}))
    own = {h: _script_text(hooks_dir / h) for h in ("pre-commit", "reference-transaction")}
    lefthook = next((c for c in LEFTHOOK_CONFIGS if (root / c).is_file()), None)
    if lefthook or any("lefthook" in t for t in own.values()):
        config = lefthook or LEFTHOOK_CONFIGS[0]
        declared = _tree_text(root, config)
        # lefthook writes (and renames what it finds at) the hooks its
        # configuration names; pre-commit is the usual one.
        manages = {"pre-commit"} | {h for h in ("reference-transaction",)
                                    if f"\n{h}:" in "\n" + declared or "lefthook" in own[h]}
        return Manager("lefthook", config, frozenset(manages))
    if (root / PRE_COMMIT_CONFIG).is_file() or "pre-commit.com" in own["pre-commit"]:
        # The framework installs pre-commit (and the types it is asked for), not
        # reference-transaction: gitwal keeps that one itself.
        return Manager("pre-commit", PRE_COMMIT_CONFIG, frozenset({"pre-commit"}))
    return None


def _inside(root: Path, path: Path) -> Path | None:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return None


def _tracked(root: Path, rel: Path) -> bool:
    proc = subprocess.run(["git", "ls-files", "--", str(rel)], cwd=root,
                          capture_output=True, text=True)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _script_text(path: Path) -> str:
    """A hook script in the hooks directory (bounded, a regular file), or ""."""
    return _text(File(path))


def _tree_text(root: Path, rel: str) -> str:
    """A manager's configuration in the working tree, which may come with a
    clone: confined to the tree, bounded, a regular file (cloned/); "" when it
    is absent or refused."""
    return _text(File.in_tree(root, rel))


def _text(f: File) -> str:
    try:
        data = f.read()
    except (OSError, WalError):
        return ""
    return "" if data is None else data.decode("utf-8", "replace")


__all__ = ["LEFTHOOK_CONFIGS", "PRE_COMMIT_CONFIG", "Manager", "detect", "run_line"]
