"""`piflow worker`: serve a task queue with the run workflow, its steps and agent attempts."""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.worker import Worker

from piflow.engine.temporal.attempt import run_attempt
from piflow.engine.temporal.codec import check_agent_size
from piflow.engine.temporal.settings import TemporalSettings, connect, ensure_search_attributes
from piflow.engine.temporal.step import wait_step
from piflow.engine.temporal.wire import (
    ATTEMPT_ACTIVITY,
    STEP_ACTIVITY,
    AttemptInput,
    AttemptOutcome,
    StepInput,
    StepResult,
)
from piflow.engine.temporal.workflow import RunWorkflow
from piflow.errors import WorkflowError


@activity.defn(name=STEP_ACTIVITY)
async def step(inp: StepInput) -> StepResult:
    return await wait_step(inp)


class Attempts:
    """The attempt activity of one worker: it knows where this worker checks out worktrees."""

    def __init__(self, worktrees: str | None) -> None:
        self.worktrees = worktrees

    @activity.defn(name=ATTEMPT_ACTIVITY)
    async def attempt(self, inp: AttemptInput) -> AttemptOutcome:
        def beat(text: Any) -> None:
            activity.heartbeat(text)

        outcome = await run_attempt(inp, beat, self.worktrees)
        if outcome.error is None:
            try:  # an outcome, not an activity failure: retrying cannot make the output smaller
                check_agent_size(outcome, f"the output of agent {inp.pending.label}")
            except WorkflowError as exc:
                outcome.value, outcome.conversation_head = None, None
                outcome.error = {"code": exc.code, "message": exc.message}
        return outcome


async def serve(settings: TemporalSettings, *, max_agents: int, ready: Any = None) -> None:
    """Serve until cancelled; `max_agents` attempts run at once on this worker."""
    client = await connect(settings)
    await ensure_search_attributes(client, settings.namespace)
    worker = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[RunWorkflow],
        activities=[step, Attempts(settings.worktrees).attempt],
        max_concurrent_activities=max_agents,
    )
    if ready is not None:
        ready()
    await worker.run()
