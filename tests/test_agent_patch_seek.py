"""Locating apply_patch hunks as Codex does (gitwal/agents/patch_seek.py), so a
patch Codex applies leniently still gets its exact post-image. The real
binary applies the same cases in tests/e2e/test_codex.py."""

from __future__ import annotations

import pytest

from gitwal.agents import apply_patch
from gitwal.agents.patch_seek import seek
from gitwal.base.errors import ToolRefused


def patched(text: str, body: str) -> str:
    [op] = apply_patch.parse(f"*** Begin Patch\n*** Update File: f\n{body}*** End Patch")
    return apply_patch.apply_update(text, op.chunks, "f")


def test_the_passes_go_from_strict_to_lenient_and_the_first_match_wins() -> None:
    lines = ["x = 1  ", "  y = 2", "x = 1"]
    assert seek(lines, ["x = 1"], 0, False) == 2  # exact beats the earlier loose match
    assert seek(lines, ["x = 1"], 0, False) != seek(lines[:2], ["x = 1"], 0, False)
    assert seek(lines[:2], ["x = 1"], 0, False) == 0  # trailing white space
    assert seek(lines, ["y = 2"], 0, False) == 1  # surrounding white space
    assert seek(lines, ["x = 1"], 3, False) is None  # only at or after start
    assert seek(lines, [], 2, False) == 2
    assert seek(["a"], ["a", "b"], 0, False) is None


@pytest.mark.parametrize(("file_line", "patch_line"), [
    ("say(\u201chello\u201d)", 'say("hello")'),
    ("it\u2019s", "it's"),
    ("a \u2014 b", "a - b"),
    ("x\u00a0=\u00a01", "x = 1"),
    ("n \u2212 1", "n - 1"),
])
def test_typographic_punctuation_matches_its_ascii_spelling(file_line: str,
                                                            patch_line: str) -> None:
    assert seek(["first", file_line], [patch_line], 0, False) == 1
    # The matched line is replaced by the patch's own text, ASCII and all.
    assert patched(f"first\n{file_line}\n", f"@@\n-{patch_line}\n+done\n") == "first\ndone\n"


def test_end_of_file_anchors_the_hunk_to_the_last_lines() -> None:
    text = "end\nmiddle\nend\n"
    assert patched(text, "@@\n-end\n+END\n*** End of File\n") == "end\nmiddle\nEND\n"
    assert patched(text, "@@\n-end\n+END\n") == "END\nmiddle\nend\n"
    with pytest.raises(ToolRefused):  # not at the end: Codex does not look elsewhere
        patched(text, "@@\n-middle\n+M\n*** End of File\n")


def test_hunks_are_found_in_the_original_in_order_after_their_header() -> None:
    text = "def a():\n    pass\ndef b():\n    pass\n"
    assert patched(text, "@@ def b():\n-    pass\n+    return 2\n") == (
        "def a():\n    pass\ndef b():\n    return 2\n")
    two = "@@\n-def a():\n+def A():\n@@\n-def b():\n+def B():\n"
    assert patched(text, two) == "def A():\n    pass\ndef B():\n    pass\n"
    with pytest.raises(ToolRefused):  # the second hunk's lines come before the first's
        patched(text, "@@\n-def b():\n+x\n@@\n-def a():\n+y\n")


def test_a_trailing_empty_old_line_stands_for_the_final_newline() -> None:
    assert patched("a\nb\n", "@@\n a\n-b\n-\n+c\n+\n") == "a\nc\n"


def test_a_hunk_without_old_lines_is_appended_at_the_end() -> None:
    assert patched("a\nb\n", "@@\n+c\n") == "a\nb\nc\n"
    assert patched("a\nb", "@@\n+c\n") == "a\nb\nc\n"  # and the file ends with a newline


# What Codex 0.169.0 wrote for each file and hunk (observed with the pinned
# binary): an untouched line keeps its ending, a new line gets the file's first
# one, and the file ends with a line ending.
OBSERVED = [
    ("a\r\nb\nc\r\n", "@@\n-b\n+B\n", "a\r\nB\r\nc\r\n"),
    ("a\nb\r\nc\n", "@@\n-b\n+B\n", "a\nB\nc\n"),
    ("a\r\nb", "@@\n-b\n+B\n", "a\r\nB\r\n"),
    ("a\r\nb\r\n", "@@\n+c\n", "a\r\nb\r\nc\r\n"),
    ("a\r\nb\r\nc\r\n", "@@\n-b\n+b1\n+b2\n", "a\r\nb1\r\nb2\r\nc\r\n"),
    ("a\nb", "@@\n-a\n+A\n", "A\nb\n"),
    ("x\r\ny\r\n", "@@\n-y\n+Y\n*** End of File\n", "x\r\nY\r\n"),
    ("a\r\nb\nc\r\nd\r\n", "@@\n-d\n+D\n", "a\r\nb\nc\r\nD\r\n"),
    ("a\r\nb\n", "@@\n-a\n+A\n", "A\r\nb\n"),
    ("a\nb\r\nc\nd\n", "@@\n-a\n+A\n", "A\nb\r\nc\nd\n"),
    ("a\rb\rc\n", "@@\n-c\n+C\n", "a\rb\rC\r"),
    ("a\r\n\r\nb\r\n", "@@\n a\n-\n+x\n", "a\r\nx\r\nb\r\n"),
    ("a\nb\r\nc\r\nd\r\n", "@@\n-d\n+D\n", "a\nb\r\nc\r\nD\n"),
    ("abc", "@@\n-abc\n+ABC\n", "ABC\n"),
    ("a\rb\nc\n", "@@\n-c\n+C\n", "a\rb\nC\r"),
    ("a\r\nb\rc\r", "@@\n-c\n+C\n", "a\r\nb\rC\r\n"),
]


@pytest.mark.parametrize(("text", "body", "written"), OBSERVED)
def test_line_endings_are_kept_as_codex_keeps_them(text: str, body: str, written: str) -> None:
    assert patched(text, body) == written


def test_a_patch_line_breaks_at_newlines_only() -> None:
    # A form feed is text inside a line, as in the file; a CRLF patch reads as LF.
    assert patched("a\x0cb\n", "@@\n-a\x0cb\n+c\n") == "c\n"
    assert patched("a\nb\n", "@@\r\n-a\r\n+A\r\n") == "A\nb\n"


@pytest.mark.parametrize(("text", "body", "written"), [
    # Codex 0.169.0: a context line matched without its trailing blanks keeps them.
    ("alpha  \nbeta\n", "@@\n alpha\n-beta\n+BETA\n", "alpha  \nBETA\n"),
    # ...and its indentation and typographic punctuation, matched loosely too.
    ("    x = \u201cq\u201d\nold\ntail\n", "@@\n x = \"q\"\n-old\n+new\n tail\n",
     "    x = \u201cq\u201d\nnew\ntail\n"),
    # An exact match, and an added line that only looks like context, as before.
    ("a\nb\nc\n", "@@\n a\n-b\n+b2\n+ a\n c\n", "a\nb2\n a\nc\n"),
])
def test_a_context_line_is_written_as_the_file_has_it(text: str, body: str,
                                                       written: str) -> None:
    assert patched(text, body) == written
