"""Helpers for engine tests (imported by test modules; fixtures live in conftest.py)."""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from piflow.engine.control import ControlOutcome
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.lifecycle import ENDED, CheckpointState
from piflow.engine.store import RunRecord, RunStore
from piflow.engine.views import AgentView, RunView, run_view

if TYPE_CHECKING:
    from piflow.engine.temporal.client import TemporalRuns
    from temporal_cluster import DevServer


def write_fixtures(project: Path, data: dict[str, Any]) -> str:
    path = project / "fixtures.json"
    path.write_text(json.dumps(data))
    return str(path)


async def wait_for(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    with anyio.fail_after(timeout):
        while True:
            value = condition()
            if value:
                return value
            await anyio.sleep(0.01)


async def finished(engine: Engine, run_id: str, timeout: float = 20.0) -> RunRecord:
    with anyio.fail_after(timeout):
        return await engine.wait(run_id)


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as either executor reports it (the run-behaviour tests' common ground)."""

    state: str
    result: Any
    error: dict[str, Any] | None
    usage: dict[str, Any]
    view: RunView

    @classmethod
    def of(cls, view: RunView) -> Outcome:
        return cls(str(view.state), view.result, view.error, view.budget.usage, view)

    @property
    def agents(self) -> list[AgentView]:
        return self.view.agents


def awaiting(view: RunView) -> list[str]:
    """The labels of the checkpoints waiting for an answer (the embedded view lists answered ones too)."""
    return [c.name for c in view.checkpoints if c.state == CheckpointState.AWAITING]


class Runs(ABC):
    """What a run-behaviour test does to a run, on either executor: launch, watch the run's view
    (`engine/views.py`: the store's on the embedded engine, the workflow's snapshot on Temporal),
    answer checkpoints and budget proposals, pause, resume and stop."""

    executor: str
    poll = 0.02

    @abstractmethod
    async def launch(self, script: str, **fields: Any) -> str: ...

    @abstractmethod
    async def view(self, run_id: str, *, details: bool = False) -> RunView:
        """The run as `piflow show` shows it; with `details`, agents' outputs and attempts too."""

    @abstractmethod
    async def respond(self, run_id: str, label: str, approved: bool) -> bool:
        """Answer a checkpoint; False when it was not waiting."""

    @abstractmethod
    async def pause(self, run_id: str) -> str: ...

    @abstractmethod
    async def resume(self, run_id: str, patch: Any = None) -> ControlOutcome: ...

    @abstractmethod
    async def stop(self, run_id: str) -> ControlOutcome: ...

    @abstractmethod
    async def decide(self, run_id: str, proposal_id: str, approved: bool) -> ControlOutcome: ...

    async def until(self, run_id: str, condition: Callable[[RunView], Any], timeout: float = 60.0) -> RunView:
        """The run's view once `condition` holds for it."""
        with anyio.fail_after(timeout):
            while not condition(view := await self.view(run_id)):
                await anyio.sleep(self.poll)
        return view

    async def finish(self, run_id: str, answers: dict[str, bool] | None = None, timeout: float = 60.0) -> Outcome:
        """Wait for the run to end (budget-exhausted included), answering checkpoints from `answers`."""
        with anyio.fail_after(timeout):
            while (view := await self.view(run_id)).state not in ENDED:
                for label in awaiting(view):
                    if answers and label in answers:
                        await self.respond(run_id, label, answers[label])
                await anyio.sleep(self.poll)
        return Outcome.of(view)

    async def run(self, script: str, answers: dict[str, bool] | None = None, timeout: float = 60.0,
                  **fields: Any) -> Outcome:
        return await self.finish(await self.launch(script, **fields), answers, timeout)


class EmbeddedRuns(Runs):
    """The embedded engine: one `Engine` owning the runs, the test's store."""

    executor = "embedded"

    def __init__(self, engine: Engine, store: RunStore, project: Path) -> None:
        self.engine, self.store, self.project = engine, store, project

    async def launch(self, script: str, **fields: Any) -> str:
        return await self.engine.launch(LaunchRequest(script=script, cwd=str(self.project), **fields))

    async def view(self, run_id: str, *, details: bool = False) -> RunView:
        return run_view(self.store, run_id, details=details)

    async def finish(self, run_id: str, answers: dict[str, bool] | None = None, timeout: float = 60.0) -> Outcome:
        await super().finish(run_id, answers, timeout)
        with anyio.fail_after(timeout):
            await self.engine.wait(run_id)  # a stopped run's state is written first, its agents settle after
        return Outcome.of(await self.view(run_id))

    async def respond(self, run_id: str, label: str, approved: bool) -> bool:
        return bool(self.engine.respond(run_id, name=label, approved=approved).accepted)

    async def pause(self, run_id: str) -> str:
        return str(self.engine.pause(run_id))

    async def resume(self, run_id: str, patch: Any = None) -> ControlOutcome:
        return await self.engine.resume(run_id, patch)

    async def stop(self, run_id: str) -> ControlOutcome:
        return self.engine.stop(run_id)

    async def decide(self, run_id: str, proposal_id: str, approved: bool) -> ControlOutcome:
        return self.engine.respond(run_id, proposal_id=proposal_id, approved=approved)


class TemporalHarness(Runs):
    """A Temporal cluster, through the executor the CLI uses (`TemporalRuns`)."""

    executor = "temporal"
    poll = 0.1

    def __init__(self, runs: TemporalRuns, project: Path) -> None:
        self.runs, self.project = runs, project

    async def launch(self, script: str, **fields: Any) -> str:
        return await self.runs.launch(LaunchRequest(script=script, cwd=str(self.project), **fields))

    async def view(self, run_id: str, *, details: bool = False) -> RunView:
        return await self.runs.view(run_id, details=details)

    async def respond(self, run_id: str, label: str, approved: bool) -> bool:
        return await self.runs.respond(run_id, label, approved)

    async def pause(self, run_id: str) -> str:
        return str(await self.runs.pause(run_id))

    async def resume(self, run_id: str, patch: Any = None) -> ControlOutcome:
        return await self.runs.resume(run_id, patch)

    async def stop(self, run_id: str) -> ControlOutcome:
        return await self.runs.stop(run_id)

    async def decide(self, run_id: str, proposal_id: str, approved: bool) -> ControlOutcome:
        return await self.runs.decide(run_id, proposal_id, approved)


def serve_workers(server: DevServer, root: Path, count: int, python_path: tuple[str, ...] = ()) -> Iterator[Any]:
    """`count` `piflow worker`s on a task queue of their own: the settings of a project they serve."""
    from piflow.engine.temporal.settings import TemporalSettings
    from temporal_cluster import Workers

    workers = Workers(server, root, f"piflow-engine-{uuid.uuid4().hex[:8]}", python_path)
    try:
        workers.start(count)
        yield TemporalSettings(address=server.address, task_queue=workers.task_queue)
    finally:
        workers.stop_all()


@asynccontextmanager
async def executor(request: pytest.FixtureRequest, project: Path, settings_fixture: str) -> AsyncIterator[Runs]:
    """`Runs` on the executor `request.param` names; on Temporal, the workers of `settings_fixture`."""
    if request.param == "embedded":
        store = request.getfixturevalue("store")
        async with Engine(store) as engine:
            yield EmbeddedRuns(engine, store, project)
        return
    from piflow.engine.temporal.client import TemporalRuns

    async with TemporalRuns(request.getfixturevalue(settings_fixture), str(project)) as client:
        yield TemporalHarness(client, project)


RunScript = Callable[..., Awaitable[Outcome]]
"""`await run_script(script, answers={label: approved}, **launch_fields) -> Outcome` (`Runs.run`)."""
