"""docs/architecture.md names every module of the package, where it lives."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def unnamed_modules(doc: str) -> list[str]:
    """Modules the page does not name: by their path from gitwal/, or by
    their file name on a row that names their package."""
    lines = doc.splitlines()
    missing = []
    for f in sorted((ROOT / "gitwal").rglob("*.py")):
        rel = f.relative_to(ROOT / "gitwal").as_posix()
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


def test_every_module_is_on_the_map() -> None:
    assert unnamed_modules(DOC.read_text()) == []


def test_a_module_left_off_the_map_is_found() -> None:
    doc = DOC.read_text().replace("`log/appends.py`", "`log/elsewhere.py`")
    assert unnamed_modules(doc) == ["log/appends.py"]


def test_every_package_face_lists_its_files() -> None:
    faces = [p for p in (ROOT / "gitwal").glob("*/__init__.py")
             if p.parent.name in {"log", "records", "worktree", "recovery", "remote"}]
    assert len(faces) == 5
    for face in faces:
        text = face.read_text()
        for module in face.parent.glob("*.py"):
            if module.name != "__init__.py":
                assert module.name in text, f"{face}: {module.name} is not listed"
