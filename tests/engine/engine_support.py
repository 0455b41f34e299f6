"""Helpers for engine tests (imported by test modules; fixtures live in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from piflow.engine.engine import Engine
from piflow.engine.lifecycle import ENDED
from piflow.engine.store import RunRecord


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


RunScript = Callable[..., Awaitable[Outcome]]
"""`await run_script(script, answers={label: approved}, **launch_fields) -> Outcome`."""


async def run_embedded(store: Any, project: Path, script: str, answers: dict[str, bool] | None = None,
                       timeout: float = 30.0, **fields: Any) -> Outcome:
    from piflow.engine.engine import LaunchRequest

    async with Engine(store) as engine:
        run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project), **fields))
        with anyio.fail_after(timeout):
            while (record := store.get_run(run_id)).state not in ENDED:
                for checkpoint in store.awaiting_checkpoints(run_id):
                    if answers and checkpoint.label in answers:
                        engine.respond(run_id, name=checkpoint.label, approved=answers[checkpoint.label])
                await anyio.sleep(0.02)
        record = await engine.wait(run_id)
    return Outcome(record.state, record.result, record.error, record.usage)


async def run_on_temporal(settings: Any, project: Path, script: str, answers: dict[str, bool] | None = None,
                          timeout: float = 90.0, **fields: Any) -> Outcome:
    """The same run on a Temporal cluster, through the executor the CLI uses."""
    from piflow.engine.engine import LaunchRequest
    from piflow.engine.temporal.client import TemporalRuns

    async with TemporalRuns(settings, str(project)) as runs:
        run_id = await runs.launch(LaunchRequest(script=script, cwd=str(project), **fields))
        with anyio.fail_after(timeout):
            while (snapshot := await runs.snapshot(run_id)).state not in ENDED:
                for checkpoint in snapshot.checkpoints:
                    if answers and checkpoint.label in answers:
                        await runs.respond(run_id, checkpoint.label, answers[checkpoint.label])
                await anyio.sleep(0.1)
    return Outcome(snapshot.state, snapshot.result, snapshot.error, snapshot.usage)
