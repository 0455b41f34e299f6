"""A step on a worker (`step.wait_step`) while its script is busy: it answers `busy` rather than hold
its workflow task, a stop ends it, and a step nobody waits on any more stops itself."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from piflow.engine.temporal import step as steps
from piflow.engine.temporal.wire import RunStart, StepInput


def _children() -> set[int]:
    """The processes this test process started (a step's script runs in a worker subprocess)."""
    return {int(pid) for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()}


def _busy(project: Path, key: str) -> StepInput:
    start = RunStart(key, "busy", str(project), None, {"script": "for (;;) {}"}, None, 4, time.time())
    return StepInput(start, [], [], {}, step=key)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    return tmp_path


async def test_a_busy_step_answers_busy_and_a_stop_kills_its_script(project: Path) -> None:
    before = _children()
    began = time.monotonic()
    result = await steps.wait_step(_busy(project, "stop-me"), wait=0.5)
    assert result.busy and not result.finished
    assert time.monotonic() - began < 3
    assert _children() - before, "the script runs on in its worker"
    stopped = await steps.wait_step(replace(_busy(project, "stop-me"), stop=True))
    assert not stopped.busy
    assert not _children() - before, "the stop killed the script's worker"


async def test_an_abandoned_step_stops_itself(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "STEP_ORPHAN_SECONDS", 0.5)
    before = _children()
    assert (await steps.wait_step(_busy(project, "left"), wait=0.3)).busy
    with anyio.fail_after(4):  # well before the script's worker would miss its 5 s heartbeat
        while _children() - before:
            await anyio.sleep(0.05)
