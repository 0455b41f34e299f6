"""Shared set-up for engine tests: an isolated home, a project dir, a store, and a running engine."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory with HOME and the XDG dirs pointing into the test's tmp dir."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config")):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def store(project: Path) -> RunStore:
    return RunStore.open(project.parent / "state" / "runs.db")


@pytest.fixture
async def engine(store: RunStore) -> AsyncIterator[Engine]:
    async with Engine(store) as running:
        yield running


LaunchFn = Callable[..., Any]


@pytest.fixture
def launch(engine: Engine, project: Path) -> LaunchFn:
    """`await launch(script, **request_fields) -> run id`."""

    async def start(script: str, **fields: Any) -> str:
        return await engine.launch(LaunchRequest(script=script, cwd=str(project), **fields))

    return start
