"""Budgets on real runs: soft and hard limits of every dimension, exhaustion, resume and proposals (spec H)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import Runs, RunScript, write_fixtures

from piflow.engine.control import ControlOutcome
from piflow.engine.views import RunView
from piflow.errors import WorkflowError

SEQUENTIAL = "const out = []; for (const n of [1, 2, 3, 4, 5]) out.push(await agent(`step ${n}`)); return out;"


@pytest.fixture
def twenty_tokens(project: Path) -> str:
    """Every answer costs 20 tokens (10 in, 10 out) and $0.25."""
    return write_fixtures(project, {"defaults": {"tokens": {"input": 10, "output": 10}, "costUsd": 0.25}})


def _event_types(view: RunView) -> list[str]:
    return [e["type"] for e in view.budget.events]


async def test_token_hard_limit_exhausts_the_run(run_script: RunScript, twenty_tokens: str) -> None:
    outcome = await run_script(SEQUENTIAL, fixtures=twenty_tokens, budget={"tokens": {"soft": 30, "hard": 50}})
    assert outcome.state == "budget_exhausted"
    assert outcome.error == {"code": "BUDGET_EXHAUSTED",
                             "message": "Budget version 1 exhausted: tokens usage=60 hard=50"}
    assert outcome.usage["tokens"] == 60, "the third answer overshoots and is accepted"
    assert _event_types(outcome.view) == ["soft_crossed", "hard_overrun", "hard_exhausted"]
    assert len([a for a in outcome.agents if a.state == "completed"]) == 3


async def test_cost_limit(run_script: RunScript, twenty_tokens: str) -> None:
    record = await run_script(SEQUENTIAL, fixtures=twenty_tokens, budget={"costUsd": {"hard": 0.5}})
    assert record.state == "budget_exhausted"
    assert record.error is not None
    assert record.error["message"] == "Budget version 1 exhausted: costUsd usage=0.5 hard=0.5"


async def test_launch_limit_counts_attempts(run_script: RunScript) -> None:
    outcome = await run_script(SEQUENTIAL, budget={"agentLaunches": {"soft": 1, "hard": 2}})
    assert outcome.state == "budget_exhausted"
    assert outcome.usage["agentLaunches"] == 2
    assert [a.state for a in outcome.agents] == ["completed", "completed", "failed"]


async def test_duration_limit(run_script: RunScript, project: Path) -> None:
    slow = write_fixtures(project, {"defaults": {"latencyMs": 120}})
    outcome = await run_script(SEQUENTIAL, fixtures=slow, budget={"durationMs": {"hard": 150}})
    assert outcome.state == "budget_exhausted"
    assert outcome.error is not None and "durationMs usage=" in outcome.error["message"]


async def test_exhaustion_is_catchable_by_the_script(run_script: RunScript, twenty_tokens: str) -> None:
    script = 'await agent("a"); try { await agent("b") } catch (e) { return [e.code, e.failedAt ?? null] }'
    record = await run_script(script, fixtures=twenty_tokens, budget={"tokens": {"hard": 20}})
    # the script caught the error but budgeted work was attempted after hard exhaustion
    assert record.state == "budget_exhausted"
    assert record.error == {"code": "BUDGET_EXHAUSTED",
                            "message": "Budgeted work was attempted after hard exhaustion"}


def _answer(reply: ControlOutcome) -> tuple[str, bool | None, str | None]:
    return reply.state, reply.approved, reply.reason


async def test_resume_unchanged_is_refused_and_patch_needs_approval(runs: Runs, twenty_tokens: str) -> None:
    run_id = await runs.launch(SEQUENTIAL, fixtures=twenty_tokens, budget={"tokens": {"hard": 50}})
    await runs.finish(run_id)
    with pytest.raises(WorkflowError, match="Every exhausted hard budget must be raised above retained usage"):
        await runs.resume(run_id)
    with pytest.raises(WorkflowError, match="Every exhausted hard budget"):
        await runs.resume(run_id, {"tokens": {"hard": 55}})
    reply = await runs.resume(run_id, {"tokens": {"hard": 1000}})
    assert reply.state == "budget_exhausted" and reply.proposal_id is not None
    assert reply.message is not None and "requires approval" in reply.message
    assert (await runs.decide(run_id, "nope", True)).reason == "proposal_not_pending"
    assert _answer(await runs.decide(run_id, reply.proposal_id, True)) == ("running", True, "approved")
    await runs.until(run_id, lambda v: v.state != "budget_exhausted")
    outcome = await runs.finish(run_id)
    assert outcome.state == "completed", outcome.error
    assert outcome.view.budget.version == 2
    assert outcome.result == [f"[scripted] step {n}" for n in range(1, 6)]
    assert [a.attempts for a in outcome.agents if a.state == "completed"] == [1] * 5, \
        "the three journaled agents were replayed, not re-run"
    types = _event_types(outcome.view)
    assert types[:3] == ["hard_overrun", "hard_exhausted", "adjustment_requested"]
    assert "adjustment_approved" in types


async def test_rejected_proposal_leaves_the_run_exhausted(runs: Runs, twenty_tokens: str) -> None:
    run_id = await runs.launch(SEQUENTIAL, fixtures=twenty_tokens, budget={"tokens": {"hard": 50}})
    await runs.finish(run_id)
    reply = await runs.resume(run_id, {"tokens": None})
    assert reply.proposal_id is not None
    answer = await runs.decide(run_id, reply.proposal_id, False)
    assert _answer(answer) == ("budget_exhausted", False, "rejected")
    view = await runs.view(run_id)
    assert view.state == "budget_exhausted"
    assert _event_types(view)[-1] == "adjustment_rejected"


async def test_invalid_budget_is_rejected_at_launch(runs: Runs) -> None:
    with pytest.raises(WorkflowError) as err:
        await runs.launch("return 1", budget={"tokens": {"soft": 5, "hard": 5}})
    assert (err.value.code, err.value.message) == ("INVALID_METADATA", "tokens.soft must be less than hard")
