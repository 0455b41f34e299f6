"""Run lifecycle transitions and the cooperative pause (spec F.1)."""

from __future__ import annotations

import anyio
import pytest

from piflow.engine.lifecycle import RunState
from piflow.engine.run_lifecycle import RunLifecycle
from piflow.errors import WorkflowError


def make(state: RunState = RunState.RUNNING) -> tuple[RunLifecycle, list[tuple[str, str, str | None]]]:
    seen: list[tuple[str, str, str | None]] = []
    return RunLifecycle(state, lambda prev, new, reason: seen.append((prev, new, reason))), seen


async def test_pause_with_no_active_operation_is_immediate() -> None:
    life, seen = make()
    life.pause()
    assert life.state == "paused"
    assert seen == [("running", "pausing", "pause"), ("pausing", "paused", "pause")]


async def test_pause_waits_for_active_operations_then_blocks_new_work() -> None:
    life, seen = make()
    await life.enter()
    life.pause()
    assert life.state == "pausing"
    entered = False

    async def newcomer() -> None:
        nonlocal entered
        await life.enter()
        entered = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(newcomer)
        await anyio.sleep(0.01)
        assert not entered
        life.leave()
        assert life.state == "paused"
        await anyio.sleep(0.01)
        assert not entered
        life.resume()
    assert entered
    assert seen[-1] == ("paused", "running", "resume")


async def test_enter_on_a_stopped_run_is_cancelled() -> None:
    life, _ = make()
    life.terminal("stopped")
    with pytest.raises(WorkflowError) as err:
        await life.enter()
    assert (err.value.code, err.value.message) == ("CANCELLED", "Run is stopped")


def test_pause_and_resume_refuse_wrong_states() -> None:
    life, _ = make(RunState.COMPLETED)
    with pytest.raises(WorkflowError, match="Cannot pause completed run"):
        life.pause()
    with pytest.raises(WorkflowError, match="Cannot resume completed run"):
        life.resume()


def test_terminal_states_are_irreversible() -> None:
    life, _ = make()
    life.terminal("failed", "AGENT_FAILED")
    with pytest.raises(WorkflowError) as err:
        life.terminal("completed")
    assert err.value.code == "RESUME_INCOMPATIBLE"
    assert err.value.message == "failed runs are terminal"


async def test_awaiting_input_and_resolution() -> None:
    life, seen = make()
    await life.enter_awaiting_input()
    assert life.state == "awaiting_input"
    await life.enter_awaiting_input()  # a second checkpoint keeps it awaiting
    life.resolve_awaiting_input()
    assert seen[-1] == ("awaiting_input", "running", "checkpoint_resolved")


async def test_awaiting_input_refused_for_an_ended_run() -> None:
    life, _ = make(RunState.INTERRUPTED)
    with pytest.raises(WorkflowError, match="Cannot await input for interrupted run"):
        await life.enter_awaiting_input()
