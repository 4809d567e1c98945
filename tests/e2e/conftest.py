"""Fixtures for the end-to-end tests: the pinned ``claude``, ``codex`` and ``gemini``
binaries (installed on first use; the tests skip, saying why, where they cannot be had)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .claude import private_runtime_dir
from .pinned import CLAUDE, CODEX, GEMINI, Pin, find


def pinned_bin(pin: Pin) -> Path:
    """The pinned binary, or a skip (a failure under GITWAL_E2E_REQUIRE) saying why."""
    found = find(pin)
    if found.path is None:
        if os.environ.get("GITWAL_E2E_REQUIRE", "") not in ("", "0"):
            pytest.fail(f"{pin.name} is required (GITWAL_E2E_REQUIRE): {found.reason}")
        pytest.skip(f"{pin.name} end-to-end tests skipped: {found.reason}")
    return found.path


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return pinned_bin(CLAUDE)


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return pinned_bin(CODEX)


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return pinned_bin(GEMINI)


@pytest.fixture(autouse=True)
def hook_servers() -> Iterator[Path]:
    """gitwal's hook servers of this test: a private runtime dir, stopped after it."""
    with private_runtime_dir() as path:
        yield path
