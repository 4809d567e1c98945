"""gitwal's reading of Gemini CLI's replace (gitwal/agents/gemini_edit.py) against
Gemini CLI's own code, run by node from the pinned package's bundle.

The edit functions of packages/core/src/tools/edit.ts are taken out of the
installed bundle at test time (nothing of them is kept in this repository) and
given seeded random edits; every result, or refusal, must be the same.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents.gemini_edit import replace_text
from gitwal.base.errors import ToolRefused

EDIT_START = "// packages/core/src/tools/edit.ts\nvar ENABLE_FUZZY_MATCH_RECOVERY"
# The tiny stand-ins for what those functions call outside the edit code.
PRELUDE = """
var __commonJS = (cb, mod) => () => (mod || (0, cb[Object.keys(cb)[0]])(
  (mod = { exports: {} }).exports, mod), mod.exports);
class EditStrategyEvent { constructor(_s) {} }
function logEditStrategy() {}
"""
DRIVER = """
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
(async () => {
  const out = [];
  for (const c of cases) {
    const r = await calculateReplacement({}, {currentContent: c.text, params: c.params});
    const err = getErrorReplaceResult(c.params, r.occurrences, r.finalOldString,
                                      r.finalNewString);
    out.push(err ? null : r.newContent);
  }
  process.stdout.write(JSON.stringify(out));
})();
"""


def section(text: str, start: str, end: str) -> str:
    a = text.index(start)
    return text[a:text.index(end, a)]


def gemini_edit_js(bundle: Path) -> str:
    """The edit functions of the bundle, with what they need, as one node script."""
    for chunk in sorted(bundle.glob("*.js")):
        text = chunk.read_text(encoding="utf-8")
        if EDIT_START in text:
            break
    else:
        pytest.fail(f"no chunk of {bundle} holds Gemini CLI's edit tool")
    lev = section(text, "var require_levenshtein = __commonJS({", "\n});\n") + "\n});\n"
    literal = section(text, "function safeLiteralReplace(", "\n}\n") + "\n}\n"
    edit = section(text, EDIT_START, "\nvar EditToolInvocation = class")
    fuzzy = section(text, "\nfunction stripWhitespace(", "\n// packages/core/src/tools/")
    assert "import_fast_levenshtein" in fuzzy, "the fuzzy match no longer uses fast-levenshtein"
    return "\n".join([PRELUDE, lev,
                      "var import_fast_levenshtein = { default: require_levenshtein() };",
                      literal, edit, fuzzy, DRIVER])


ATOMS = ["foo", "bar", "x", "(", ")", "=", " ", "  ", "\t", "\n", "\n", "{", "}", ":", "1",
         "$&", "\u00a0", "\r", "\u2028", "\U0001f600", "\u00e9", "baz qux", "\ufeff", "\x1c"]
WORDS = ["def", "foo", "return", "x", "=", "1", "(y)", "if", "else:", "print(x)",
         "\U0001f600", "  ", "\t"]


def character_cases(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    def gen(k: int) -> str:
        return "".join(rnd.choice(ATOMS) for _ in range(k))
    out = []
    for _ in range(n):
        text = gen(rnd.randint(0, 40)).replace("\r\n", "\n")  # Gemini reads CRLF as LF
        if text and rnd.random() < 0.5:
            i = rnd.randint(0, len(text))
            old = text[i:rnd.randint(i, min(len(text), i + 25))]
            if rnd.random() < 0.5:
                old = old.replace("  ", " ").replace("\t", "    ")
            if rnd.random() < 0.3:
                old = "  " + old.strip()
        else:
            old = gen(rnd.randint(0, 8))
        out.append({"text": text, "old": old, "new": gen(rnd.randint(0, 10)),
                    "multiple": rnd.random() < 0.4})
    return out


def line_cases(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    def line() -> str:
        return rnd.choice(["", "  ", "    ", "\t"]) + " ".join(
            rnd.choice(WORDS) for _ in range(rnd.randint(0, 6)))
    out = []
    for _ in range(n):
        lines = [line() for _ in range(rnd.randint(1, 12))]
        if rnd.random() < 0.3:
            lines += lines[:rnd.randint(1, 4)]
        text = "\n".join(lines) + ("\n" if rnd.random() < 0.7 else "")
        i = rnd.randrange(len(lines))
        old_lines = lines[i:i + rnd.randint(1, 4)]
        if rnd.random() < 0.6:
            old_lines = [x.strip() if rnd.random() < 0.5 else "  " + x for x in old_lines]
        old = "\n".join(old_lines)
        for _ in range(rnd.randint(0, 2)):  # typos: the fuzzy match's business
            if old:
                p = rnd.randrange(len(old))
                old = old[:p] + rnd.choice("xyz ;") + old[p + 1:]
        out.append({"text": text, "old": old + ("\n" if rnd.random() < 0.3 else ""),
                    "new": "\n".join(line() for _ in range(rnd.randint(0, 3))),
                    "multiple": rnd.random() < 0.4})
    return out


@pytest.mark.slow
def test_every_replace_matches_gemini_cli(gemini_bin: Path, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    script = tmp_path / "edit.js"
    script.write_text(gemini_edit_js(gemini_bin.resolve().parent))
    rnd = random.Random(20261204)
    cases = [c for c in character_cases(rnd, 2500) + line_cases(rnd, 2500) if c["old"]]
    params = [{"text": c["text"], "params": {"file_path": "f", "old_string": c["old"],
                                             "new_string": c["new"],
                                             **({"allow_multiple": True}
                                                if c["multiple"] else {})}}
              for c in cases]
    proc = subprocess.run([node, str(script)], input=json.dumps(params), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout)
    modes: dict[str, int] = {}
    mismatches = []
    for c, want in zip(cases, theirs, strict=True):
        try:
            got: str | None
            got, mode = replace_text(c["text"], c["old"], c["new"], c["multiple"])
            modes[mode] = modes.get(mode, 0) + 1
        except ToolRefused:
            got = None
        if got != want:
            mismatches.append((c, want, got))
    assert not mismatches, mismatches[:3]
    # Every way of matching was exercised, not only the exact one.
    assert all(modes.get(m, 0) >= 20 for m in ("exact", "flexible", "regex", "fuzzy")), modes
