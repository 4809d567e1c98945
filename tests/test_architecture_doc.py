"""docs/architecture.md names every module of the package, where it lives,
and its map of layers is the structure the imports draw: each package one
room, no circle, no import running up a layer, no module over 300 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "gitwal"
MAX_LINES = 300


def unnamed_modules(doc: str) -> list[str]:
    """Modules the page does not name: by their path from gitwal/, or by
    their file name on a row that names their package."""
    lines = doc.splitlines()
    missing = []
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE).as_posix()
        if f.name == "__main__.py" or (f.name == "__init__.py" and rel not in {
                "verify/__init__.py", "cli/__init__.py"}):
            continue  # package faces: their docstring lists their files
        if f"`{rel}`" in doc:
            continue
        package = rel.rsplit("/", 1)[0] + "/" if "/" in rel else None
        if package and any(f"`{package}`" in line and f"`{f.name}`" in line for line in lines):
            continue
        missing.append(rel)
    return missing


def layers(doc: str) -> list[set[str]]:
    """The map's layers, top first, from the first fenced block: the rooms
    (a folder of gitwal/ as `name/`, a module as `name.py`) its lines name,
    one layer from one `|` line to the next."""
    block = doc.split("```", 2)[1]
    out: list[set[str]] = [set()]
    for line in block.splitlines():
        if line.strip() == "|":
            out.append(set())
        out[-1] |= {w for w in line.split() if re.fullmatch(r"[a-z_]+/|[a-z_]+\.py", w)}
    return [rooms for rooms in out if rooms]


def room_of(module: str) -> str:
    """`gitwal.log.store` -> `log/`; `gitwal.run` -> `run.py`; `gitwal` -> `__init__.py`."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    if (PACKAGE / parts[0]).is_dir():
        return parts[0] + "/"
    return parts[0] + ".py"


def modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def imports() -> set[tuple[str, str]]:
    """Every (importer, imported) pair of gitwal's modules: top-level,
    function-level and type-checking imports alike."""
    mods = modules()
    pairs = set()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    targets.append(full if full in mods else target)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            pairs |= {(name, t) for t in targets if t in mods and t != name}
    return pairs


def violations(doc: str, pairs: set[tuple[str, str]]) -> list[str]:
    """Imports that run up the map's layers, and rooms on no layer."""
    level = {room: i for i, rooms in enumerate(layers(doc)) for room in rooms}
    found = []
    for a, b in sorted(pairs):
        ra, rb = room_of(a), room_of(b)
        if ra == rb:
            continue
        if ra not in level or rb not in level:
            found.append(f"{ra if ra not in level else rb} is on no layer of the map")
        elif level[ra] > level[rb]:
            found.append(f"{a} -> {b}: {ra} is below {rb}")
    return sorted(set(found))


def circles(edges: set[tuple[str, str]]) -> list[set[str]]:
    """Strongly connected sets of more than one node (Tarjan)."""
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return out


def room_edges(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    # A package's face importing its own modules is no arrow between rooms.
    return {(room_of(a), room_of(b)) for a, b in pairs if room_of(a) != room_of(b)}


def test_every_module_is_on_the_map() -> None:
    assert unnamed_modules(DOC.read_text()) == []


def test_a_module_left_off_the_map_is_found() -> None:
    doc = DOC.read_text().replace("`log/appends.py`", "`log/elsewhere.py`")
    assert unnamed_modules(doc) == ["log/appends.py"]


def test_every_package_face_lists_its_files() -> None:
    faces = list(PACKAGE.glob("*/__init__.py"))
    assert len(faces) >= 15
    for face in faces:
        if face.parent.name in {"cli", "verify"}:
            continue  # these hold code, and the map names each of their files
        text = face.read_text()
        for module in face.parent.glob("*.py"):
            if module.name != "__init__.py":
                assert module.name in text, f"{face}: {module.name} is not listed"


def test_the_map_is_the_structure_the_imports_draw() -> None:
    doc = DOC.read_text()
    rooms = {room_of(m) for m in modules()}
    on_map = set().union(*layers(doc))
    assert on_map == rooms, (sorted(rooms - on_map), sorted(on_map - rooms))
    assert violations(doc, imports()) == []


def test_an_import_running_up_is_found() -> None:
    doc = DOC.read_text()
    pairs = imports() | {("gitwal.base.errors", "gitwal.cli.options")}
    assert violations(doc, pairs) == [
        "gitwal.base.errors -> gitwal.cli.options: base/ is below cli/"]
    # With the layers turned upside down, nearly every import runs up.
    block = doc.split("```", 2)[1]
    flipped = doc.replace(block, "\n".join(reversed(block.splitlines())))
    assert len(layers(flipped)) == len(layers(doc)) == 12
    assert len(violations(flipped, imports())) > 20


def test_no_import_circle() -> None:
    pairs = imports()
    assert circles(pairs) == []  # between modules
    assert circles(room_edges(pairs)) == []  # between rooms
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [{"a", "b", "c"}]


def test_no_module_over_300_lines() -> None:
    """A generated file says so first (`# Generated ...` or a docstring
    opening `Generated ...`) and is exempt."""
    long = []
    for f in [*PACKAGE.rglob("*.py"), *(ROOT / "bench").rglob("*.py"),
              *(ROOT / "hooks").rglob("*.py")]:
        text = f.read_text()
        if len(text.splitlines()) > MAX_LINES and not re.match(r'(#|""")\s*Generated\b', text):
            long.append(f"{f.relative_to(ROOT)}: {len(text.splitlines())}")
    assert long == []
