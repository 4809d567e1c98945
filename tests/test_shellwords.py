"""Command lines read as a shell would (gitwal/shellwords/): the commands a
line runs, checked against what real bash runs, and the rules built on them."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitwal.shellwords import Unparseable, commands
from gitwal.shellwords.guard import refusal
from gitwal.shellwords.match import first_match

PUSH = ("git push*",)


def git_runs(line: str, aliases: dict[str, str] | None = None) -> list[str]:
    return [c.text for c in commands(line, aliases) if c.argv[:1] == ("git",)]


@pytest.mark.parametrize("line", [
    "git push", "cd . && git push", "git -C . push", "(git push)", "FOO=1 git push",
    "git  push", "sh -c 'git push'", "bash -lc \"cd x; git push\"", "zsh -c 'git push'",
    "{ git push; }", "true; git push", "true & git push", "false || git push", "ls | git push",
    "ls |& git push", "true\ngit push", "if true; then git push; fi",
    "while false; do git push; done",
    "for f in a b; do git push; done", "! git push", "echo $(git push)", "echo `git push`",
    "echo \"$(git push)\"", "x=$(git push)", "cat <(git push)", "env -u CLAUDECODE git push",
    "env -i A=b git push", "env -S 'git push'", "command git push", "exec git push",
    "nice -n 5 git push", "nice -5 git push", "nohup git push", "time git push", "time -p git push",
    "timeout 10 git push", "timeout -s KILL 5 git push", "sudo -u bob git push",
    "sudo -E A=1 git push", "stdbuf -oL git push", "setsid git push", "xargs -n 1 git push",
    "/usr/bin/git push", "\"git\" push", "g\\it pu'sh'", "$'\\x67it' push", "git --no-pager push",
    "git -c core.pager=cat push", "git --git-dir=.git --work-tree=. push",
    "git --git-dir .git push", "git -P -p --no-optional-locks push", "eval git push",
    "eval 'git push'", "find . -exec git push ';'", "find . -execdir git push {} +",
    "watch git push", "flock /tmp/l git push", "flock /tmp/l -c 'git push'",
    "git wal exec -- git push", "git-wal exec --watch x -- git push",
    "sh -c \"sh -c 'git push'\"", "git commit -m x && git push",
    "git commit -m \"$(cat <<'EOF'\nmsg (with) parens\nEOF\n)\" && git push",
    "cat <<EOF && git push\nbody\nEOF\n", "cat <<-EOF\n\tbody\n\tEOF\ngit push",
])
def test_every_spelling_of_a_push_is_found(line: str) -> None:
    assert any(t.startswith("git push") for t in git_runs(line)), commands(line)
    assert first_match(line, PUSH) is not None


@pytest.mark.parametrize("line", [
    "git status", "echo git push", "git commit -m 'git push'", "cat <<'EOF'\ngit push\nEOF\n",
    "grep 'git push' notes.md", "git log --grep=push", "echo \"cd . && git push\"",
    "command -v git", "# git push", "git pushy",
])
def test_what_does_not_push_is_not_asked(line: str) -> None:
    assert first_match(line, ("git push", "git push *")) is None, commands(line)


@pytest.mark.parametrize("line", [
    "$GIT push", "\"$GIT\" push", "`which git` push", "$(echo git) push", "echo 'open",
    "echo \"open", "case x in a) git push;; esac", "f() { git push; }; f", "function f { :; }",
    "a=(git push)", "bash", "bash -s", "echo git push | sh", "bash <<EOF\ngit push\nEOF\n",
    "cat <<EOF\n$(git push)\nEOF\n", "cat <<EOF\nno end", "git $SUB", "git -c alias.p=push p",
    "GIT_CONFIG_COUNT=1 git p", "sh -c \"$CMD\"", "eval \"$CMD\"", "env --weird git push",
    "git --frobnicate push", "gi* push", "git {push,status}", "x=${y:-$(git push)}",
    "echo $((1 + $(git push)))", "coproc git push", "echo \\",
])
def test_what_cannot_be_read_counts_as_matching(line: str) -> None:
    with pytest.raises(Unparseable):
        commands(line)
    hit = first_match(line, PUSH)
    assert hit is not None and hit.unreadable


def test_git_aliases_of_the_local_config_are_expanded() -> None:
    assert git_runs("git p origin", {"p": "push"}) == ["git push origin"]
    assert git_runs("git P", {"p": "-C . push --force"}) == ["git push --force"]
    assert "git push x" in git_runs("git sh x", {"sh": "!git push"})
    assert first_match("git p", PUSH, {"p": "push"}) is not None


def test_global_options_are_dropped_and_the_words_kept() -> None:
    (c,) = commands("A=1 env -u X nice -n 5 git -C 'my dir' --no-pager -c a.b=c push  'o m'")
    assert c.argv == ("git", "push", "o m")
    assert c.written == "git -C my dir --no-pager -c a.b=c push o m"
    assert [a.text for a in c.assignments] == ["A=1"]


def test_redirections_are_kept_for_every_command() -> None:
    (c,) = commands("echo x >> .git/config")
    assert [(r.op, r.target.text, r.writes) for r in c.redirects] == [
        (">>", ".git/config", True)]
    (c,) = commands("> out")
    assert c.words == () and c.redirects[0].writes


# -- the guard: what no agent's tool call may run --------------------------------------

@pytest.mark.parametrize("line", [
    "git wal approve 3", "CLAUDECODE= git wal approve 3", "env -u CLAUDECODE git wal approve 3",
    "env CLAUDECODE=0 git-wal approve 3 --yes", "python3 -m gitwal approve 3",
    "python -m gitwal resolve 3 --applied", "git wal resolve 4 --not-applied",
    "sh -c 'git wal approve 3'", "git -C . wal approve 3", "git wal exec -- git wal approve 3",
    "time A=1 git wal approve 3", "time -p A=1 git wal resolve 4 --applied",
    "! A=1 git wal approve 3", "if true; then A=1 git wal approve 3; fi",
    "git config wal.done.enforce false", "git config --local wal.done.enforce false",
    "git config --global WAL.irreversible x", "git config --unset wal.irreversible",
    "git config --unset-all wal.irreversible", "git config --remove-section wal",
    "git config --rename-section wal x", "git config set wal.done.enforce false",
    "git config unset wal.irreversible", "git config --edit", "git config -e",
    "git config --global --edit", "git config edit", "git config include.path /tmp/x",
    "git config --add includeIf.gitdir:~/.path /tmp/x", "echo '[wal]' >> .git/config",
    "printf x > ~/.gitconfig", "tee -a .git/config", "sed -i s/true/false/ .git/config",
    "cp /tmp/c .git/config", "mv x ~/.config/git/config", "cd .git && echo x > config",
    "cat .git/wal/secret", "git config \"$K\" false", "git wal $X 3", "echo `cat x` $(",
    "git config --file .git/config wal.x y",
])
def test_the_guard_refuses_every_spelling(line: str) -> None:
    assert refusal(line) is not None


@pytest.mark.parametrize("line", [
    "git status", "git wal status --json", "git wal log", "ls",
    "git config --get wal.done.enforce", "git config wal.irreversible",
    "git config --get-all wal.irreversible", "git config -l", "git config --list --show-origin",
    "git config get wal.x", "git config user.name Ada", "cat .git/config",
    "grep wal .git/config", "git commit -m \"$(cat <<'EOF'\nresolve the approve bug\nEOF\n)\"",
    "pytest -q tests/ && ruff check .", "echo approve resolve", "git log --grep approve",
])
def test_the_guard_lets_ordinary_work_through(line: str) -> None:
    assert refusal(line) is None


# -- against real bash: the commands it runs are the ones read here ---------------------

# One call, one write: the gits of a pipeline run at once, and records written
# piecewise interleaved in the log (an O_APPEND write of a few bytes is whole).
SHIM = """#!/bin/sh
us=$(printf '\\037')
rec=""
for a in "$@"; do rec="$rec$a$us"; done
printf '%s\\036' "$rec" >> "$SHIM_LOG"
"""

# Words that are not options (an unknown git option is unreadable here, by design).
WORD = st.text(alphabet="abcXY z-._=/:%+,@", min_size=1, max_size=6).filter(
    lambda w: not w.startswith("-"))


def quoted(word: str) -> st.SearchStrategy[str]:
    plain = [st.just(word)] if shlex.quote(word) == word and "=" not in word else []
    double = '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    back = "".join("\\" + c for c in word)
    ansi = "$'" + "".join(f"\\x{ord(c):02x}" for c in word) + "'"
    return st.one_of(*plain, st.just(shlex.quote(word)), st.just(double), st.just(back),
                     st.just(ansi))


PROGRAMS = ("env", "nice", "nohup", "timeout", "stdbuf")


@st.composite
def git_call(draw: st.DrawFn) -> str:
    prefix = draw(st.lists(st.sampled_from([
        "A=1", "env", "env -u X", "nice -n 3", "command", "nohup", "timeout 9", "exec",
        "stdbuf -oL", "env B=2", "time"]), max_size=2))
    if "exec" in prefix:
        prefix = [p for p in prefix if p != "exec"]  # exec would end the shell early
    # After a program that runs its arguments (env, nice, ...), `command` and
    # `time` are looked up as programs, which this machine may not have (then
    # git never runs; the reader, reading it as run, errs on the safe side).
    first = next((i for i, p in enumerate(prefix) if p.split()[0] in PROGRAMS), len(prefix))
    prefix = [p for i, p in enumerate(prefix) if i <= first or p not in ("command", "time")]
    opts = draw(st.lists(st.sampled_from(["-C .", "--no-pager", "-c a.b=c", "-P",
                                          "--git-dir=.git"]), max_size=2))
    words = draw(st.lists(WORD, min_size=1, max_size=4))
    return " ".join([*prefix, "git", *opts, *[draw(quoted(w)) for w in words]])


@st.composite
def line_of(draw: st.DrawFn, depth: int = 0) -> str:
    parts = draw(st.lists(st.one_of(git_call(), st.just("true"), st.just("cd .")),
                          min_size=1, max_size=3))
    joined = parts[0]
    for p in parts[1:]:
        joined += draw(st.sampled_from(["; ", " && ", " | ", "\n", " || "])) + p
    shape = draw(st.sampled_from(["plain", "sub", "group", "sh", "subst"] if depth < 2
                                 else ["plain"]))
    if shape == "sub":
        return f"({joined})"
    if shape == "group":
        return "{ " + joined + "; }"
    if shape == "subst":
        return f"echo \"$({joined})\""
    if shape == "sh":
        inner = draw(line_of(depth + 1))
        # bash: $'...' is bash's (dash leaves it as written, which reads as more, not less)
        return f"{joined}; bash -c {shlex.quote(inner)}"
    return joined


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(line=line_of())
def test_the_git_commands_bash_runs_are_the_ones_read(line: str, tmp_path: Path) -> None:
    shims = tmp_path / "bin"
    shims.mkdir(exist_ok=True)
    (shims / "git").write_text(SHIM)
    (shims / "git").chmod(0o755)
    log = tmp_path / "log"
    log.write_bytes(b"")
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "SHIM_LOG": str(log)}
    subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, check=False,
                   stdin=subprocess.DEVNULL, capture_output=True)
    ran = sorted(tuple(call.split("\x1f")[:-1]) for call in
                 log.read_text().split("\x1e")[:-1])
    read = sorted(tuple(w.text for w in c.words[1:]) for c in commands(line)
                  if c.words and os.path.basename(c.words[0].text) == "git")
    if " || " in line:
        assert all(r in read for r in ran), (line, ran, read)
    else:
        assert ran == read, (line, ran, read)
