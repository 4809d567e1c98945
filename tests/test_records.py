"""Records: canonical encoding, exact round trips, and a decoder that refuses
anything it does not fully understand (always with CorruptLog)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gitwal.base.errors import CorruptLog, WalError
from gitwal.base.ids import ABSENT, Lsn, RunId
from gitwal.records.codec import OPTIONAL_FIELDS, decode, encode, to_dict
from gitwal.records.model import (
    FORMAT_VERSION,
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Abort,
    Commit,
    Intent,
    Plan,
    Record,
    Seal,
    Takeover,
    Unlogged,
    summary,
    type_name,
)

RUN = RunId("20240101T000000Z-abcd")
A = "a" * 40
B = "0123456789abcdef0123456789abcdef01234567"
C = "c" * 64  # a SHA-256 object id
WHERE = "refs/wal/test LSN 7"

PLAN = Plan(RUN, Lsn(1), "rename getUserById → fetchUser, ünïcödé", A, "main",
            ("step one", "étape deux"))
PLAN_DETACHED = Plan(RUN, Lsn(1), "", B, None)
INTENT = Intent(
    run=RUN, lsn=Lsn(2), tool="replace_symbol",
    args={"path": "src/ä.ts", "old": "getUserById", "new": "fetchUser"},
    target=("src/ä.ts",), pre=(A,), post=(B,), mode=(0o100644,), replay=REPLAY_SAFE,
    key=f"{RUN}:2", check="npm test -- --grep 'ü'",
)
INTENT_MOVE = Intent(
    run=RUN, lsn=Lsn(4), tool="move_file", args={"src": "a", "dst": "b"},
    target=("a", "b"), pre=(A, ABSENT), post=(ABSENT, A), mode=(0o100755, 0),
    replay=REPLAY_SAFE, key=f"{RUN}:4",
)
INTENT_EXEC = Intent(
    run=RUN, lsn=Lsn(6), tool="exec", args={"argv": ["sh", "-c", "echo ✓ > x"]},
    target=(".",), pre=(C,), post=None, mode=(0o040000,), replay=REPLAY_UNSAFE,
    key=f"{RUN}:6", check=None,
)
COMMIT = Commit(RUN, Lsn(3), Lsn(2), (B,), "hash==post && check ok: npm test")
COMMIT_RECOVERED = Commit(RUN, Lsn(5), Lsn(4), (ABSENT, A), "hash==post", recovered=True)
ABORT = Abort(RUN, Lsn(7), Lsn(6), "check failed: make", ("x", "ü/y"), "FAIL ✗\n")
ABORT_BARE = Abort(RUN, Lsn(9), Lsn(8), "recovery: not applied; not redone")

UNLOGGED = Unlogged(RUN, Lsn(10), ("src/ä.ts", "gone"), (A, B), (B, ABSENT),
                    "claude-code PreToolUse Edit")
SEAL = Seal(RUN, Lsn(11), 10, A, C)
TAKEOVER = Takeover(RUN, Lsn(12), "0123456789abcdef", "büild-7", ("", "/srv/ä"), "origin", A,
                    1796660000)

RECORDS: list[Record] = [
    PLAN, PLAN_DETACHED, INTENT, INTENT_MOVE, INTENT_EXEC, COMMIT, COMMIT_RECOVERED, ABORT,
    ABORT_BARE, UNLOGGED, SEAL, TAKEOVER,
]
IDS = [f"{type_name(r)}-{i}" for i, r in enumerate(RECORDS)]


# -- encoding ------------------------------------------------------------------


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_round_trip(record: Record) -> None:
    data = encode(record)
    back = decode(data, WHERE)
    assert back == record
    assert type(back) is type(record)
    assert encode(back) == data  # canonical: re-encoding is byte-identical


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_encoding_is_canonical_json(record: Record) -> None:
    data = encode(record)
    raw = json.loads(data)
    assert raw["v"] == FORMAT_VERSION
    assert raw["type"] == type_name(record)
    assert list(raw) == sorted(raw)  # sorted keys
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert data == canonical.encode("utf-8")
    assert b"\n" not in data
    assert b"\\u" not in data  # non-ASCII kept as UTF-8, not escaped
    # Every field, always, except fields added later, which appear only when set.
    optional = {f for f in OPTIONAL_FIELDS if not getattr(record, f, None)}
    assert set(raw) == {"v", "type", *record.__dataclass_fields__} - optional


def test_plan_encodes_to_exact_bytes() -> None:
    plan = Plan(RunId("r1"), Lsn(1), "täsk ✓", A, None, ("s1",))
    assert encode(plan) == (
        '{"base":"' + A + '","branch":null,"lsn":1,"run":"r1","steps":["s1"],'
        '"task":"täsk ✓","type":"plan","v":1}'
    ).encode("utf-8")


def test_plan_worktree_is_encoded_only_when_set() -> None:
    old = Plan(RunId("r1"), Lsn(1), "t", A, "main")
    bound = dataclasses.replace(old, worktree=("feature", "/src/feature ä"))
    assert b"worktree" not in encode(old)  # older plans stay byte-identical
    assert encode(bound) == (
        '{"base":"' + A + '","branch":"main","lsn":1,"run":"r1","steps":[],'
        '"task":"t","type":"plan","v":1,"worktree":{"name":"feature","path":"/src/feature ä"}}'
    ).encode("utf-8")
    assert decode(encode(bound), WHERE) == bound
    assert decode(encode(old), WHERE) == old
    main_wt = dataclasses.replace(old, worktree=("", "/src/repo"))
    assert decode(encode(main_wt), WHERE) == main_wt


@pytest.mark.parametrize("value", ['null', '"x"', '{"name":"a"}', '{"name":1,"path":"p"}',
                                   '{"name":"a","path":"p","x":1}'])
def test_plan_worktree_malformed_is_refused(value: str) -> None:
    raw = encode(Plan(RunId("r1"), Lsn(1), "t", A, "main"))[:-1] + (
        ',"worktree":' + value + "}").encode()
    with pytest.raises(CorruptLog):
        decode(raw, WHERE)


def test_non_ascii_is_raw_utf8() -> None:
    data = encode(PLAN)
    assert "getUserById → fetchUser, ünïcödé".encode() in data
    assert "étape deux".encode() in data


def test_args_key_order_does_not_change_the_bytes() -> None:
    a = dataclasses.replace(INTENT, args={"path": "p", "old": "x", "new": "y"})
    b = dataclasses.replace(INTENT, args={"new": "y", "old": "x", "path": "p"})
    assert encode(a) == encode(b)
    assert encode(a).index(b'"new"') < encode(a).index(b'"old"') < encode(a).index(b'"path"')


def test_to_dict_uses_lists_for_tuples() -> None:
    d = to_dict(INTENT_MOVE)
    assert d["target"] == ["a", "b"]
    assert d["mode"] == [0o100755, 0]
    assert to_dict(INTENT_EXEC)["post"] is None


def test_summary_names_lsn_and_kind() -> None:
    assert summary(PLAN).startswith("wal 1 plan: rename getUserById")
    assert summary(INTENT) == "wal 2 intent replace_symbol src/ä.ts"
    assert summary(COMMIT) == "wal 3 commit 2"
    assert summary(ABORT) == "wal 7 abort 6: check failed: make"


# -- decoding refusals ---------------------------------------------------------


def raw_of(record: Record) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(encode(record))
    return raw


def dumps(raw: Any) -> bytes:
    return json.dumps(raw, ensure_ascii=False).encode("utf-8")


def refused(data: bytes) -> CorruptLog:
    with pytest.raises(CorruptLog) as exc:
        decode(data, WHERE)
    err = exc.value
    assert isinstance(err, WalError)
    assert err.message.startswith(WHERE), err.message  # names the record
    assert err.hint, "a corrupt-record error must tell the user what to do"
    return err


@pytest.mark.parametrize("data", [
    b"", b"{", b"{not json}", b'{"v":1,', b"\xff\xfe{}", b'{"v":1}garbage', b"NaN x",
], ids=["empty", "open-brace", "bare-words", "truncated", "not-utf8", "trailing", "nan"])
def test_refuses_invalid_json(data: bytes) -> None:
    err = refused(data)
    assert "corrupt record" in err.message


@pytest.mark.parametrize("data", [b"[]", b"[1,2]", b"1", b'"plan"', b"null", b"true"])
def test_refuses_non_object(data: bytes) -> None:
    err = refused(data)
    assert "not a JSON object" in err.message


@pytest.mark.parametrize("version", [99, 2, 0, -1, 12345])
def test_refuses_unknown_version(version: int) -> None:
    raw = raw_of(INTENT) | {"v": version}
    err = refused(dumps(raw))
    assert f"version {version}" in err.message
    assert str(FORMAT_VERSION) in err.message


@pytest.mark.parametrize("version", ["1", None, 1.0, True, [1], {"v": 1}],
                         ids=["string", "null", "float", "bool", "list", "object"])
def test_refuses_version_of_the_wrong_type(version: Any) -> None:
    err = refused(dumps(raw_of(PLAN) | {"v": version}))
    assert "version" in err.message


def test_refuses_missing_version() -> None:
    raw = raw_of(PLAN)
    del raw["v"]
    err = refused(dumps(raw))
    assert "version" in err.message


@pytest.mark.parametrize("kind", ["bogus", "Plan", "PLAN", "", None, 1, ["plan"], {"t": "plan"}],
                         ids=["bogus", "Plan", "PLAN", "empty", "null", "int", "list", "object"])
def test_refuses_unknown_type(kind: Any) -> None:
    err = refused(dumps(raw_of(PLAN) | {"type": kind}))
    assert "unknown record type" in err.message


def test_refuses_missing_type() -> None:
    raw = raw_of(COMMIT)
    del raw["type"]
    err = refused(dumps(raw))
    assert "unknown record type" in err.message


@pytest.mark.parametrize("record", [PLAN, INTENT, COMMIT, ABORT, UNLOGGED, SEAL],
                         ids=type_name)
def test_refuses_unknown_field(record: Record) -> None:
    err = refused(dumps(raw_of(record) | {"extra": 1}))
    assert "unknown fields" in err.message and "extra" in err.message


def test_refuses_field_of_another_record_type() -> None:
    err = refused(dumps(raw_of(COMMIT) | {"reason": "x"}))
    assert "reason" in err.message


def _required(record: Record) -> list[str]:
    """Fields the record type defines without a default: a record must carry them."""
    return [
        name for name, f in record.__dataclass_fields__.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


MISSING_CASES = [
    (rec, name)
    for rec in (PLAN, INTENT, COMMIT, ABORT, UNLOGGED, SEAL)
    for name in _required(rec)
]


@pytest.mark.parametrize(("record", "name"), MISSING_CASES,
                         ids=[f"{type_name(r)}-{n}" for r, n in MISSING_CASES])
def test_refuses_missing_field(record: Record, name: str) -> None:
    raw = raw_of(record)
    del raw[name]
    err = refused(dumps(raw))
    assert name in err.message


def test_required_fields_cover_the_record_types() -> None:
    assert _required(PLAN) == ["run", "lsn", "task", "base", "branch"]
    assert _required(INTENT) == [
        "run", "lsn", "tool", "args", "target", "pre", "post", "mode", "replay", "key"
    ]
    assert _required(COMMIT) == ["run", "lsn", "intent", "post", "verified"]
    assert _required(ABORT) == ["run", "lsn", "intent", "reason"]
    assert _required(UNLOGGED) == ["run", "lsn", "paths", "expected", "observed", "noticed"]
    assert _required(SEAL) == ["run", "lsn", "last", "head", "tree"]


WRONG_TYPES: list[tuple[Record, str, Any]] = [
    (PLAN, "run", 5),
    (PLAN, "run", None),
    (PLAN, "lsn", "1"),
    (PLAN, "lsn", 1.0),
    (PLAN, "lsn", True),
    (PLAN, "lsn", 0),
    (PLAN, "lsn", -3),
    (PLAN, "task", None),
    (PLAN, "task", ["t"]),
    (PLAN, "branch", 5),
    (PLAN, "branch", ["main"]),
    (PLAN, "steps", "one step"),
    (PLAN, "steps", [1, 2]),
    (PLAN, "steps", None),
    (INTENT, "tool", None),
    (INTENT, "args", ["path", "x"]),
    (INTENT, "args", "path=x"),
    (INTENT, "target", "src/ä.ts"),
    (INTENT, "target", []),
    (INTENT, "target", [1]),
    (INTENT, "target", ["a", "b"]),  # length differs from pre/mode
    (INTENT, "pre", A),
    (INTENT, "pre", [A, A]),
    (INTENT, "post", B),
    (INTENT, "post", [B, B]),
    (INTENT, "mode", 0o100644),
    (INTENT, "mode", ["0o100644"]),
    (INTENT, "mode", [True]),
    (INTENT, "mode", [1.5]),
    (INTENT, "replay", "maybe"),
    (INTENT, "replay", None),
    (INTENT, "key", 2),
    (INTENT, "check", 5),
    (INTENT, "check", ["make"]),
    (COMMIT, "intent", "2"),
    (COMMIT, "intent", True),
    (COMMIT, "intent", None),
    (COMMIT, "verified", None),
    (COMMIT, "recovered", "yes"),
    (COMMIT, "recovered", 1),
    (COMMIT, "post", B),
    (ABORT, "reason", None),
    (ABORT, "restored", "x"),
    (ABORT, "restored", [1]),
    (ABORT, "output", None),
    (ABORT, "output", 0),
    (ABORT, "intent", 6.0),
    (UNLOGGED, "paths", []),
    (UNLOGGED, "paths", ["a"]),  # length differs from expected/observed
    (UNLOGGED, "paths", "src/ä.ts"),
    (UNLOGGED, "expected", [A]),
    (UNLOGGED, "observed", [B, "not-an-id"]),
    (UNLOGGED, "noticed", None),
    (SEAL, "last", 9),  # not the LSN just before the seal
    (SEAL, "last", "10"),
    (SEAL, "head", "HEAD"),
    (SEAL, "tree", None),
    (TAKEOVER, "clone", "0123456789ABCDEF"),
    (TAKEOVER, "clone", "0123"),
    (TAKEOVER, "taken", "HEAD"),
    (TAKEOVER, "at", -1),
    (TAKEOVER, "at", "now"),
    (TAKEOVER, "worktree", ["", "/srv"]),
    (TAKEOVER, "worktree", {"name": ""}),
    (TAKEOVER, "host", None),
    (TAKEOVER, "remote", 1),
]


@pytest.mark.parametrize(("record", "name", "value"), WRONG_TYPES,
                         ids=[f"{type_name(r)}-{n}-{v!r}" for r, n, v in WRONG_TYPES])
def test_refuses_wrong_types(record: Record, name: str, value: Any) -> None:
    raw = raw_of(record)
    assert name in raw
    err = refused(dumps(raw | {name: value}))
    assert "corrupt record" in err.message


BAD_IDS = [
    "abc",
    "A" * 40,  # uppercase hex
    "g" * 40,
    "a" * 39,
    "a" * 41,
    "a" * 63,
    " " + "a" * 39,
    "a" * 40 + "\n",
    "",
    "ABSENT",
    "HEAD",
]
BAD_ID_CASES: list[tuple[Record, str, Any]] = [
    *[(PLAN, "base", v) for v in BAD_IDS],
    *[(INTENT, "pre", [v]) for v in BAD_IDS],
    *[(INTENT, "post", [v]) for v in BAD_IDS],
    *[(COMMIT, "post", [v]) for v in BAD_IDS],
    (INTENT, "pre", [None]),
    (INTENT, "post", [7]),
    (COMMIT, "post", [[A]]),
    (PLAN, "base", ABSENT),  # a plan's base is a commit, never "absent"
]


@pytest.mark.parametrize(("record", "name", "value"), BAD_ID_CASES,
                         ids=[f"{type_name(r)}-{n}-{v!r}" for r, n, v in BAD_ID_CASES])
def test_refuses_bad_object_ids(record: Record, name: str, value: Any) -> None:
    err = refused(dumps(raw_of(record) | {name: value}))
    assert name in err.message


@pytest.mark.parametrize("oid", [A, B, C])
def test_accepts_sha1_and_sha256_ids(oid: str) -> None:
    raw = raw_of(COMMIT) | {"post": [oid]}
    rec = decode(dumps(raw), WHERE)
    assert isinstance(rec, Commit) and rec.post == (oid,)


def test_accepts_absent_in_pre_and_post() -> None:
    rec = decode(encode(INTENT_MOVE), WHERE)
    assert isinstance(rec, Intent)
    assert rec.pre == (A, ABSENT) and rec.post == (ABSENT, A)


def test_decode_tolerates_layout_but_gitwal_writes_canonical() -> None:
    """Non-canonical but valid JSON decodes to the same record (readers are
    tolerant of layout); the canonical form is what gitwal itself writes."""
    pretty = json.dumps(raw_of(ABORT), indent=2, ensure_ascii=True).encode()
    back = decode(pretty, WHERE)
    assert back == ABORT
    assert encode(back) == encode(ABORT) != pretty


UNPREDICTED = Intent(
    run=RUN, lsn=Lsn(2), tool="write_files",
    args={"paths": ["a", "b"], "contents": ["unknown", "unknown"],
          "agent": {"name": "gemini-cli", "tool": "replace", "call": "c1"}},
    target=("a", "b"), pre=(A, ABSENT), post=("unknown", "unknown"), mode=(0o100644, 0),
    replay=REPLAY_UNSAFE, key=f"{RUN}:2",
)


def test_an_unpredicted_agent_step_round_trips() -> None:
    assert decode(encode(UNPREDICTED), WHERE) == UNPREDICTED


@pytest.mark.parametrize(("record", "change"), [
    (UNPREDICTED, {"replay": REPLAY_SAFE}),  # it would be redone with no known result
    (INTENT, {"post": ["unknown"]}),  # only an agent's write_files may say it
    (INTENT, {"pre": ["unknown"]}),
    (COMMIT, {"post": ["unknown"]}),  # a commit records what was observed
], ids=["replay-safe", "other-tool", "in-pre", "in-commit"])
def test_unknown_is_refused_anywhere_else(record: Record, change: dict[str, Any]) -> None:
    refused(dumps(raw_of(record) | change))


def test_a_persons_decision_round_trips_and_is_canonical() -> None:
    decided = dataclasses.replace(COMMIT, decided_by="Ada <ada@example.org>", note="checked")
    assert decode(encode(decided), WHERE) == decided
    dropped = dataclasses.replace(ABORT, decided_by="Ada <ada@example.org>")
    assert decode(encode(dropped), WHERE) == dropped
    assert "note" not in to_dict(dropped)  # optional fields are written only when set
    assert "decided_by" not in to_dict(COMMIT)  # older records stay byte-identical


@pytest.mark.parametrize("change", [{"decided_by": ""}, {"note": ""}, {"decided_by": 7},
                                    {"note": "why, but by nobody"}],
                         ids=["empty-decider", "empty-note", "not-a-string", "note-alone"])
def test_a_malformed_decision_is_refused(change: dict[str, Any]) -> None:
    refused(dumps(raw_of(COMMIT) | change))
    refused(dumps(raw_of(ABORT) | change))


UNDO = Intent(
    run=RUN, lsn=Lsn(9), tool="undo",
    args={"undoes": [2, 4], "paths": ["a", "b"], "contents": [A, ABSENT],
          "modes": [0o100755, 0]},
    target=("a", "b"), pre=(B, B), post=(A, ABSENT), mode=(0o100644, 0o100644),
    replay=REPLAY_SAFE, key=f"{RUN}:9",
)


def test_an_undo_and_a_redo_round_trip() -> None:
    assert decode(encode(UNDO), WHERE) == UNDO
    redo = dataclasses.replace(UNDO, tool="redo", args=UNDO.args | {"redoes": 7})
    del redo.args["undoes"]
    assert decode(encode(redo), WHERE) == redo


@pytest.mark.parametrize("change", [
    {"undoes": []}, {"undoes": [9]}, {"undoes": ["2"]}, {"contents": [A]},
    {"contents": [A, "not-an-id"]}, {"modes": [0o100755, 0o100644]},
    {"modes": [0o120000, 0]}, {"paths": ["a", "../b"]},
], ids=["none-undone", "itself", "not-an-lsn", "short-contents", "bad-content",
        "mode-for-absent", "a-symlink", "outside"])
def test_a_malformed_undo_is_refused(change: dict[str, Any]) -> None:
    raw = raw_of(UNDO)
    raw["args"] = raw["args"] | change
    refused(dumps(raw))


def test_an_approval_round_trips_and_names_an_earlier_intent() -> None:
    from gitwal.records.model import Approval

    rec = Approval(RUN, Lsn(3), Lsn(2), "Ada <ada@example.org>", "reviewed")
    assert decode(encode(rec), WHERE) == rec
    assert "note" not in to_dict(dataclasses.replace(rec, note=""))
    for change in ({"intent": 3}, {"approved_by": ""}, {"note": ""}):
        refused(dumps(to_dict(rec) | change))
