"""`make demo`: an agent renames a symbol across 40 files, is SIGKILLed half-way
through writing file 23, recovers from the log in refs/wal/<run>, finishes, and
ends byte-identical to an uninterrupted run of the same agent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
GIT_WAL = str(BIN / "git-wal")
OLD, NEW, LOOKALIKE = "getUserById", "fetchUser", "getUserByIdCache"
N_FILES, CRASH_AT = 40, 23
TASK = f"rename {OLD} -> {NEW}"
AREAS = ("routes", "services", "components", "jobs")


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


def sealed_env(home: Path) -> dict[str, str]:
    """No user git config, identity or stray GITWAL_* settings leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITWAL_"))}
    home.mkdir()
    ident = {"NAME": "Demo Agent", "EMAIL": "agent@example.com"}
    env.update({f"GIT_{who}_{k}": v for who in ("AUTHOR", "COMMITTER") for k, v in ident.items()})
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1",
               PATH=str(BIN) + os.pathsep + env.get("PATH", ""))
    return env


ENV: dict[str, str] = {}


def run(cwd: Path, *argv: str, env: dict[str, str] | None = None,
        ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env={**ENV, **(env or {})}, capture_output=True,
                          text=True)
    if proc.returncode not in ok:
        sys.exit(f"demo: `{' '.join(argv)}` exited {proc.returncode}:\n{proc.stderr}")
    return proc


def make_project(root: Path) -> list[str]:
    """A small TypeScript project; returns the 40 files that mention OLD, in plan order."""
    files = {"src/api/users.ts": (
        "export interface User { id: string; name: string }\n\n"
        f"export const {LOOKALIKE} = new Map<string, User>();\n\n"
        f"export function {OLD}(id: string): Promise<User> {{\n"
        f"  const hit = {LOOKALIKE}.get(id);\n"
        "  if (hit) return Promise.resolve(hit);\n"
        "  return fetch(`/api/users/${id}`).then((r) => r.json());\n}\n")}
    for i in range(2, N_FILES + 1):  # file i is plan step i
        area = AREAS[i % len(AREAS)]
        lines = [f'import {{ {OLD}, {LOOKALIKE} }} from "../api/users";', "",
                 f"export async function {area}Handler{i:02d}(id: string): Promise<string> {{",
                 f"  const user = await {OLD}(id);",
                 f"  const warm = {LOOKALIKE}.has(id); // {LOOKALIKE} keeps its name"]
        lines += [f"  const peer{k} = await {OLD}(`${{id}}-{k}`);" for k in range(i % 3)]
        lines += ["  return `${user.name} ${warm ? \"(cached)\" : \"\"}`;", "}", ""]
        files[f"src/{area}/{area[:-1]}{i:02d}.ts"] = "\n".join(lines)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    run(root, "git", "init", "-q", "-b", "main")
    run(root, "git", "add", "-A")
    run(root, "git", "commit", "-q", "-m", "TypeScript app using getUserById")
    return list(files)


def apply(repo: Path, rel: str, crash: bool = False) -> int:
    env = {"GITWAL_CRASH_AT": "mid-write"} if crash else None
    argv = (GIT_WAL, "apply", "replace-symbol", rel, OLD, NEW)
    return run(repo, *argv, env=env, ok=(0, -9) if crash else (0,)).returncode


def agent(repo: Path, plan: list[str], crash_at: int | None = None) -> str:
    """The scripted agent: write the plan, then one logged step per file."""
    steps = [a for rel in plan for a in ("--step", rel)]
    run_id = run(repo, GIT_WAL, "begin", "--task", TASK, *steps).stdout.strip()
    for n, rel in enumerate(plan, start=1):
        if apply(repo, rel, crash=n == crash_at) == -9:
            say(f"  step {n} ({rel}): git-wal exited -9 (SIGKILL at crash point mid-write)")
            break
    return run_id


def resume(repo: Path) -> list[str]:
    """Finish the task from the log's facts, not from memory; returns what it redid."""
    rows: list[dict[str, Any]] = [
        json.loads(line) for line in run(repo, GIT_WAL, "log", "--json").stdout.splitlines()]
    plan = next(r for r in rows if r["type"] == "plan")["steps"]
    done: set[str] = set()
    for r in rows:
        if r["type"] == "intent" and r["tool"] == "replace_symbol" and r["status"] == "committed":
            done.update([r["target"]] if isinstance(r["target"], str) else r["target"])
    todo = [s for s in plan if s not in done]
    say(f"  log facts: {len(plan)} plan steps, {len(done)} committed, {len(todo)} to go "
        f"(first: {todo[0] if todo else '-'})")
    for rel in todo:
        apply(repo, rel)
    return todo


def tree_id(repo: Path, scratch: Path) -> str:
    """Tree of the working tree via a throwaway index (the real index is never touched)."""
    env = {"GIT_INDEX_FILE": str(scratch / f"{repo.name}.index")}
    run(repo, "git", "add", "-A", env=env)
    return run(repo, "git", "write-tree", env=env).stdout.strip()


def differing(a: Path, b: Path) -> list[str]:
    names = {p.relative_to(r).as_posix() for r in (a, b) for p in (r / "src").rglob("*")}
    return sorted(n for n in names if not (a / n).is_dir() and (
        not (a / n).is_file() or not (b / n).is_file()
        or (a / n).read_bytes() != (b / n).read_bytes()))


def framed(title: str, text: str) -> None:
    print(f"  +--- {title} " + "-" * max(3, 70 - len(title)))
    for line in text.rstrip("\n").splitlines():
        print(f"  | {line}")
    print("  +" + "-" * 76, flush=True)


def main() -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gitwal-demo-") as tmp:
        top = Path(tmp)
        ENV.update(sealed_env(top / "home"))
        crashed, reference = top / "crashed", top / "reference"
        crashed.mkdir()
        plan = make_project(crashed)
        shutil.copytree(crashed, reference, symlinks=True)
        victim = plan[CRASH_AT - 1]
        say(f"TypeScript project in {top}: {len(plan)} files call {OLD} "
            f"(plus lookalike {LOOKALIKE}); copied for a reference run")

        say(f"agent starts `{TASK}` (1 plan, {len(plan)} steps), crash armed at step {CRASH_AT}")
        run_id = agent(crashed, plan, crash_at=CRASH_AT)
        full = len((reference / victim).read_text().replace(OLD, NEW).encode())
        torn = (crashed / victim).read_bytes()
        say(f"  {victim} is torn: {len(torn)} of {full} bytes, cut off at ...{torn[-32:]!r}")
        for line in (run(crashed, "git", "diff", "--stat", "--", victim).stdout.splitlines()[0],
                     run(crashed, "git", "diff", "--shortstat").stdout):
            say(f"  git diff --stat: {' '.join(line.split())}")
        status = json.loads(run(crashed, GIT_WAL, "status", "--json").stdout)
        say(f"  git wal status: {len(status['committed'])} committed, "
            f"open intents {status['open']}")
        if not status["open"]:
            sys.exit("demo: the crash did not leave an open intent; nothing to recover")

        say("`git wal recover` decides the open intent and prints the resume prompt:")
        rec = run(crashed, GIT_WAL, "recover")
        framed("git wal recover (stdout)", rec.stdout)
        back = (crashed / victim).read_bytes() == (reference / victim).read_bytes()
        say(f"  after recovery {victim} " + ("is byte-identical to its pre-image" if back
                                             else "is NOT its pre-image"))

        say("agent resumes from `git wal log --json`:")
        redone = resume(crashed)
        say(f"  applied {len(redone)} remaining steps ({redone[0]} .. {redone[-1]})")

        t1 = time.monotonic()
        say(f"reference: same agent, same {len(plan)} steps, no crash")
        agent(reference, plan)
        say(f"  done in {time.monotonic() - t1:.1f}s")

        say(f"the log lives in git: `git log --oneline refs/wal/{run_id} | head -5`")
        framed(f"refs/wal/{run_id}",
               run(crashed, "git", "log", "--oneline", "-5", f"refs/wal/{run_id}").stdout)
        fsck = run(crashed, "git", "fsck", "--strict", ok=(0, 1, 2))
        fsck_ok = fsck.returncode == 0 and not (fsck.stdout + fsck.stderr).strip()
        say("git fsck --strict: " + ("clean" if fsck_ok else "PROBLEMS"))
        print(fsck.stdout + fsck.stderr, end="")

        scratch = top / "scratch"
        scratch.mkdir()
        ids = (tree_id(crashed, scratch), tree_id(reference, scratch))
        diff = differing(crashed, reference)
        leftover = run(crashed, "git", "grep", "-w", "-l", OLD, ok=(0, 1)).stdout.split()
        kept = run(crashed, "git", "grep", "-w", "-l", LOOKALIKE, ok=(0, 1)).stdout.split()
        say(f"tree ids: crashed {ids[0][:12]}, reference {ids[1][:12]}; "
            f"`git grep -w {OLD}`: {len(leftover)} files; {LOOKALIKE} still in {len(kept)} files")

        if ids[0] == ids[1] and not diff and not leftover and len(kept) == len(plan) and fsck_ok:
            print(f"verdict: IDENTICAL ({len(plan)} files, crash at file {CRASH_AT} recovered) "
                  f"in {time.monotonic() - t0:.1f}s")
            return 0
        print(f"verdict: DIFFERENT: {len(diff)} file(s) differ {diff[:10]}; {OLD} left in "
              f"{leftover}; {LOOKALIKE} in {len(kept)}/{len(plan)} files; fsck ok={fsck_ok}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
