"""Smoke tests of `make bench`'s own machinery (the benchmarks themselves run
only under `make bench`): the run builder, the memory probe, the plot, and
the place §8 fills in, and the other runs §10 measures against."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench import claude_session
from bench.common import run_peak
from bench.logbuild import PATHS, content
from bench.many_runs import add_others, guard
from bench.svg import line_plot
from gitwal import Wal
from gitwal.base.repository import open_repository
from gitwal.together.claims import kept_off_others
from gitwal.together.pathlocks import Holder, PathBusy

from .conftest import init_repo, ok

ROOT = Path(__file__).resolve().parent.parent


def records(repo: Path) -> list[dict[str, object]]:
    """The run's records after the plan, without the clone-bound proof of authorship."""
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "big", "--json").splitlines()]
    for row in rows:
        row.pop("auth", None)
    return rows[1:]


def test_the_run_builder_writes_what_run_apply_writes(tmp_path: Path) -> None:
    files = {p: f"{p} base\n" for p in PATHS}
    applied = init_repo(tmp_path / "applied", files)
    built = init_repo(tmp_path / "built", files)
    run = Wal(applied).begin(task="t", run_id="big")
    for k in range(24):  # past one round of the 20 files: pre-images of earlier steps
        run.apply("write_file", path=PATHS[k % 20], content=content(PATHS[k % 20], k))
    reports = []
    for steps, durable in ((10, 4), (14, 0)):  # grown in two goes, as §4 grows it
        out = subprocess.run([sys.executable, "-m", "bench.logbuild", str(built), "big",
                              str(steps), str(durable)], cwd=ROOT, capture_output=True,
                             text=True, check=True)
        got = json.loads(out.stdout)
        reports.append((got["records"], got["durable_steps"], got["fast_steps"]))
    assert reports == [(21, 4, 6), (49, 0, 14)]
    assert records(built) == records(applied)
    assert len(records(built)) == 48
    for p in PATHS:
        assert (built / p).read_bytes() == (applied / p).read_bytes()
    recovered = json.loads(ok(built, "recover", "--run", "big", "--json"))
    assert (recovered["intents"], recovered["drift"], recovered["committed_total"]) == ([], [],
                                                                                       24)


def test_the_memory_probe_reports_each_childs_own_peak(tmp_path: Path) -> None:
    _secs, big = run_peak([sys.executable, "-c", "b = bytearray(200 << 20); b[::4096] = "
                           "b'x' * len(b[::4096])"], tmp_path)
    # This process large: a child forked from it would count its memory.
    ballast = bytearray(300 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    _secs, small = run_peak([sys.executable, "-c", "pass"], tmp_path)
    del ballast
    assert big >= 200 << 20
    assert small < 100 << 20  # neither the largest child so far, nor this process
    with pytest.raises(RuntimeError, match="exited 3"):
        run_peak([sys.executable, "-c", "raise SystemExit(3)"], tmp_path)


def test_the_plot_is_an_svg_with_one_line_per_series() -> None:
    svg = line_plot("t <&>", "x", "y", [("a", [(1.0, 2.0), (2.0, 3.0), (3.0, 2.5)]),
                                        ("b", [(1.0, 1.0), (2.0, 1.5), (3.0, 1.0)])],
                    [(2.5, "here")])
    root = ET.fromstring(svg)
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert [len(p.attrib["points"].split()) for p in lines] == [3, 3]
    assert "t <&>" in "".join(root.itertext())
    capped = ET.fromstring(line_plot("t", "x", "y", [("a", [(1.0, 1.0), (2.0, 90.0)])],
                                     y_max=10.0))
    assert "1 point(s) above 10 drawn on the top edge" in "".join(capped.itertext())


def test_section_8_fills_the_places_bench_run_left(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "benchmarks.md"
    monkeypatch.setattr(claude_session, "REPORT", report)
    row = "| " + " | ".join(claude_session.PENDING_ROW) + " |"
    report.write_text(f"# B\n\n| target | measured | met |\n{row}\n\n## 7. x\n\n"
                      + claude_session.PENDING_SECTION)
    assert claude_session.fill_report("## 8. done\n\nfigures\n", "1.10x", True)
    text = report.read_text()
    assert f"| {claude_session.TARGET_NAME} | 1.10x | **met** |" in text
    assert text.endswith("## 7. x\n\n## 8. done\n\nfigures\n")
    assert not claude_session.fill_report("## 8. again\n", "1.30x", False)  # no place left
    assert report.read_text() == text


def test_section_10s_other_runs_hold_an_open_intent_and_a_claim(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r", {"mine.txt": "x\n"})
    add_others(repo, 2)
    me = Wal(repo).begin(run_id="me").id
    git = open_repository(repo)
    for path, why in (("o0.txt", "being changed by run claude-other-0"),
                      ("o1.txt", "being changed by run claude-other-1"),
                      ("o0-claimed.txt", "claimed by run claude-other-0"),
                      ("o1-claimed.txt", "claimed by run claude-other-1")):
        with (pytest.raises(PathBusy, match=why),
              kept_off_others(git, Holder(me, 2, "write_file", ""), [path])):
            pass
    guard(repo, me)()  # the measured step's path: held by no one


@pytest.mark.slow
def test_the_two_agent_demo_ends_in_one_checked_order() -> None:
    """`make demo-agents`: both agents killed once mid-step, a refused call retried,
    and every check passes (the demo exits 1 when one does not)."""
    proc = subprocess.run([sys.executable, "-m", "bench.demo_agents"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    assert "verdict: OK" in out
    assert "SIGKILL agent 1 mid-step" in out and "SIGKILL it mid-step" in out
    assert "PreToolUse refused, exit 2" in out
    assert "applied-missing-commit -> committed" in out and "not-applied -> aborted" in out
    assert "retried d4" in out
