"""The wrapper programs unwrap.py sees through (env, sudo, nice, xargs, ...):
the options each knows, and a wrapper's options taken off its words.

An option a wrapper's table does not name is :class:`~gitwal.shellwords.word.Unparseable`:
whether it takes a value, and so where the wrapped command starts, is not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .word import Unparseable, Word

__all__ = ["WRAPPERS", "Spec", "take_options"]


@dataclass(frozen=True)
class Spec:
    """A wrapper's options: which take a value, and the positionals before its command."""

    short_arg: str = ""
    short_flag: str = ""
    long_arg: frozenset[str] = frozenset()
    long_flag: frozenset[str] = frozenset()
    positionals: int = 0


def _spec(short_arg: str = "", short_flag: str = "", long_arg: str = "", long_flag: str = "",
          positionals: int = 0) -> Spec:
    return Spec(short_arg, short_flag, frozenset(long_arg.split()),
                frozenset(long_flag.split()), positionals)


WRAPPERS: dict[str, Spec] = {
    "env": _spec("uCS", "i0v", "unset chdir split-string",
                 "ignore-environment null debug default-signal ignore-signal block-signal "
                 "list-signal-handling"),
    "command": _spec("", "pvV"),
    "builtin": _spec(),
    "exec": _spec("a", "cl"),
    "nice": _spec("n", "", "adjustment"),
    "nohup": _spec(),
    "time": _spec("fo", "pqav", "format output", "portability append verbose quiet"),
    "timeout": _spec("ks", "v", "kill-after signal", "preserve-status foreground verbose", 1),
    "stdbuf": _spec("ioe", "", "input output error"),
    "setsid": _spec("", "cfw", "", "ctty fork wait"),
    "ionice": _spec("cnpPu", "t", "class classdata pid pgid uid", "ignore"),
    "taskset": _spec("", "acp", "", "all-tasks cpu-list pid", 1),
    "doas": _spec("uC", "nsL"),
    "sudo": _spec("ughpCDrtTUR", "AbEeHiKklnPSsVv",
                  "user group host prompt close-from chdir role type other-user "
                  "command-timeout chroot",
                  "askpass background preserve-env set-home login remove-timestamp "
                  "reset-timestamp list non-interactive preserve-groups stdin shell version "
                  "validate edit"),
    "xargs": _spec("adEILnPs", "0oprtxeil",
                   "arg-file delimiter max-args max-procs max-chars process-slot-var",
                   "null open-tty interactive no-run-if-empty verbose exit show-limits eof "
                   "replace max-lines"),
    "unbuffer": _spec("", "p"),
    "watch": _spec("n", "dtbegcxpwr", "interval",
                   "differences no-title beep errexit chgexit color no-color exec precise "
                   "no-wrap no-linewrap"),
    "flock": _spec("wEc", "sexunoFv", "timeout conflict-exit-code command",
                   "shared exclusive unlock nonblock close no-fork verbose", 1),
}


def take_options(rest: list[Word], spec: Spec) -> tuple[set[str], list[Word], dict[str, list[str]]]:
    """A wrapper's options taken off ``rest``: the names seen, the words after
    them (its command), and the values of the options that take one."""
    seen: set[str] = set()
    values: dict[str, list[str]] = {}
    i = 0
    positionals = spec.positionals
    while i < len(rest):
        w = rest[i]
        t = w.text
        if w.dynamic and t.startswith("-"):
            raise Unparseable(f"an option known only when it runs ({t!r})")
        if t == "--":
            i += 1
            break
        if t.startswith("--"):
            name, eq, value = t[2:].partition("=")
            if name in spec.long_arg:
                if not eq:
                    value = _value_after(rest, i, f"--{name}")
                    i += 1
                values.setdefault(name, []).append(value)
            elif name not in spec.long_flag:
                raise Unparseable(f"an option this reader does not know ({t!r})")
            seen.add(name)
            i += 1
            continue
        if t.startswith("-") and len(t) > 1 and not t[1:].isdigit():
            j = 1
            while j < len(t):
                c = t[j]
                seen.add(c)
                if c in spec.short_arg:
                    value = t[j + 1:]
                    if not value:
                        value = _value_after(rest, i, f"-{c}")
                        i += 1
                    values.setdefault(c, []).append(value)
                    break
                if c not in spec.short_flag:
                    raise Unparseable(f"an option this reader does not know ({t!r})")
                j += 1
            i += 1
            continue
        if t.startswith("-") and t[1:].isdigit():  # nice -5
            i += 1
            continue
        if positionals:
            positionals -= 1
            i += 1
            continue
        break
    return seen, rest[i:], values


def _value_after(rest: list[Word], i: int, option: str) -> str:
    """The value of ``option`` (at ``rest[i]``): the next word; refused when there is none."""
    if i + 1 >= len(rest):
        raise Unparseable(f"{option} without its value")
    return rest[i + 1].text
