"""git's conventions for `git wal`: `help`, `-h`, the man page behind
`git wal --help`, shell completion that git's own completion dispatches to,
and a clear refusal on a platform gitwal does not support."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gitwal.base.errors import EXIT_USAGE
from gitwal.cli import COMMANDS, main, manpage
from gitwal.cli.examples import EXAMPLES

from .conftest import ok, wal

ROOT = Path(__file__).resolve().parent.parent


def test_an_unsupported_platform_is_refused_with_a_hint_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SystemExit) as exit_:
        main(["status"])
    assert exit_.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("error: gitwal does not run on this platform (win32)\n"
                   "hint: gitwal supports Linux (README \"Supported platforms\"); "
                   "on Windows, run it inside WSL 2\n")


# -- git wal help, -h -------------------------------------------------------------


def test_help_prints_the_overview_and_each_commands_help(repo: Path) -> None:
    overview = ok(repo, "help")
    assert overview == ok(repo, "-h")
    assert overview.startswith("Usage: git wal [OPTIONS] COMMAND [ARGS]...\n")
    assert "`git wal help COMMAND` or `git wal COMMAND -h`" in overview
    for args in (("status",), ("apply",), ("apply", "write-file"), ("hooks", "install"),
                 ("help",), ("completion",)):
        shown = ok(repo, "help", *args)
        assert shown == ok(repo, *args, "-h") == ok(repo, *args, "--help")
        assert shown.startswith(f"Usage: git wal {' '.join(args)} ")


@pytest.mark.parametrize(("args", "message", "hint"), [
    (("stat",), "No such command 'stat'. Did you mean 'status'?",
     "`git wal help` lists the commands"),
    (("frobnicate",), "No such command 'frobnicate'.", "`git wal help` lists the commands"),
    (("apply", "wrte-file"), "No such command 'wrte-file' in `git wal apply`. Did you mean "
     "'write-file'?", "`git wal help apply` lists the commands"),
    (("status", "x"), "`git wal status` has no subcommand 'x'",
     "`git wal help status` shows its help"),
])
def test_help_of_an_unknown_command_is_a_usage_error(
        repo: Path, args: tuple[str, ...], message: str, hint: str) -> None:
    proc = wal(repo, "help", *args)
    assert (proc.returncode, proc.stdout) == (EXIT_USAGE, "")
    assert proc.stderr == f"error: {message}\nhint: {hint}\n"


def test_a_usage_error_points_at_help_that_works(repo: Path) -> None:
    proc = wal(repo, "status", "--bogus")
    assert (proc.returncode, proc.stdout) == (EXIT_USAGE, "")
    assert proc.stderr == "error: No such option: --bogus\nhint: see `git wal status -h`\n" \
        or proc.stderr == "error: No such option '--bogus'.\nhint: see `git wal status -h`\n"
    hint = proc.stderr.splitlines()[1]
    shown = hint.split("`")[1].split()[2:]  # the command the hint names, after "git wal"
    assert ok(repo, *shown).startswith("Usage: git wal status ")


def test_each_commands_help_has_examples(repo: Path) -> None:
    for name in ("begin", "apply", "exec", "recover", "status", "log", "checkpoint",
                 "verify"):
        shown = ok(repo, name, "-h")
        examples = shown.split("\n  Examples:\n\n", 1)[1]
        commands = [line.strip() for line in examples.splitlines()
                    if line.strip() and not line.strip().startswith("#")]
        assert commands and all(f"git wal {name}" in c for c in commands), (name, commands)
        assert set(EXAMPLES) <= set(COMMANDS), name


# -- completion ------------------------------------------------------------------

GIT_COMPLETION = Path("/usr/share/bash-completion/completions/git")


def complete_in_bash(tmp_path: Path, script: str, *lines: str) -> list[str]:
    """Source ``script`` into bash and run each of ``lines`` (which fill
    COMPREPLY); returns COMPREPLY after each, one word per ``[...]``."""
    (tmp_path / "completion.bash").write_text(script)
    body = "\n".join(f'COMPREPLY=(); {line}; printf "[%s]" "${{COMPREPLY[@]}}"; echo'
                     for line in lines)
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                           f"source {tmp_path / 'completion.bash'}\n{body}"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def completion_script(tmp_path: Path, shell: str) -> str:
    return ok(tmp_path, "completion", shell)


def test_bash_completion_of_git_wal_as_gits_completion_calls_it(tmp_path: Path) -> None:
    script = completion_script(tmp_path, "bash")
    assert "_GIT WAL" not in script and "complete -F _git_wal_command git-wal" in script

    def as_git(*words: str) -> str:
        # What git's completion (__git_main) hands a subcommand's function.
        quoted = " ".join(f"'{w}'" for w in words)
        return f"words=({quoted}); cword={len(words) - 1}; _git_wal"

    out = complete_in_bash(
        tmp_path, script,
        as_git("git", "wal", "sta"),
        as_git("git", "wal", "status", "--j"),
        as_git("git", "-C", ".", "wal", "apply", "wr"),
        as_git("git", "wal", "help", "rec"),
        as_git("git", "wal", "completion", ""),
        # git-wal as a command of its own: COMP_WORDS, no trailing space (bash adds it).
        "COMP_WORDS=(git-wal sta); COMP_CWORD=1; _git_wal_command",
        "COMP_WORDS=(git-wal log --); COMP_CWORD=2; _git_wal_command",
    )
    assert out == ["[status ]", "[--json ]", "[write-file ]", "[recover ]", "[bash ][zsh ]",
                   "[status]",
                   "[--run][--all][--records][--json][--color][--no-color][--no-pager][--help]"]


@pytest.mark.skipif(not GIT_COMPLETION.exists(), reason=f"no {GIT_COMPLETION} (bash-completion)")
def test_gits_own_bash_completion_dispatches_git_wal(tmp_path: Path) -> None:
    script = f"source {GIT_COMPLETION}\n" + completion_script(tmp_path, "bash")
    call = ('COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE="${{COMP_WORDS[*]}}"; '
            "COMP_POINT=${{#COMP_LINE}}; __git_wrap__git_main")
    out = complete_in_bash(tmp_path, script,
                           call.format(words="git wal sta", cword=2),
                           call.format(words="git wal apply --ch", cword=3))
    assert out == ["[status ]", "[--check ]"]


def test_completion_of_an_unknown_shell_is_a_usage_error(tmp_path: Path) -> None:
    proc = wal(tmp_path, "completion", "fish")
    assert proc.returncode == EXIT_USAGE
    assert proc.stderr.startswith("error: Invalid value for '{bash|zsh}': 'fish' is not ")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_defines_the_function_gits_completion_calls(tmp_path: Path) -> None:
    (tmp_path / "c.zsh").write_text(completion_script(tmp_path, "zsh"))
    # compadd and _describe exist only inside a completion widget: stand-ins
    # that print what they were given.
    proc = subprocess.run(["zsh", "-f", "-c", f"""
        compdef() {{ print -r -- "compdef $*" }}
        compadd() {{ print -r -- "compadd ${{(@)argv[-1]}}=${{(P)argv[-1]}}" }}
        _describe() {{ print -r -- "describe ${{(P)argv[3]}}" }}
        source {tmp_path / 'c.zsh'}
        words=(wal sta); CURRENT=2; _git-wal
        words=(git-wal status --j); CURRENT=3; _git-wal
    """], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # (click shortens a command's help to its first 45 characters or so)
    assert proc.stdout.splitlines() == [
        "compdef _git-wal git-wal",
        "describe status:Committed, aborted and open intents, and...",
        "describe --json:Print the result as JSON.",
    ]


# -- the man page ----------------------------------------------------------------


def test_the_checked_in_man_page_is_generated_from_the_commands() -> None:
    assert manpage.PAGE.read_text() == manpage.render(), (
        "man/git-wal.1 is stale: run `python -m gitwal.cli.manpage --write`")


def test_a_stale_man_page_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "man" / "git-wal.1"
    stale.parent.mkdir()
    stale.write_text(manpage.render().replace("Start a run", "Begin a run"))
    monkeypatch.setattr(manpage, "ROOT", tmp_path)
    monkeypatch.setattr(manpage, "PAGE", stale)
    monkeypatch.setattr(manpage, "render", lambda: manpage.PAGE.read_text().replace(
        "Begin a run", "Start a run"))
    assert manpage._main(["--check"]) == 1
    assert capsys.readouterr().err == ("man/git-wal.1 is stale: run `python -m "
                                       "gitwal.cli.manpage --write`\n")
    assert manpage._main(["--write"]) == 0
    assert manpage._main(["--check"]) == 0
    assert "Start a run" in stale.read_text()


def test_the_man_page_has_every_command_its_options_examples_and_exit_codes() -> None:
    page = manpage.PAGE.read_text()
    ctx = click.Context(main)
    visible = [n for n in COMMANDS if not main.get_command(ctx, n).hidden]  # type: ignore[union-attr]
    for name in visible:
        assert f"\n.SS git wal {name.replace('-', chr(92) + '-')}\n" in page, name
    assert "\n.SS git wal hook\n" not in page  # hidden: agents' hooks call it
    assert "\n.SS git wal apply write\\-file\n" in page
    assert "\n.B \\-\\-wait\\-timeout SECONDS\n" in page
    assert "git wal recover \\-\\-redo\n" in page  # an example
    readme = (ROOT / "README.md").read_text()
    codes = manpage.exit_codes(readme)
    assert [c for c, _ in codes] == ["0", "1", "2", "3", "4", "5", "6", "141"]
    status = page.split('.SH "EXIT STATUS"\n')[1].split(".SH ")[0]
    assert status.count(".TP\n") == len(codes)
    assert "e.g. git wal log | head \\-1" in status


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_the_man_page_is_valid_roff() -> None:
    proc = subprocess.run(["groff", "-man", "-ww", "-z", str(manpage.PAGE)],
                          capture_output=True, text=True)
    assert (proc.returncode, proc.stderr) == (0, "")
