"""Unit tests of the pure end-state tools (gitwal/changes/tools.py): bytes in, bytes out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gitwal.base.errors import ToolRefused
from gitwal.changes import tools
from gitwal.changes.tools import MODE_FILE, Content

MODE_EXEC = 0o100755
# The `hermetic` autouse fixture only sets environment variables: sharing it
# between hypothesis examples is harmless.
PROPERTY = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def run(tool: str, pre: tuple[Content, ...], **args: Any) -> tuple[Content, ...]:
    return tools.get(tool).apply(pre, args)


def one(tool: str, pre: Content, **args: Any) -> Content:
    (post,) = run(tool, (pre,), path="f.txt", **args)
    return post


def sym(data: bytes, old: str, new: str) -> bytes:
    post = one("replace_symbol", data, old=old, new=new)
    assert post is not None
    return post


def ensure(data: Content, line: str) -> bytes:
    post = one("ensure_line", data, line=line)
    assert post is not None
    return post


# -- replace_symbol ------------------------------------------------------------


def test_replace_symbol_renames_whole_identifiers_only() -> None:
    src = (
        b"const getUserById = () => 1;\n"
        b"getUserById(1); obj.getUserById(2); [getUserById]\n"
        b"getUserByIdCache(3); mygetUserById(4); getUserById2(5);\n"
    )
    assert sym(src, "getUserById", "fetchUser") == (
        b"const fetchUser = () => 1;\n"
        b"fetchUser(1); obj.fetchUser(2); [fetchUser]\n"
        b"getUserByIdCache(3); mygetUserById(4); getUserById2(5);\n"
    )


@pytest.mark.parametrize(
    "text",
    ["$foo", "foo$", "_foo", "foo_", "foo9", "a$foo", "__foo__", "$$foo$$"],
)
def test_replace_symbol_dollar_and_underscore_are_identifier_chars(text: str) -> None:
    data = f"{text} = 1;\n".encode()
    assert sym(data, "foo", "bar") == data


def test_replace_symbol_identifiers_with_dollar_and_underscore() -> None:
    data = b"$el.on(); $el$x; _private(); __private(); x$el;\n"
    assert sym(data, "$el", "$node") == b"$node.on(); $el$x; _private(); __private(); x$el;\n"
    assert sym(data, "_private", "_hidden") == (
        b"$el.on(); $el$x; _hidden(); __private(); x$el;\n"
    )


def test_replace_symbol_new_name_is_literal_not_a_regex_template() -> None:
    # `$1` / `$$` are identifiers; they must land verbatim, never as back-references.
    assert sym(b"a foo b\n", "foo", "$1") == b"a $1 b\n"
    assert sym(b"a foo b\n", "foo", "$$") == b"a $$ b\n"


def test_replace_symbol_keeps_line_endings_and_non_ascii() -> None:
    data = "// héllo ✓\r\nfoo(é)\r\n".encode()
    assert sym(data, "foo", "bar") == "// héllo ✓\r\nbar(é)\r\n".encode()


def test_replace_symbol_twice_is_a_no_op() -> None:
    data = b"foo(); foo.bar; foofoo; foo\n"
    once = sym(data, "foo", "baz")
    assert once == b"baz(); baz.bar; foofoo; baz\n"
    assert sym(once, "foo", "baz") == once


def test_replace_symbol_without_occurrence_returns_same_bytes() -> None:
    data = b"nothing here\n"
    assert sym(data, "foo", "bar") == data


@pytest.mark.parametrize("data", [b"foo\0bar", b"\0", b"foo = 1;\n\0\0\0"])
def test_replace_symbol_refuses_binary(data: bytes) -> None:
    with pytest.raises(ToolRefused, match="binary"):
        sym(data, "foo", "bar")


@pytest.mark.parametrize("data", [b"foo \xff\xfe", b"caf\xe9 foo\n", b"\xc3("])
def test_replace_symbol_refuses_non_utf8(data: bytes) -> None:
    with pytest.raises(ToolRefused, match="not UTF-8"):
        sym(data, "foo", "bar")


def test_replace_symbol_refuses_absent_file() -> None:
    with pytest.raises(ToolRefused, match="does not exist"):
        one("replace_symbol", None, old="foo", new="bar")


@pytest.mark.parametrize(
    "bad", ["", "foo-bar", "1abc", "foo bar", "foo.bar", "foo()", "é", "foo\n", "a+b", "\\1"]
)
@pytest.mark.parametrize("which", ["old", "new"])
def test_replace_symbol_refuses_non_identifiers(bad: str, which: str) -> None:
    args = {"old": "foo", "new": "bar", which: bad}
    with pytest.raises(ToolRefused, match="not an identifier") as exc:
        one("replace_symbol", b"foo\n", **args)
    assert exc.value.hint  # points at replace-text


def test_replace_symbol_refuses_non_string_args() -> None:
    with pytest.raises(ToolRefused, match="must be a string"):
        one("replace_symbol", b"foo\n", old=b"foo", new="bar")


IDENT_RUN = re.compile(r"[A-Za-z0-9_$]+|[^A-Za-z0-9_$]+")
NAMES = ["foo", "fooBar", "bar", "$x", "_y", "x1", "a$b"]
# Text made of the candidate names glued by characters that are and are not
# identifier characters, so boundaries get exercised.
TEXTS = st.lists(
    st.one_of(st.sampled_from(NAMES), st.sampled_from(list(" .(\n\r\t$_9é✓-x"))), max_size=30
).map("".join)


@PROPERTY
@given(text=TEXTS, old=st.sampled_from(NAMES), new=st.sampled_from(NAMES))
def test_property_replace_symbol_matches_token_model(text: str, old: str, new: str) -> None:
    """The rename equals: split into maximal runs of identifier characters,
    replace the runs equal to ``old``, leave everything else alone."""
    expected = "".join(new if tok == old else tok for tok in IDENT_RUN.findall(text))
    assert sym(text.encode(), old, new) == expected.encode()


@PROPERTY
@given(text=TEXTS, old=st.sampled_from(NAMES), new=st.sampled_from(NAMES))
def test_property_replace_symbol_is_idempotent(text: str, old: str, new: str) -> None:
    once = sym(text.encode(), old, new)
    assert sym(once, old, new) == once


# -- replace_text --------------------------------------------------------------


def test_replace_text_replaces_the_single_occurrence() -> None:
    data = "alpha\nbeta gamma\nδelta\n".encode()
    post = one("replace_text", data, old="beta gamma", new="BETA")
    assert post == "alpha\nBETA\nδelta\n".encode()


def test_replace_text_new_may_be_empty_and_is_literal() -> None:
    assert one("replace_text", b"a-b-c", old="-b", new="") == b"a-c"
    assert one("replace_text", b"a.b", old=".", new=r"\1$0") == b"a\\1$0b"


@pytest.mark.parametrize(("data", "old", "count"), [
    (b"hello world\n", "absent", 0),
    (b"foo bar foo\n", "foo", 2),
    (b"x\nx\nx\n", "x\n", 3),
])
def test_replace_text_refuses_unless_exactly_once(data: bytes, old: str, count: int) -> None:
    with pytest.raises(ToolRefused, match=f"occurs {count} times") as exc:
        one("replace_text", data, old=old, new="Z")
    assert ("unique" if count else "copy the text exactly") in exc.value.hint


def test_replace_text_overlapping_occurrences_are_not_unique() -> None:
    # "aa" occurs at offsets 0 and 1 of "aaa": the match is ambiguous.
    with pytest.raises(ToolRefused, match="exactly once"):
        one("replace_text", b"aaa", old="aa", new="X")


def test_replace_text_refuses_empty_old() -> None:
    with pytest.raises(ToolRefused, match="empty"):
        one("replace_text", b"abc", old="", new="x")


def test_replace_text_refuses_binary_non_utf8_and_absent() -> None:
    with pytest.raises(ToolRefused, match="binary"):
        one("replace_text", b"ab\0cd", old="ab", new="x")
    with pytest.raises(ToolRefused, match="not UTF-8"):
        one("replace_text", b"ab\xffcd", old="ab", new="x")
    with pytest.raises(ToolRefused, match="does not exist"):
        one("replace_text", None, old="ab", new="x")


# -- ensure_line ---------------------------------------------------------------


@pytest.mark.parametrize("data", [
    b"a\nneedle\nb\n",
    b"needle\n",
    b"a\nneedle",  # present as the last line, no trailing newline
    b"a\r\nneedle\r\nb\r\n",  # present in a CRLF file
])
def test_ensure_line_present_is_unchanged(data: bytes) -> None:
    assert ensure(data, "needle") == data


def test_ensure_line_does_not_match_substrings() -> None:
    assert ensure(b"needles\n  needle\n", "needle") == b"needles\n  needle\nneedle\n"


@pytest.mark.parametrize(("data", "expected"), [
    (b"a\nb\n", b"a\nb\nneedle\n"),
    (b"a\nb", b"a\nb\nneedle\n"),  # no trailing newline: one is added first
    (b"a\r\nb\r\n", b"a\r\nb\r\nneedle\r\n"),  # CRLF file keeps CRLF
    (b"a\r\nb", b"a\r\nb\r\nneedle\r\n"),
    (b"", b"needle\n"),
])
def test_ensure_line_appends_missing_line(data: bytes, expected: bytes) -> None:
    assert ensure(data, "needle") == expected


def test_ensure_line_creates_absent_file() -> None:
    assert ensure(None, "export PATH=$HOME/bin:$PATH") == b"export PATH=$HOME/bin:$PATH\n"


def test_ensure_line_keeps_non_ascii() -> None:
    assert ensure("é\n".encode(), "ü ✓") == "é\nü ✓\n".encode()


@pytest.mark.parametrize("line", ["a\nb", "a\rb", "a\r\n", "\n"])
def test_ensure_line_refuses_line_breaks(line: str) -> None:
    with pytest.raises(ToolRefused, match="line break"):
        ensure(b"x\n", line)


def test_ensure_line_refuses_binary_and_non_utf8() -> None:
    with pytest.raises(ToolRefused, match="binary"):
        ensure(b"x\0y\n", "z")
    with pytest.raises(ToolRefused, match="not UTF-8"):
        ensure(b"x\xffy\n", "z")


LINE_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n\r"),
    max_size=8,
)
FILE_BYTES = st.lists(
    st.one_of(st.sampled_from(["a", "b", "needle", "", " ", "é"]), LINE_TEXT), max_size=6
).flatmap(
    lambda lines: st.sampled_from(["\n", "\r\n"]).flatmap(
        lambda eol: st.booleans().map(
            lambda trailing: (eol.join(lines) + (eol if trailing and lines else "")).encode()
        )
    )
)


@PROPERTY
@given(data=st.one_of(st.none(), FILE_BYTES), line=st.one_of(st.just("needle"), LINE_TEXT))
@example(data=b"a\n", line="b\0c")  # a NUL in the line must not make the next run refuse
def test_property_ensure_line_is_idempotent(data: bytes | None, line: str) -> None:
    """Either the tool refuses, or applying it to its own output changes nothing."""
    try:
        once = ensure(data, line)
    except ToolRefused:
        return
    assert ensure(once, line) == once


@PROPERTY
@given(data=FILE_BYTES, line=LINE_TEXT)
def test_property_ensure_line_only_appends(data: bytes, line: str) -> None:
    try:
        once = ensure(data, line)
    except ToolRefused:
        return
    assert once.startswith(data)
    lines = once.split(b"\n")
    assert any(existing.rstrip(b"\r") == line.encode() for existing in lines)


# -- write_file, delete_file, move_file ---------------------------------------


@pytest.mark.parametrize("pre", [None, b"old", b"\0\xff binary"])
@pytest.mark.parametrize("content", [b"", b"new\n", b"\0\xff\xfe"])
def test_write_file_returns_exact_content(pre: Content, content: bytes) -> None:
    assert one("write_file", pre, content=content) == content


@pytest.mark.parametrize("content", [None, 3, ["text"], bytearray(b"x")])
def test_write_file_refuses_content_that_is_neither_bytes_nor_str(content: object) -> None:
    with pytest.raises(ToolRefused, match="content"):
        one("write_file", None, content=content)


def test_write_file_writes_str_content_as_utf8() -> None:
    assert one("write_file", b"old", content="caf\u00e9\n") == b"caf\xc3\xa9\n"


def test_delete_file() -> None:
    assert one("delete_file", b"x") is None
    assert one("delete_file", b"") is None
    with pytest.raises(ToolRefused, match="does not exist"):
        one("delete_file", None)


def move(pre: tuple[Content, Content], **args: Any) -> tuple[Content, ...]:
    merged: Mapping[str, Any] = {"src": "a.txt", "dst": "b.txt", **args}
    return tools.get("move_file").apply(pre, merged)


def test_move_file() -> None:
    assert move((b"data\0", None)) == (None, b"data\0")


def test_move_file_refuses_existing_destination() -> None:
    with pytest.raises(ToolRefused, match="already exists"):
        move((b"data", b"other"))
    with pytest.raises(ToolRefused, match="already exists"):
        move((b"data", b""))


def test_move_file_refuses_missing_source() -> None:
    with pytest.raises(ToolRefused, match="does not exist"):
        move((None, None))


def test_move_file_refuses_same_path() -> None:
    with pytest.raises(ToolRefused, match="same path"):
        move((b"data", b"data"), dst="a.txt")


def test_get_unknown_tool_lists_the_tools() -> None:
    with pytest.raises(ToolRefused, match="unknown tool") as exc:
        tools.get("rm_rf")
    for name in tools.TOOLS:
        assert name in exc.value.hint


def test_tools_are_registered_with_their_path_args() -> None:
    assert set(tools.TOOLS) == {
        "write_file", "replace_symbol", "replace_text", "ensure_line", "delete_file", "move_file"
    }
    assert tools.get("move_file").path_args == ("src", "dst")
    assert all(tools.get(n).path_args == ("path",) for n in tools.TOOLS if n != "move_file")


# -- post_modes ---------------------------------------------------------------


@pytest.mark.parametrize(("tool", "pre", "post"), [
    ("write_file", (0,), (MODE_FILE,)),  # created: a plain file
    ("write_file", (MODE_EXEC,), (MODE_EXEC,)),  # edits keep the mode
    ("replace_symbol", (MODE_FILE,), (MODE_FILE,)),
    ("ensure_line", (MODE_EXEC,), (MODE_EXEC,)),
    ("replace_text", (MODE_EXEC,), (MODE_EXEC,)),
    ("delete_file", (MODE_EXEC,), (MODE_EXEC,)),
    ("move_file", (MODE_EXEC, 0), (0, MODE_EXEC)),  # the move carries the mode
    ("move_file", (MODE_FILE, 0), (0, MODE_FILE)),
    ("move_file", (0, 0), (0, MODE_FILE)),
])
def test_post_modes(tool: str, pre: tuple[int, ...], post: tuple[int, ...]) -> None:
    assert tools.post_modes(tool, pre) == post
