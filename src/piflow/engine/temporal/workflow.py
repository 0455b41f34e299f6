"""The run workflow: the durable driver of one run on Temporal.

Its state is the run's journal (path → value) and the outcomes of agent attempts; it steps the
script (a local activity, `step.py`) to learn what the script waits for, schedules an activity per
agent attempt (id = the structural journal path and attempt number, at most `concurrency` at a
time), holds checkpoints until the `respond` update answers them, and steps again when anything
completed. Replaying this workflow replays recorded step results and activity outcomes, never an
agent. Pause, resume and stop are the `control` signal; cancelling the workflow stops the run. A
step answers within STEP_WAIT_SECONDS whether or not the script blocked, so a busy script never
keeps a signal or a query waiting; a stop ends it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from piflow.engine.temporal.wire import (
        ATTEMPT_ACTIVITY,
        BUDGET_UPDATE,
        CONTROL_SIGNAL,
        DETAILS_CHARACTERS,
        DETAILS_QUERY,
        HISTORY_CEILING_BYTES,
        PAYLOAD_LIMIT,
        PREVIEW_CHARACTERS,
        RESPOND_UPDATE,
        SNAPSHOT_QUERY,
        STATE_ATTRIBUTE,
        STEP_ACTIVITY,
        STEP_WAIT_SECONDS,
        WORKFLOW_NAME,
        AgentDetails,
        AnsweredCheckpoint,
        AttemptInput,
        AttemptOutcome,
        Carried,
        ConversationHead,
        JournalEntry,
        PendingAttempt,
        PendingCheckpoint,
        RunDetails,
        RunSnapshot,
        RunStart,
        StepInput,
        StepResult,
        megabytes,
        wire_size,
    )

STATE = SearchAttributeKey.for_keyword(STATE_ATTRIBUTE)
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
"""A worker that stops heartbeating an attempt for this long is presumed dead: the attempt moves on."""
_FINAL = {"BUDGET_EXHAUSTED": "budget_exhausted", "CANCELLED": "stopped"}
_CLOCK_STATES = ("running", "pausing")
"""The states whose wall time counts as the run's `durationMs` (spec H)."""


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
        self._answers: list[AnsweredCheckpoint] = []
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
        self._conversations: dict[str, ConversationHead] = {}
        self._running: dict[tuple[str, int], PendingAttempt] = {}
        self._draining = False
        self._clock_since: float | None = None
        self._proposals: dict[str, dict[str, Any]] = {}
        self._budget_changed = False
        self._uncarried_at: int | None = None
        """The history length at which the run's state was too big to carry: it goes on in this history."""
        self._fixture_uses: dict[str, int] = {}
        """Scheduled attempts per scripted fixture rule: `times` counts per run, on every worker."""
        self._steps = 0

    @workflow.run
    async def run(self, start: RunStart) -> RunSnapshot:
        self._start = start
        self._updated_at = start.created_at
        if start.carried is not None:
            self._resume_from(start.carried)
        if self._state in _CLOCK_STATES:
            self._clock_since = workflow.now().timestamp()
        try:
            await self._drive(start)
        except asyncio.CancelledError:  # the workflow was cancelled: the run stops, its record stays
            self._stop_now()
        snapshot = self.snapshot()
        size = wire_size(snapshot) if snapshot.result is not None else 0
        if size > PAYLOAD_LIMIT:  # Temporal would refuse the workflow's result, again and again
            self._result, self._error = None, {"code": "RPC_LIMIT_EXCEEDED", "message": (
                f"the run's result takes {megabytes(size)} compressed, more than the {megabytes(PAYLOAD_LIMIT)} a "
                "run on Temporal can return; return less (write large results to files and return their paths) "
                "or run the script on the embedded executor")}
            self._set_state("failed")
            snapshot = self.snapshot()
        return snapshot

    async def _drive(self, start: RunStart) -> None:
        while True:
            assert self._start is not None
            start = self._start  # a budget change after an exhaustion replaces it
            await workflow.wait_condition(lambda: not self._paused or self._stopping)
            if self._stopping:
                self._stop_now()
                return
            if self._history_full():
                size = self._carry_size(start)
                if size <= PAYLOAD_LIMIT:
                    await self._drain()
                    if not self._stopping:
                        size = self._carry_size(start)
                        if size <= PAYLOAD_LIMIT:
                            workflow.continue_as_new(replace(start, carried=self._carried()))
                        self._draining = False
                if size > PAYLOAD_LIMIT and self._history_at_ceiling():
                    self._finish(StepResult(finished=True, error={"code": "RPC_LIMIT_EXCEEDED", "message": (
                        f"the run's state ({len(self._journal)} journaled operations) takes {megabytes(size)} "
                        f"compressed, more than the {megabytes(PAYLOAD_LIMIT)} a run on Temporal carries into a "
                        "fresh history, and its history is full; keep agent outputs smaller (write large results "
                        "to files and return their paths) or run the script on the embedded executor")}))
                    return
                self._uncarried_at = workflow.info().get_current_history_length()
            self._news = self._answered = 0  # completions and answers from now on are news to this step
            step = await self._step(StepInput(
                start, list(self._journal.values()), self._open_outcomes(), self._journaled_usage(),
                self._budget_events, [f"{path}@{attempt}" for path, attempt in [*self._in_flight, *self._queued()]],
                list(self._conversations.values()), self._fixture_uses, step=self._step_key()))
            if step is None:
                self._stop_now()
                return
            self._absorb(step)
            if step.finished:
                if step.error is not None and step.error["code"] == "BUDGET_EXHAUSTED":
                    if await self._budget_raised(step):
                        continue
                    return
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

    # -- steps ---------------------------------------------------------------------------------
    async def _step(self, step: StepInput) -> StepResult | None:
        """Run one step of the script (None: the run stopped meanwhile). Each step activity waits for
        the step at most STEP_WAIT_SECONDS; between them a timer lets the workflow task go, so pause,
        stop and queries are handled while a busy script runs. A stop ends the step on its worker."""
        while True:
            result = await self._step_activity(step)
            if not result.busy:
                return None if self._stopping else result
            await asyncio.sleep(0.01)  # a timer: the workflow task completes, signals and queries get in
            if self._stopping:
                await self._step_activity(replace(step, stop=True))
                return None

    def _step_activity(self, step: StepInput) -> Awaitable[StepResult]:
        return workflow.execute_local_activity(
            STEP_ACTIVITY, step, result_type=StepResult,
            start_to_close_timeout=timedelta(seconds=STEP_WAIT_SECONDS + 60),  # it answers within the wait
            retry_policy=RetryPolicy(maximum_attempts=3))

    def _step_key(self) -> str:
        """Unique per step of this run: its step activities share it, replay computes the same."""
        self._steps += 1
        return f"{workflow.info().workflow_id}/{workflow.info().run_id}/{self._steps}"

    # -- what a step found ---------------------------------------------------------------------
    def _open_outcomes(self) -> list[AttemptOutcome]:
        """The outcomes a step needs: those of agents not journaled yet (a journaled agent replays its
        journaled value and never reaches the step's backend)."""
        return [o for o in self._outcomes.values() if o.path not in self._journal]

    def _settle_outcomes(self, path: str) -> None:
        """Drop the values of a journaled agent's outcomes: the journal holds its value, and the state
        the run carries when it continues as new holds each output once (Temporal's payload limit)."""
        for key, outcome in self._outcomes.items():
            if key[0] == path and (outcome.value is not None or outcome.conversation_head is not None):
                self._outcomes[key] = replace(outcome, value=None, conversation_head=None)

    def _queued(self) -> list[tuple[str, int]]:
        return [(p.path, p.attempt) for p in self._queue]

    def _journaled_usage(self) -> dict[str, Any]:
        """The usage of every attempt of a journaled agent: a step replays the usage of the others."""
        done = [o for o in self._outcomes.values() if o.path in self._journal]
        return {"tokens": sum(o.tokens_input + o.tokens_output for o in done), "costUsd": sum(o.cost_usd for o in done),
                "durationMs": self._usage_now()["durationMs"], "agentLaunches": len(done)}

    def _usage_now(self) -> dict[str, Any]:
        """The run's usage, `durationMs` measured by the workflow's clock (replay-safe)."""
        usage = dict(self._usage)
        if self._clock_since is not None:
            usage["durationMs"] += int((workflow.now().timestamp() - self._clock_since) * 1000)
        return usage

    def _absorb(self, step: StepResult) -> None:
        self._phase = step.phase or self._phase
        duration = self._usage["durationMs"]  # the workflow's clock, not the step's
        self._usage = step.usage or self._usage
        self._usage["durationMs"] = duration
        self._budget_events = step.budget_events
        for agent in step.agents:
            view = self._agents.setdefault(agent["path"], {"tokens": 0, "costUsd": 0.0})
            view.update({k: v for k, v in agent.items() if k not in ("tokens", "costUsd")})
        for head in step.conversations:
            self._conversations[head.conversation] = head
        for recorded in step.setups:
            if (outcome := self._outcomes.get((recorded.path, recorded.attempt))) is not None:
                outcome.setup = recorded.setup
        for entry in step.journal:
            if entry.attempt is not None:  # the value of that attempt's outcome: it travelled once
                entry = JournalEntry(entry.path, entry.kind, self._outcomes[(entry.path, entry.attempt)].value)
            self._journal[entry.path] = entry
            self._settle_outcomes(entry.path)
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
                if pending.fixture_rule is not None and pending.fixture_rule >= 0:
                    rule = str(pending.fixture_rule)
                    self._fixture_uses[rule] = self._fixture_uses.get(rule, 0) + 1
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

    # -- long runs -----------------------------------------------------------------------------
    def _history_full(self) -> bool:
        """Continue as new past `RunStart.history_limit` events (4,000 by default) or `history_bytes`
        (10 MiB), or when the server suggests it: Temporal fails a workflow whose history passes
        51,200 events or 50 MB. A run whose state was too big to carry goes on in its history and
        tries again `history_limit` events later, or at the ceiling."""
        assert self._start is not None
        info = workflow.info()
        length = info.get_current_history_length()
        if self._uncarried_at is not None:
            return length >= self._uncarried_at + self._start.history_limit or self._history_at_ceiling()
        return (length >= self._start.history_limit or info.get_current_history_size() >= self._start.history_bytes
                or info.is_continue_as_new_suggested())

    def _history_at_ceiling(self) -> bool:
        """Near the history Temporal terminates a workflow at (`RunStart.history_ceiling` events, or
        HISTORY_CEILING_BYTES): a run that cannot continue as new must end here, with piflow's error."""
        assert self._start is not None
        info = workflow.info()
        return (info.get_current_history_length() >= self._start.history_ceiling
                or info.get_current_history_size() >= HISTORY_CEILING_BYTES)

    def _carry_size(self, start: RunStart) -> int:
        """What the run's state takes compressed when carried into a fresh history (`wire.wire_size`)."""
        return wire_size(replace(start, carried=self._carried()))

    async def _drain(self) -> None:
        """Let the attempts in flight finish (a new history would lose their results); start none."""
        self._draining = True
        await workflow.wait_condition(lambda: not self._in_flight or self._stopping)
        await workflow.wait_condition(workflow.all_handlers_finished)

    def _carried(self) -> Carried:
        return Carried(list(self._journal.values()), list(self._outcomes.values()), list(self._conversations.values()),
                       list(self._queue), list(self._checkpoints.values()), list(self._agents.values()),
                       self._usage_now(), self._budget_events, self._state, self._phase, self._paused,
                       self._updated_at, self._answers, self._fixture_uses)

    def _resume_from(self, carried: Carried) -> None:
        """Take over the state the previous history of this run carried (`_carried`)."""
        self._journal = {entry.path: entry for entry in carried.journal}
        self._outcomes = {(o.path, o.attempt): o for o in carried.outcomes}
        self._conversations = {head.conversation: head for head in carried.conversations}
        self._queue = list(carried.queue)
        self._checkpoints = {c.label: c for c in carried.checkpoints}
        self._agents = {agent["path"]: agent for agent in carried.agents}
        self._usage, self._budget_events = carried.usage, carried.budget_events
        self._fixture_uses = dict(carried.fixture_uses)
        self._state, self._phase, self._paused = carried.state, carried.phase, carried.paused
        self._updated_at = carried.updated_at
        self._answers = list(carried.answered)

    # -- attempts ------------------------------------------------------------------------------
    def _launch(self) -> None:
        assert self._start is not None
        while len(self._in_flight) < self._start.concurrency and not (self._paused or self._draining):
            pending = self._next_attempt()
            if pending is None:
                return
            key = (pending.path, pending.attempt)
            self._agents[pending.path]["state"] = "running" if pending.attempt == 1 else "retrying"
            self._running[key] = pending
            self._in_flight[key] = asyncio.ensure_future(self._attempt(pending))

    def _next_attempt(self) -> PendingAttempt | None:
        """The first queued attempt whose `withWorktree` scope has none in flight: a scope's attempts
        take turns on its branch (each checks it out on its worker and pushes it back)."""
        busy = {p.worktree_owner for p in self._running.values() if p.worktree_owner is not None}
        for index, pending in enumerate(self._queue):
            if pending.worktree_owner is None or pending.worktree_owner not in busy:
                return self._queue.pop(index)
        return None

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
                             self._start.budget, self._usage_now()),
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
            self._running.pop(key, None)
        if self._paused and self._state == "pausing" and not self._in_flight:
            self._set_state("paused")  # the last running agent finished (spec F.1)
        if outcome.rate_limited is not None:  # as the embedded engine: pause; resuming runs the attempt again
            self._queue.insert(0, pending)
            self._agents[pending.path]["state"] = "queued"
            if not self._paused:
                self._paused = True
                self._set_state("paused")
            return
        self._outcomes[key] = outcome
        self._usage["tokens"] += outcome.tokens_input + outcome.tokens_output
        self._usage["costUsd"] += outcome.cost_usd
        view = self._agents.setdefault(pending.path, {"path": pending.path, "label": pending.label, "tokens": 0,
                                                      "costUsd": 0.0})
        view["tokens"] += outcome.tokens_input + outcome.tokens_output
        view["costUsd"] += outcome.cost_usd
        if outcome.error is None and self._paused:
            view["state"] = "completed"  # no step runs while paused: show what the finished agents did
        self._news += 1
        self._launch()

    def _cancel_in_flight(self) -> None:
        """Cancel the queued and running attempts; their agents show as cancelled (spec F: a settled
        run leaves none running), until a step after a budget change schedules them again."""
        for path, _attempt in [*self._in_flight, *self._queued()]:
            self._agents[path]["state"] = "cancelled"
        self._queue.clear()
        for task in self._in_flight.values():
            task.cancel()

    def _stop_now(self) -> None:
        self._cancel_in_flight()
        if self._state not in ("completed", "failed", "budget_exhausted"):
            self._set_state("stopped")  # a manual stop records no error, as on the embedded engine

    def _set_state(self, state: str) -> None:
        if state != self._state:
            now = workflow.now().timestamp()
            if self._clock_since is not None:
                self._usage["durationMs"] += int((now - self._clock_since) * 1000)
            self._clock_since = now if state in _CLOCK_STATES else None
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
        self._answers.append(AnsweredCheckpoint(checkpoint, approved))
        self._news += 1
        self._answered += 1
        return True

    @workflow.signal(name=CONTROL_SIGNAL)
    def control(self, action: str) -> None:
        """pause, resume or stop, as `piflow pause/resume/stop` ask. A pause lets the running agents
        finish (`pausing`, then `paused`) and starts no other; a budget-exhausted run can only stop."""
        if self._state in ("completed", "failed", "stopped") or (
                self._state == "budget_exhausted" and action != "stop"):
            return
        if action == "pause" and self._state == "running":
            self._paused = True
            self._set_state("pausing" if self._in_flight else "paused")
        elif action == "resume" and self._paused:
            self._paused = False
            self._set_state("running")
            self._launch()
        elif action == "stop":
            self._stopping = True
            self._news += 1

    @workflow.update(name=BUDGET_UPDATE)
    def budget(self, action: str, proposal_id: str | None = None, limits: dict[str, Any] | None = None) -> str:
        """Change the budget of an exhausted run (spec H; `TemporalRuns.resume` validated and merged it):
        `propose` a relaxed one (recorded, waiting for `approve`/`reject` of `proposal_id`), `apply` a
        tightened or unchanged one at once. Returns the run's state; `not_pending` answers no proposal,
        `not_budget_exhausted` a run that is not exhausted (any more)."""
        assert self._start is not None
        if action in ("approve", "reject"):
            proposal = self._proposals.pop(proposal_id or "", None)
            if proposal is None or self._state != "budget_exhausted":
                return "not_pending"
            kind = "adjustment_approved" if action == "approve" else "adjustment_rejected"
            self._budget_event(kind, proposal["consumed"], proposal["proposed"], proposalId=proposal_id)
            if action == "reject":
                return "budget_exhausted"
            self._change_budget(proposal["proposed"], self._start.budget_version + 1)
            return "running"
        if self._state != "budget_exhausted":
            return "not_budget_exhausted"
        current = self._start.budget or {}
        if action == "propose" and proposal_id is not None:
            consumed = self._usage_now()
            self._proposals[proposal_id] = {
                "kind": "budget", "proposalId": proposal_id, "runId": self._start.run_id, "consumed": consumed,
                "previous": current, "proposed": limits or {}, "budgetVersion": self._start.budget_version}
            self._budget_event("adjustment_requested", consumed, limits or {}, proposalId=proposal_id,
                               previous=current, proposed=limits or {})
            return "budget_exhausted"
        self._change_budget(limits, self._start.budget_version + (0 if (limits or {}) == current else 1))
        return "running"

    def _budget_event(self, kind: str, usage: dict[str, Any], limits: dict[str, Any], **extra: Any) -> None:
        assert self._start is not None
        self._budget_events.append({"type": kind, "budgetVersion": self._start.budget_version, "dimensions": [],
                                    "usage": usage, "limits": limits, "at": workflow.now().timestamp(), **extra})

    def _change_budget(self, limits: dict[str, Any] | None, version: int) -> None:
        assert self._start is not None
        self._start = replace(self._start, budget=limits or None, budget_version=version)
        self._budget_changed = True

    async def _budget_raised(self, step: StepResult) -> bool:
        """An exhausted run waits, durably and spending nothing, for a budget that lets it go on
        (True: step again; the attempts the old budget stopped run again) or for a stop (False)."""
        self._cancel_in_flight()
        self._error = step.error
        self._set_state("budget_exhausted")
        self._budget_changed = False
        await workflow.wait_condition(lambda: self._budget_changed or self._stopping)
        if self._stopping:
            self._error = None
            self._set_state("stopped")
            return False
        self._outcomes = {key: outcome for key, outcome in self._outcomes.items()
                          if outcome.error is None or outcome.error["code"] != "BUDGET_EXHAUSTED"}
        self._error = None
        self._set_state("running")
        return True

    @workflow.query(name=SNAPSHOT_QUERY)
    def snapshot(self) -> RunSnapshot:
        assert self._start is not None
        start = self._start
        return RunSnapshot(
            run_id=start.run_id, workflow_name=start.workflow_name, cwd=start.cwd, script_path=start.script_path,
            state=self._state, phase=self._phase, created_at=start.created_at, updated_at=self._updated_at,
            budget=start.budget, usage=self._usage_now(), budget_events=self._budget_events, error=self._error,
            result=self._result, agents=list(self._agents.values()), checkpoints=list(self._checkpoints.values()),
            budget_version=start.budget_version, proposals=list(self._proposals.values()),
            answered=list(self._answers),
        )

    @workflow.query(name=DETAILS_QUERY)
    def details(self, paths: list[str] | None, cap: int | None) -> RunDetails:
        """The launched script, and the outputs and attempts of the agents at `paths` (None: all).

        An output travels as its compact JSON text, at most `cap` characters of it (None: no cap of
        its own), and all of them together at most DETAILS_CHARACTERS: past that, each keeps its
        first PREVIEW_CHARACTERS, so the answer stays within Temporal's payload limits however big
        the run and its outputs.
        """
        assert self._start is not None
        wanted = list(self._agents) if paths is None else [path for path in paths if path in self._agents]
        attempts: dict[str, list[AttemptOutcome]] = {}
        for (path, _), outcome in sorted(self._outcomes.items()):
            attempts.setdefault(path, []).append(replace(outcome, value=None, conversation_head=None))
        running: dict[str, list[int]] = {}
        for path, attempt in sorted(self._in_flight):
            running.setdefault(path, []).append(attempt)
        left = DETAILS_CHARACTERS
        found = []
        for path in wanted:
            entry = self._journal.get(path)
            text = None if entry is None else json.dumps(entry.value, separators=(",", ":"))
            size = 0 if text is None else len(text)
            if text is not None:
                text = text[:max(min(cap if cap is not None else size, left), PREVIEW_CHARACTERS)]
                left = max(left - len(text), 0)
            found.append(AgentDetails(path, text, size, attempts.get(path, []), running.get(path, [])))
        return RunDetails(str(self._start.snapshot.get("script") or ""), found)
