"""Budgets on real runs: soft and hard limits of every dimension, exhaustion, resume and proposals (spec H)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import RunScript, finished, wait_for, write_fixtures

from piflow.engine.control import ControlOutcome
from piflow.engine.engine import Engine
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

SEQUENTIAL = "const out = []; for (const n of [1, 2, 3, 4, 5]) out.push(await agent(`step ${n}`)); return out;"


def _event_types(store: RunStore, run_id: str) -> list[str]:
    return [e["type"] for e in store.budget_events(run_id)]


@pytest.fixture
def twenty_tokens(project: Path) -> str:
    """Every answer costs 20 tokens (10 in, 10 out) and $0.25."""
    return write_fixtures(project, {"defaults": {"tokens": {"input": 10, "output": 10}, "costUsd": 0.25}})


async def test_token_hard_limit_exhausts_the_run(engine: Engine, launch, store: RunStore, twenty_tokens: str) -> None:
    run_id = await launch(SEQUENTIAL, fixtures=twenty_tokens, budget={"tokens": {"soft": 30, "hard": 50}})
    record = await finished(engine, run_id)
    assert record.state == "budget_exhausted"
    assert record.error == {"code": "BUDGET_EXHAUSTED",
                            "message": "Budget version 1 exhausted: tokens usage=60 hard=50"}
    assert record.usage["tokens"] == 60, "the third answer overshoots and is accepted"
    assert _event_types(store, run_id) == ["soft_crossed", "hard_overrun", "hard_exhausted"]
    assert len([a for a in store.agents(run_id) if a.state == "completed"]) == 3


async def test_cost_limit(run_script: RunScript, twenty_tokens: str) -> None:
    record = await run_script(SEQUENTIAL, fixtures=twenty_tokens, budget={"costUsd": {"hard": 0.5}})
    assert record.state == "budget_exhausted"
    assert record.error is not None
    assert record.error["message"] == "Budget version 1 exhausted: costUsd usage=0.5 hard=0.5"


async def test_launch_limit_counts_attempts(engine: Engine, launch, store: RunStore) -> None:
    run_id = await launch(SEQUENTIAL, budget={"agentLaunches": {"soft": 1, "hard": 2}})
    record = await finished(engine, run_id)
    assert record.state == "budget_exhausted"
    assert record.usage["agentLaunches"] == 2
    assert [a.state for a in store.agents(run_id)] == ["completed", "completed", "failed"]


async def test_duration_limit(engine: Engine, launch, project: Path) -> None:
    slow = write_fixtures(project, {"defaults": {"latencyMs": 120}})
    run_id = await launch(SEQUENTIAL, fixtures=slow, budget={"durationMs": {"hard": 150}})
    record = await finished(engine, run_id)
    assert record.state == "budget_exhausted"
    assert record.error is not None and "durationMs usage=" in record.error["message"]


async def test_exhaustion_is_catchable_by_the_script(run_script: RunScript, twenty_tokens: str) -> None:
    script = 'await agent("a"); try { await agent("b") } catch (e) { return [e.code, e.failedAt ?? null] }'
    record = await run_script(script, fixtures=twenty_tokens, budget={"tokens": {"hard": 20}})
    # the script caught the error but budgeted work was attempted after hard exhaustion
    assert record.state == "budget_exhausted"
    assert record.error == {"code": "BUDGET_EXHAUSTED",
                            "message": "Budgeted work was attempted after hard exhaustion"}


async def test_resume_unchanged_is_refused_and_patch_needs_approval(
    engine: Engine, launch, store: RunStore, twenty_tokens: str
) -> None:
    run_id = await launch(SEQUENTIAL, fixtures=twenty_tokens, budget={"tokens": {"hard": 50}})
    await finished(engine, run_id)
    with pytest.raises(WorkflowError, match="Every exhausted hard budget must be raised above retained usage"):
        await engine.resume(run_id)
    with pytest.raises(WorkflowError, match="Every exhausted hard budget"):
        await engine.resume(run_id, {"tokens": {"hard": 55}})
    reply = await engine.resume(run_id, {"tokens": {"hard": 1000}})
    assert reply.state == "budget_exhausted" and reply.proposal_id is not None
    assert reply.message is not None and "requires approval" in reply.message
    assert engine.respond(run_id, proposal_id="nope", approved=True).reason == "proposal_not_pending"
    answer = engine.respond(run_id, proposal_id=reply.proposal_id, approved=True)
    assert answer == ControlOutcome("running", approved=True, reason="approved")
    await wait_for(lambda: run_id in engine.active)
    record = await finished(engine, run_id)
    assert record.state == "completed"
    assert record.budget_version == 2
    assert record.result == [f"[scripted] step {n}" for n in range(1, 6)]
    completed = [a for a in store.agents(run_id) if a.state == "completed"]
    assert len(completed) == 5, "the three journaled agents were replayed, not re-run"
    types = _event_types(store, run_id)
    assert types[:3] == ["hard_overrun", "hard_exhausted", "adjustment_requested"]
    assert "adjustment_approved" in types


async def test_rejected_proposal_leaves_the_run_exhausted(
    engine: Engine, launch, store: RunStore, twenty_tokens: str
) -> None:
    run_id = await launch(SEQUENTIAL, fixtures=twenty_tokens, budget={"tokens": {"hard": 50}})
    await finished(engine, run_id)
    reply = await engine.resume(run_id, {"tokens": None})
    answer = engine.respond(run_id, proposal_id=reply.proposal_id, approved=False)
    assert answer == ControlOutcome("budget_exhausted", approved=False, reason="rejected")
    assert store.get_run(run_id).state == "budget_exhausted"  # type: ignore[union-attr]
    assert _event_types(store, run_id)[-1] == "adjustment_rejected"


async def test_invalid_budget_is_rejected_at_launch(launch) -> None:
    with pytest.raises(WorkflowError) as err:
        await launch("return 1", budget={"tokens": {"soft": 5, "hard": 5}})
    assert (err.value.code, err.value.message) == ("INVALID_METADATA", "tokens.soft must be less than hard")
