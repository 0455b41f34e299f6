"""Helpers for engine tests (imported by test modules; fixtures live in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from piflow.engine.engine import Engine
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
