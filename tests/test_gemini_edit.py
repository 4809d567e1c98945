"""Gemini CLI's replace and write_file, as gitwal predicts them (gemini_edit).

Every expected text here is what Gemini CLI 0.61.0's own edit code returns for
the same input (checked against its bundle with node).
"""

from __future__ import annotations

import random

import pytest

from gitwal.agents import gemini_edit as ge
from gitwal.base.errors import ToolRefused


def test_exact_replaces_one_occurrence() -> None:
    assert ge.replace_text("a = 1\nb = 1\n", "a = 1", "a = 2", False) == ("a = 2\nb = 1\n", "exact")


def test_exact_without_allow_multiple_refuses_several_and_tries_nothing_else() -> None:
    with pytest.raises(ToolRefused, match="2 matches"):
        ge.replace_text("x\nx\n", "x", "y", False)


def test_exact_with_allow_multiple_replaces_all_literally() -> None:
    # "$&" means the match to JavaScript's replace: Gemini escapes it, so do we (literal).
    assert ge.replace_text("x x x\n", "x", "$&y", True) == ("$&y $&y $&y\n", "exact")


def test_trailing_newline_follows_the_original() -> None:
    assert ge.replace_text("a\nb", "b", "c\n", False)[0] == "a\nc"
    assert ge.replace_text("a\nb\n", "b\n", "c", False)[0] == "a\nc\n"


def test_flexible_matches_lines_whatever_their_indentation() -> None:
    text = "def f():\n    if x:\n        return 1\n"
    old = "if x:\n    return 1"  # indented differently from the file
    new = "if y:\n    return 2"
    assert ge.replace_text(text, old, new, False) == (
        "def f():\n    if y:\n        return 2\n", "flexible")


def test_flexible_replaces_every_window_and_counts_them() -> None:
    text = "  a\n  b\n\ta\n\tb\n"
    assert ge.replace_text(text, "a\nb", "c", True) == ("  c\n\tc\n", "flexible")
    with pytest.raises(ToolRefused, match="2 matches"):
        ge.replace_text(text, "a\nb", "c", False)


def test_flexible_trims_javascript_whitespace() -> None:
    # U+FEFF is whitespace to JavaScript's trim, not to Python's strip.
    text = "\ufeffa\nb\n"
    assert ge.replace_text(text, "a\n b", "c", False) == ("c\n", "flexible")


def test_regex_matches_tokens_with_any_spacing() -> None:
    # The match must start a line (after its indentation), tokens may be spaced apart.
    text = "  call(a,b)\nkeep\n"
    assert ge.replace_text(text, "call( a , b )", "done()", False) == ("  done()\nkeep\n", "regex")


def test_regex_replaces_the_first_match_only_without_allow_multiple() -> None:
    text = "f(a)\nf(a )\n"
    assert ge.replace_text(text, "f( a)", "g", True) == ("g\ng\n", "regex")
    with pytest.raises(ToolRefused, match="2 matches"):
        ge.replace_text(text, "f( a)", "g", False)


def test_fuzzy_matches_a_near_miss_of_at_least_ten_characters() -> None:
    text = "first line here\n    return compute_the_total(value)\nlast\n"
    old = "return compute_the_total(valeu)"  # a typo: no exact, flexible or regex match
    assert ge.replace_text(text, old, "return 0", False) == (
        "first line here\n    return 0\nlast\n", "fuzzy")


def test_fuzzy_needs_ten_characters_and_close_enough() -> None:
    with pytest.raises(ToolRefused, match="not found"):
        ge.replace_text("abcdefgh\n", "abcdefgx", "z", False)  # 8 characters
    with pytest.raises(ToolRefused, match="not found"):
        ge.replace_text("completely different\n", "nothing alike at all", "z", False)


def test_fuzzy_counts_utf16_code_units() -> None:
    # An emoji is two code units in JavaScript: distances and lengths count them so.
    text = "say 😀😀 to everyone\n"
    assert ge.replace_text(text, "say 😀😀 to everyon3", "hi", False) == ("hi\n", "fuzzy")


def test_lone_cr_lines_are_dropped_as_gemini_drops_them() -> None:
    # JavaScript's "." stops at a lone CR: the text before it is not a line there.
    assert ge.replace_text("junk\rkeep\n  a \n", " a  ", "b", False) == ("keep\n  b\n", "flexible")


def test_identical_strings_and_empty_old_are_refused() -> None:
    with pytest.raises(ToolRefused, match="identical"):
        ge.replace_text("a\n", "a", "a", False)
    with pytest.raises(ToolRefused, match="empty"):
        ge.replace_text("a\n", "", "b", False)


def test_replace_post_keeps_crlf_and_creates_absent_files() -> None:
    assert ge.replace_post(b"a\r\nb\r\n", "a\nb", "c\nd", False) == b"c\r\nd\r\n"
    assert ge.replace_post(None, "", "new\n", False) == b"new\n"
    with pytest.raises(ToolRefused, match="does not exist"):
        ge.replace_post(None, "x", "y", False)
    with pytest.raises(ToolRefused, match="existing"):
        ge.replace_post(b"x\n", "", "y", False)


def test_write_post() -> None:
    assert ge.write_post(None, "a\nb\n", "n.txt") == b"a\nb\n"
    assert ge.write_post(b"old\r\n", "a\nb\n", "n.txt") == b"a\r\nb\r\n"
    assert ge.write_post(b"", "a\n", "n.txt") == b"a\n"
    # Escapes may be undone depending on the model: not predictable, except in JSON.
    with pytest.raises(ToolRefused, match="escapes"):
        ge.write_post(None, 'print("a\\n")\n', "p.py")
    assert ge.write_post(None, '{"a": "b\\n"}\n', "c.json") == b'{"a": "b\\n"}\n'


def test_the_fuzzy_work_is_bounded() -> None:
    text = "abcdefghij\n" * 2000  # Gemini would search it: 2000 lines x 10**2 <= 4e8
    assert ge.fuzzy(text, "abcdefghiX", "abcdefghiX", "z") is not None
    with pytest.raises(ToolRefused, match="too large"):
        ge.fuzzy(text, "abcdefghiX", "abcdefghiX", "z", work=50_000)


def test_the_bit_parallel_distance_is_the_textbook_one() -> None:
    def table(a: list[bytes], b: list[bytes]) -> int:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]

    def code_units(s: str) -> list[bytes]:
        raw = s.encode("utf-16-le", "surrogatepass")
        return [raw[i:i + 2] for i in range(0, len(raw), 2)]

    rnd = random.Random(7)
    for n in range(2000):
        size = 150 if n % 10 == 0 else 12  # past one 64-bit word now and then
        a, b = ("".join(rnd.choice("ab c\n\U0001f600") for _ in range(rnd.randint(0, size)))
                for _ in range(2))
        assert ge.levenshtein(a, b, [10**9]) == table(code_units(a), code_units(b)), (a, b)
