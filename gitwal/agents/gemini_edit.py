"""What Gemini CLI's ``replace`` and ``write_file`` write: its semantics, rewritten.

Gemini CLI 0.61.0 (packages/core/src/tools/edit.ts) looks for ``old_string``
in four ways, in this order, and uses the first that finds anything:

1. exact: every occurrence (one only unless ``allow_multiple``; more than one
   without it is an error, and no other way is tried);
2. flexible: line windows equal to ``old_string``'s lines once both are
   trimmed; the new lines take the first matched line's indentation;
3. regex: ``old_string`` cut into tokens (whitespace and ``()[]{}<>:=``
   separate them), matched at a line start with any whitespace between them;
4. fuzzy: line windows within a weighted Levenshtein distance of 10 %.

Then it refuses 0 occurrences, more than one without ``allow_multiple``, and
an ``old_string`` equal to ``new_string``; a refused edit may still succeed
through a model call that rewrites the strings (self-correction), which no one
can predict: every such case raises :class:`ToolRefused` (an unpredicted
intent). Gemini works on the text with CRLF turned into LF and writes CRLF
back to a file that had any.

JavaScript's notion of whitespace (``trim``, ``\\s``) and of a line end
(``.`` stops at CR, LS and PS too) differs from Python's: both are spelled
out here. Lengths and edit distances are in UTF-16 code units, as in
JavaScript.
"""

from __future__ import annotations

import os
import re

from ..base.errors import ToolRefused

__all__ = ["has_escapes", "keeps_escapes", "replace_post", "write_post"]

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim and \s mean.
JS_SPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
            "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
_WS = "[" + re.escape(JS_SPACE) + "]"
_LINES = re.compile(r"[^\n\r\u2028\u2029]*(?:\n|\Z)")  # JS /.*(?:\n|$)/g
_INDENT = re.compile(r"[ \t]*")
_LINE_START = r"(?:(?<![\s\S])|(?<=[\n\r\u2028\u2029]))"  # JS ^ under the m flag
_DELIMITERS = "():[]{}><="
FUZZY_THRESHOLD = 0.1
WHITESPACE_PENALTY = 0.1
FUZZY_LIMIT = 4e8  # Gemini skips fuzzy matching above lines * len(old)**2
FUZZY_BUDGET = 20_000_000  # work units (a window, a distance column of 64 units)...
WINDOW_COST = 64  # ... before gitwal gives up on reproducing a fuzzy match
JSON_LIKE = (".json", ".ipynb", ".jsonc", ".json5")


def trim(s: str) -> str:
    return s.strip(JS_SPACE)


def units(s: str) -> int:
    """JavaScript's ``length``: UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def lines_of(text: str) -> list[str]:
    """``text.match(/.*(?:\\n|$)/g).slice(0, -1)``: lines with their LF; text after a
    lone CR, LS or PS up to the next LF is a line, what precedes it is dropped."""
    return _LINES.findall(text)[:-1]


def restore_trailing_newline(original: str, modified: str) -> str:
    if original.endswith("\n") and not modified.endswith("\n"):
        return modified + "\n"
    if not original.endswith("\n") and modified.endswith("\n"):
        return modified[:-1]
    return modified


def indent(lines: list[str], target: str) -> list[str]:
    """Gemini's applyIndentation: re-base ``lines`` from the first line's indentation."""
    if not lines:
        return []
    ref = _INDENT.match(lines[0])
    base = ref.group(0) if ref else ""
    out = []
    for line in lines:
        if trim(line) == "":
            out.append("")
        elif line.startswith(base):
            out.append(target + line[len(base):])
        else:
            out.append(target + line.lstrip(JS_SPACE))
    return out


def exact(text: str, old: str, new: str, multiple: bool) -> tuple[str, int] | None:
    count = text.count(old)
    if count > 1 and not multiple:
        return text, count
    if count == 0:
        return None
    return restore_trailing_newline(text, text.replace(old, new)), count


def flexible(text: str, old: str, new: str, raw_new: str) -> tuple[str, int] | None:
    source = lines_of(text)
    search = [trim(x) for x in old.split("\n")]
    replacement = new.split("\n")
    n, count, i = len(search), 0, 0
    while i <= len(source) - n:
        window = source[i:i + n]
        if [trim(x) for x in window] == search:
            count += 1
            lead = _INDENT.match(window[0])
            block = "\n".join(indent(replacement, lead.group(0) if lead else ""))
            if raw_new != "" and window[-1].endswith("\n") and not block.endswith("\n"):
                block += "\n"
            source[i:i + n] = [block]
        i += 1
    if count == 0:
        return None
    return restore_trailing_newline(text, "".join(source)), count


def regex(text: str, old: str, new: str, multiple: bool) -> tuple[str, int] | None:
    spaced = old
    for d in _DELIMITERS:
        spaced = spaced.replace(d, f" {d} ")
    tokens = [t for t in re.split(_WS + "+", spaced) if t]
    if not tokens:
        return None
    pattern = re.compile(_LINE_START + "([ \t]*)" + (_WS + "*").join(map(re.escape, tokens)))
    count = sum(1 for _ in pattern.finditer(text))
    if count == 0:
        return None
    lines = new.split("\n")
    out = pattern.sub(lambda m: "\n".join(indent(lines, m.group(1) or "")), text,
                      count=0 if multiple else 1)
    return restore_trailing_newline(text, out), count


def _code_units(s: str) -> list[int]:
    b = s.encode("utf-16-le", "surrogatepass")
    return [b[i] | (b[i + 1] << 8) for i in range(0, len(b), 2)]


def levenshtein(a: str, b: str, budget: list[int]) -> int:
    """Edit distance over UTF-16 code units, by the bit-parallel method (Myers,
    Hyyrö): one column of the distance table is a pair of bit vectors (+1, -1
    steps down it), advanced a character of ``b`` at a time with a few integer
    operations. ``budget[0]`` counts those columns down."""
    x, y = _code_units(a), _code_units(b)
    if not x or not y:
        return len(x) or len(y)
    budget[0] -= len(y) * (1 + len(x) // 64)
    if budget[0] < 0:
        raise ToolRefused("replace: the fuzzy match is too large to reproduce here")
    full = (1 << len(x)) - 1
    top = 1 << (len(x) - 1)
    peq: dict[int, int] = {}
    for i, c in enumerate(x):
        peq[c] = peq.get(c, 0) | (1 << i)
    pv, mv, score = full, 0, len(x)
    for c in y:
        eq = peq.get(c, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & full  # the table's first row grows by one per column
        mh = (mh << 1) & full
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def fuzzy(text: str, raw_old: str, old: str, new: str,
          work: int = FUZZY_BUDGET) -> tuple[str, int] | None:
    """``work``: how much gitwal computes (windows, distance columns) before it gives
    up with ToolRefused, so that a hook stays quick where Gemini would search long."""
    if units(raw_old) < 10:
        return None
    source = lines_of(text)
    search = [x.rstrip(JS_SPACE) for x in lines_of(old)]
    if len(source) * units(raw_old) ** 2 > FUZZY_LIMIT or not search:
        return None
    n = len(search)
    block = "\n".join(search)
    size = units(block)
    if size == 0:  # every score is NaN or Infinity in JavaScript: no candidate
        return None
    squeezed = re.sub(_WS, "", block)
    budget = [work]
    found: list[tuple[float, int]] = []
    for i in range(len(source) - n + 1):
        budget[0] -= WINDOW_COST
        if budget[0] < 0:
            raise ToolRefused("replace: the fuzzy match is too large to reproduce here")
        window = "\n".join(x.rstrip(JS_SPACE) for x in source[i:i + n])
        if abs(units(window) - size) / size > FUZZY_THRESHOLD / WHITESPACE_PENALTY:
            continue
        # Dropping whitespace never lengthens an edit script, so the weighted distance
        # is at least the whitespace-free one, which is at least the length gap: a
        # window beyond 10 % on either could never score, and is skipped early.
        bare = re.sub(_WS, "", window)
        if 10 * abs(units(bare) - units(squeezed)) > size:
            continue
        norm = levenshtein(bare, squeezed, budget)
        if 10 * norm > size:
            continue
        raw = levenshtein(window, block, budget)
        score = (norm + (raw - norm) * WHITESPACE_PENALTY) / size
        if score <= FUZZY_THRESHOLD:
            found.append((score, i))
    if not found:
        return None
    chosen: list[int] = []
    for _, i in sorted(found):
        if all(abs(c - i) >= n for c in chosen):
            chosen.append(i)
    replacement = new.split("\n")
    for i in sorted(chosen, reverse=True):
        lead = _INDENT.match(source[i])
        piece = "\n".join(indent(replacement, lead.group(0) if lead else ""))
        if source[i + n - 1].endswith("\n"):
            piece += "\n"
        source[i:i + n] = [piece]
    return restore_trailing_newline(text, "".join(source)), len(chosen)


def replace_text(text: str, raw_old: str, raw_new: str, multiple: bool) -> tuple[str, str]:
    """``text`` (LF) after the replace, and the way that matched; ToolRefused when
    Gemini would refuse it or hand it to self-correction."""
    old, new = raw_old.replace("\r\n", "\n"), raw_new.replace("\r\n", "\n")
    if old == "":
        raise ToolRefused("replace: old_string is empty on an existing file")
    result, mode = exact(text, old, new, multiple), "exact"
    if result is None:
        result, mode = flexible(text, old, new, raw_new), "flexible"
    if result is None:
        result, mode = regex(text, old, new, multiple), "regex"
    if result is None:
        result, mode = fuzzy(text, raw_old, old, new), "fuzzy"
    if result is None:
        raise ToolRefused("replace: old_string not found (Gemini may correct it by itself)")
    out, count = result
    if count != 1 and not multiple:
        raise ToolRefused(f"replace: {count} matches of old_string and no allow_multiple")
    if old == new:
        raise ToolRefused("replace: old_string and new_string are identical")
    return out, mode


def _crlf(text: str) -> str:
    return re.sub(r"\r?\n", "\r\n", text)


def replace_post(pre: bytes | None, old: str, new: str, multiple: bool) -> bytes:
    """The bytes ``replace`` leaves: an empty ``old_string`` creates an absent file."""
    if pre is None:
        if old == "":
            return (_crlf(new) if os.linesep == "\r\n" else new).encode("utf-8")
        raise ToolRefused("replace: the file does not exist")
    original = pre.decode("utf-8", "strict")
    out, _ = replace_text(original.replace("\r\n", "\n"), old, new, multiple)
    return (_crlf(out) if "\r\n" in original else out).encode("utf-8")


_ESCAPES = re.compile(r"\\[nrt'\"`\\\n]")  # what Gemini's unescaping would change


def has_escapes(content: str, path: str) -> bool:
    """Whether Gemini may rewrite ``content`` before writing it: it unescapes
    backslash sequences (outside JSON files) for some models."""
    return os.path.splitext(path)[1].lower() not in JSON_LIKE and bool(_ESCAPES.search(content))


def keeps_escapes(model: str | None, llm_correction: bool) -> bool:
    """Whether Gemini writes content with escapes as given: it unescapes it only for
    a ``gemini-*`` model that is neither Gemini 2 nor 3 (older ones), and with
    ``tools.disableLLMCorrection: false`` asks a model to correct it instead."""
    if llm_correction or not model:
        return False
    return (re.match(r"gemini-2(\.|$)", model) is not None
            or re.match(r"gemini-3(\.|-|$)", model) is not None
            or not model.startswith("gemini-"))


def write_post(pre: bytes | None, content: str, path: str, keeps: bool = False) -> bytes:
    """The bytes ``write_file`` leaves; ``keeps``: content with escapes is written as
    given (keeps_escapes), else such content is not predictable here."""
    if not keeps and has_escapes(content, path):
        raise ToolRefused("write_file: content with backslash escapes may be rewritten "
                          "by Gemini CLI, depending on the model")
    original = pre.decode("utf-8", "replace") if pre is not None else ""  # as Node reads it
    crlf = "\r\n" in original if pre is not None and original else os.linesep == "\r\n"
    return (_crlf(content) if crlf else content).encode("utf-8")
