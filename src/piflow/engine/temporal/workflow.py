"""The run workflow: the durable driver of one run on Temporal.

Its state is the run's journal (path → value) and the outcomes of agent attempts; it steps the
script (a local activity, `step.py`) to learn what the script waits for, schedules an activity per
agent attempt (id = the structural journal path and attempt number, at most `concurrency` at a
time), holds checkpoints until the `respond` update answers them, and steps again when anything
completed. Replaying this workflow replays recorded step results and activity outcomes, never an
agent. Pause, resume and stop are the `control` signal; cancelling the workflow stops the run.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from piflow.engine.temporal.wire import (
        ATTEMPT_ACTIVITY,
        CONTROL_SIGNAL,
        RESPOND_UPDATE,
        SNAPSHOT_QUERY,
        STATE_ATTRIBUTE,
        STEP_ACTIVITY,
        WORKFLOW_NAME,
        AttemptInput,
        AttemptOutcome,
        JournalEntry,
        PendingAttempt,
        PendingCheckpoint,
        RunSnapshot,
        RunStart,
        StepInput,
        StepResult,
    )

STATE = SearchAttributeKey.for_keyword(STATE_ATTRIBUTE)
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
"""A worker that stops heartbeating an attempt for this long is presumed dead: the attempt moves on."""
_FINAL = {"BUDGET_EXHAUSTED": "budget_exhausted", "CANCELLED": "stopped"}


@workflow.defn(name=WORKFLOW_NAME)
class RunWorkflow:
    def __init__(self) -> None:
        self._start: RunStart | None = None
        self._state = "running"
        self._phase: str | None = None
        self._journal: dict[str, JournalEntry] = {}
        self._outcomes: dict[tuple[str, int], AttemptOutcome] = {}
        self._agents: dict[str, dict[str, Any]] = {}
        self._checkpoints: dict[str, PendingCheckpoint] = {}
        self._queue: list[PendingAttempt] = []
        self._in_flight: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._news = 0
        self._answered = 0
        self._usage: dict[str, Any] = {"tokens": 0, "costUsd": 0, "durationMs": 0, "agentLaunches": 0}
        self._paused = False
        self._stopping = False
        self._result: Any = None
        self._error: dict[str, Any] | None = None
        self._updated_at = 0.0
        self._budget_events: list[dict[str, Any]] = []

    @workflow.run
    async def run(self, start: RunStart) -> RunSnapshot:
        self._start = start
        self._updated_at = start.created_at
        try:
            await self._drive(start)
        except asyncio.CancelledError:  # the workflow was cancelled: the run stops, its record stays
            self._stop_now()
        return self.snapshot()

    async def _drive(self, start: RunStart) -> None:
        while True:
            await workflow.wait_condition(lambda: not self._paused or self._stopping)
            if self._stopping:
                self._stop_now()
                return
            self._news = self._answered = 0  # completions and answers from now on are news to this step
            step = await workflow.execute_local_activity(
                STEP_ACTIVITY,
                StepInput(start, list(self._journal.values()), list(self._outcomes.values()), self._journaled_usage(),
                          self._budget_events,
                          [f"{path}@{attempt}" for path, attempt in [*self._in_flight, *self._queued()]]),
                result_type=StepResult,
                start_to_close_timeout=timedelta(minutes=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
            self._absorb(step)
            if step.finished:
                self._finish(step)
                return
            if not (self._in_flight or self._queue or self._checkpoints or self._news):
                self._finish(StepResult(finished=True, error={
                    "code": "INTERNAL_ERROR", "message": "The script waits for nothing piflow knows (a bug)"}))
                return
            self._launch()
            if not self._paused:
                self._set_state("running" if self._in_flight or not self._checkpoints else "awaiting_input")
            # Step again once something completed and the known attempts no longer fill the run's
            # slots (stepping sooner would only hold up the attempts waiting in the queue), or at once
            # for an answer or a stop.
            await workflow.wait_condition(
                lambda: self._stopping or self._answered > 0 or (self._news > 0 and not self._queue))

    # -- what a step found ---------------------------------------------------------------------
    def _queued(self) -> list[tuple[str, int]]:
        return [(p.path, p.attempt) for p in self._queue]

    def _journaled_usage(self) -> dict[str, Any]:
        """The usage of every attempt of a journaled agent: a step replays the usage of the others."""
        done = [o for o in self._outcomes.values() if o.path in self._journal]
        return {"tokens": sum(o.tokens_input + o.tokens_output for o in done), "costUsd": sum(o.cost_usd for o in done),
                "durationMs": 0, "agentLaunches": len(done)}

    def _absorb(self, step: StepResult) -> None:
        self._phase = step.phase or self._phase
        self._usage = step.usage or self._usage
        self._budget_events = step.budget_events
        for agent in step.agents:
            view = self._agents.setdefault(agent["path"], {"tokens": 0, "costUsd": 0.0})
            view.update({k: v for k, v in agent.items() if k not in ("tokens", "costUsd")})
        for entry in step.journal:
            self._journal[entry.path] = entry
            if entry.path in self._agents:
                self._agents[entry.path]["state"] = "completed"
        for checkpoint in step.checkpoints:
            if checkpoint.path not in self._journal:  # not answered while the step ran
                self._checkpoints.setdefault(checkpoint.label, checkpoint)
        known = set(self._queued())
        for pending in step.attempts:
            key = (pending.path, pending.attempt)
            if key not in self._in_flight and key not in self._outcomes and key not in known:
                self._queue.append(pending)
                self._agents.setdefault(pending.path, {"path": pending.path, "label": pending.label, "tokens": 0,
                                                       "costUsd": 0.0})["state"] = "queued"

    def _finish(self, step: StepResult) -> None:
        self._cancel_in_flight()
        if step.error is None:
            self._result = step.value
            self._set_state("completed")
        else:
            self._error = step.error
            self._set_state(_FINAL.get(step.error["code"], "failed"))

    # -- attempts ------------------------------------------------------------------------------
    def _launch(self) -> None:
        assert self._start is not None
        while self._queue and len(self._in_flight) < self._start.concurrency and not self._paused:
            pending = self._queue.pop(0)
            key = (pending.path, pending.attempt)
            self._agents[pending.path]["state"] = "running" if pending.attempt == 1 else "retrying"
            self._in_flight[key] = asyncio.ensure_future(self._attempt(pending))

    async def _attempt(self, pending: PendingAttempt) -> None:
        assert self._start is not None
        key = (pending.path, pending.attempt)
        snapshot = self._start.snapshot
        timeout = timedelta(hours=24) if pending.timeout_ms is None else timedelta(
            milliseconds=pending.timeout_ms) + HEARTBEAT_TIMEOUT
        try:
            outcome = await workflow.execute_activity(
                ATTEMPT_ACTIVITY,
                AttemptInput(pending, str(snapshot.get("backend") or "scripted"), snapshot.get("fixtures"),
                             self._start.budget, dict(self._usage)),
                result_type=AttemptOutcome,
                activity_id=f"{pending.path}@{pending.attempt}",
                start_to_close_timeout=timeout,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
            )
        except ActivityError as exc:
            if self._stopping or self._state in ("completed", "failed", "stopped", "budget_exhausted"):
                return
            outcome = AttemptOutcome(pending.path, pending.attempt, error={
                "code": "AGENT_FAILED", "message": str(exc.cause or exc)})
        finally:
            self._in_flight.pop(key, None)
        self._outcomes[key] = outcome
        self._usage["tokens"] += outcome.tokens_input + outcome.tokens_output
        self._usage["costUsd"] += outcome.cost_usd
        view = self._agents.setdefault(pending.path, {"path": pending.path, "label": pending.label, "tokens": 0,
                                                      "costUsd": 0.0})
        view["tokens"] += outcome.tokens_input + outcome.tokens_output
        view["costUsd"] += outcome.cost_usd
        self._news += 1
        self._launch()

    def _cancel_in_flight(self) -> None:
        self._queue.clear()
        for task in self._in_flight.values():
            task.cancel()

    def _stop_now(self) -> None:
        self._cancel_in_flight()
        if self._state not in ("completed", "failed", "budget_exhausted"):
            self._error = {"code": "CANCELLED", "message": "Workflow cancelled"}
            self._set_state("stopped")

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            workflow.upsert_search_attributes([STATE.value_set(state)])
        self._updated_at = workflow.now().timestamp()

    # -- what clients ask ------------------------------------------------------------------------
    @workflow.update(name=RESPOND_UPDATE)
    def respond(self, label: str, approved: bool) -> bool:
        """Answer a waiting checkpoint; False when it is not waiting (the first answer wins)."""
        checkpoint = self._checkpoints.pop(label, None)
        if checkpoint is None:
            return False
        self._journal[checkpoint.path] = JournalEntry(checkpoint.path, "checkpoint", approved)
        self._news += 1
        self._answered += 1
        return True

    @workflow.signal(name=CONTROL_SIGNAL)
    def control(self, action: str) -> None:
        """pause, resume or stop, as `piflow pause/resume/stop` ask."""
        if self._state in ("completed", "failed", "stopped", "budget_exhausted"):
            return
        if action == "pause":
            self._paused = True
            self._set_state("paused")
        elif action == "resume" and self._paused:
            self._paused = False
            self._set_state("running")
            self._launch()
        elif action == "stop":
            self._stopping = True
            self._news += 1

    @workflow.query(name=SNAPSHOT_QUERY)
    def snapshot(self) -> RunSnapshot:
        assert self._start is not None
        start = self._start
        return RunSnapshot(
            run_id=start.run_id, workflow_name=start.workflow_name, cwd=start.cwd, script_path=start.script_path,
            state=self._state, phase=self._phase, created_at=start.created_at, updated_at=self._updated_at,
            budget=start.budget, usage=self._usage, budget_events=self._budget_events, error=self._error,
            result=self._result, agents=list(self._agents.values()), checkpoints=list(self._checkpoints.values()),
        )
