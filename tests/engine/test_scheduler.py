"""Fair scheduling: per-run limits under the session ceiling, round-robin across runs (spec J.1)."""

from __future__ import annotations

import anyio
import pytest

from piflow.engine.scheduler import FairScheduler
from piflow.errors import WorkflowError


async def test_per_run_limit_is_respected() -> None:
    scheduler = FairScheduler()
    scheduler.register("a", 2)
    peak = 0
    running = 0

    async def agent() -> None:
        nonlocal peak, running
        await scheduler.acquire("a")
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.005)
        running -= 1
        scheduler.release("a")

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(agent)
    assert peak == 2


async def test_round_robin_does_not_starve_a_second_run() -> None:
    scheduler = FairScheduler(ceiling=1)
    scheduler.register("big", 1)
    scheduler.register("small", 1)
    order: list[str] = []

    async def agent(run: str) -> None:
        await scheduler.acquire(run)
        order.append(run)
        await anyio.sleep(0.001)
        scheduler.release(run)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(agent, "big")
        await anyio.sleep(0)
        tg.start_soon(agent, "small")
    assert "small" in order[:3]


async def test_cancelled_waiter_gives_its_place_away() -> None:
    scheduler = FairScheduler()
    scheduler.register("a", 1)
    await scheduler.acquire("a")
    with anyio.move_on_after(0.01):
        await scheduler.acquire("a")
    scheduler.release("a")
    with anyio.fail_after(1):
        await scheduler.acquire("a")


def test_invalid_limits_are_rejected_with_the_spec_messages() -> None:
    with pytest.raises(WorkflowError, match="Session concurrency must be an integer from 1 to 16"):
        FairScheduler(ceiling=17)
    with pytest.raises(WorkflowError, match="Invalid run concurrency"):
        FairScheduler().register("a", 0)
