"""One step of a Temporal run: re-execute the script against the workflow's journal until it blocks.

The step reuses the embedded engine whole (`ActiveRun`, the worker sandbox, `AgentRunner`, the
budget tracker) on a scratch store seeded with the journal. Its backend answers attempts whose
outcome the workflow already has and parks the others; once the script waits only on parked
attempts and checkpoints, the step stops the worker and returns what it waits for. A step may
return before the script reached every call (it cannot see the script's CPU work): the workflow
then finds the rest at its next step, so this costs parallelism, never correctness.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from piflow.config.model_refs import ModelRef
from piflow.engine import events
from piflow.engine.backends.base import AttemptControl, AttemptRequest, Usage
from piflow.engine.environment import load_environment
from piflow.engine.extensions import ExtensionRegistry, load_extensions
from piflow.engine.journal import checkpoint_path
from piflow.engine.lifecycle import RunState, WorktreeState
from piflow.engine.runs import ActiveRun
from piflow.engine.scheduler import FairScheduler
from piflow.engine.snapshot import resolution_context, script_body
from piflow.engine.store import AgentRecord, RunRecord, RunStore, WorktreeRecord
from piflow.engine.temporal.codec import check_agent_size
from piflow.engine.temporal.wire import (
    STEP_ORPHAN_SECONDS,
    STEP_WAIT_SECONDS,
    AttemptOutcome,
    ConversationHead,
    JournalEntry,
    PendingAttempt,
    PendingCheckpoint,
    RecordedSetup,
    StepInput,
    StepResult,
)
from piflow.engine.worktrees import RunWorktrees, branch_prefix, worktree_key
from piflow.errors import WorkflowError

QUIET_SECONDS = 0.15
"""How long the script must have asked nothing new before a step returns what it waits for."""
_POLL_SECONDS = 0.02
_extensions: ExtensionRegistry | None = None


@dataclass
class _Step:
    """A step running on this worker, and when a step activity last waited for it."""

    waited_at: float
    task: asyncio.Task[StepResult] = field(init=False)

    def abandoned(self) -> bool:
        return asyncio.get_running_loop().time() - self.waited_at > STEP_ORPHAN_SECONDS


_steps: dict[str, _Step] = {}


async def wait_step(step: StepInput, wait: float = STEP_WAIT_SECONDS) -> StepResult:
    """One step activity: start the step `step.step` unless it runs on this worker already, and return
    its result, or a `busy` one after `wait` seconds (the step goes on; the workflow lets its workflow
    task go and waits again). With `step.stop`, end the step: its script's worker is killed, and its
    extension functions' abort signal fires."""
    loop = asyncio.get_running_loop()
    for key, other in list(_steps.items()):  # results nobody came back for (their workflow moved or ended)
        if other.task.done() and other.abandoned():
            del _steps[key]
    running = _steps.get(step.step)
    if step.stop:
        if running is not None:
            running.task.cancel()
            await asyncio.wait({running.task})
            _steps.pop(step.step, None)
        return StepResult(finished=False)
    if running is None or running.task.cancelled():  # a step given up as abandoned runs again
        running = _steps[step.step] = _Step(loop.time())
        running.task = loop.create_task(run_step(step, running.abandoned))
    running.waited_at = loop.time()
    done, _ = await asyncio.wait({running.task}, timeout=wait)
    running.waited_at = loop.time()
    if not done:
        return StepResult(finished=False, busy=True)
    _steps.pop(step.step, None)
    return running.task.result()


def request_to_json(request: AttemptRequest) -> dict[str, Any]:
    data = dataclasses.asdict(request)
    data["tools"] = list(request.tools)
    return data


def request_from_json(data: dict[str, Any]) -> AttemptRequest:
    return AttemptRequest(**{**data, "model": ModelRef(**data["model"]), "tools": tuple(data["tools"])})


class _Discovery(FairScheduler):
    """No permits in a step: every agent the script starts is discovered at once, and the
    workflow applies the run's concurrency when it schedules the attempts."""

    async def acquire(self, run_id: str) -> None:
        return None

    def release(self, run_id: str) -> None:
        return None


class _WorkerWorktrees(RunWorktrees):
    """A step makes no worktree: the worker that runs an attempt checks out its scope's branch in
    its own clone (`attempt.py`), so the step only names the scope (`PendingAttempt.worktree_owner`)."""

    async def ensure_async(self, owner: str) -> tuple[WorktreeRecord, bool]:
        branch = f"{branch_prefix(self.run_id)}/{worktree_key(self.run_id, owner)}"
        return WorktreeRecord(run_id=self.run_id, owner=owner, path="", branch=branch, base="",
                              cwd=str(self._launch_cwd), state=WorktreeState.READY), False

    async def commit_attempt_async(self, owner: str) -> None:
        return None  # the worker committed and pushed the attempt's work


class _ParkingBackend:
    """Answers attempts with the outcomes the workflow recorded; parks the rest."""

    name = "temporal"

    def __init__(self, outcomes: list[AttemptOutcome]) -> None:
        self.outcomes = {(o.path, o.attempt): o for o in outcomes}
        self.parked: dict[tuple[str, int], PendingAttempt] = {}
        self.run: ActiveRun | None = None

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        assert self.run is not None
        runner = self.run.agents[request.agent_id]
        key = (runner.journal_path, request.attempt)
        outcome = self.outcomes.get(key)
        if outcome is None:
            control.before_turn()  # the budget gate every backend passes first, here where the run's usage is
            pending = PendingAttempt(
                path=runner.journal_path,
                attempt=request.attempt,
                request=request_to_json(request),
                timeout_ms=runner.spec.timeout_ms,
                label=request.label,
                role=request.role,
                model=str(request.model),
                worktree_owner=runner.record.worktree_owner,
                conversation_state=control.conversation_state() if request.conversation else None,
            )
            check_agent_size(pending, f"the prompt of agent {request.label}")  # it travels in payloads
            self.parked[key] = pending
            await anyio.sleep_forever()
        assert outcome is not None
        if outcome.system_prompt is not None:
            control.system_prompt(outcome.system_prompt)
        if outcome.transcript_path is not None:
            control.transcript(outcome.transcript_path, outcome.session_id)
        if outcome.conversation_head is not None:
            control.save_conversation_state(outcome.conversation_head)
        control.after_turn(Usage(outcome.tokens_input, outcome.tokens_output, cost_usd=outcome.cost_usd), True)
        if outcome.error is not None:
            if outcome.error["code"] == "BUDGET_EXHAUSTED":
                control.before_turn()  # the worker's gate stopped it: record the exhaustion in the run
            raise WorkflowError(outcome.error["code"], outcome.error["message"])
        return outcome.value


def worker_extensions() -> ExtensionRegistry:
    """The extensions installed on this worker, loaded once (steps and attempts share them)."""
    global _extensions
    if _extensions is None:
        _extensions = load_extensions()
        _extensions.frozen = True
    return _extensions


def _seed(store: RunStore, step: StepInput) -> RunRecord:
    start = step.start
    snapshot = start.snapshot
    record = RunRecord(
        id=start.run_id,
        workflow_name=start.workflow_name,
        cwd=start.cwd,
        state=RunState.RUNNING,
        concurrency=start.concurrency,
        backend=str(snapshot.get("backend") or "scripted"),
        script_path=start.script_path,
        budget=start.budget,
        budget_version=start.budget_version,
    )
    with store.batch():
        store.create_run(record, snapshot["script"], snapshot)
        store.update_run(start.run_id, usage=step.usage)
        for entry in step.journal:
            store.journal_put(start.run_id, entry.path, entry.value, entry.kind)
        for event in step.budget_events:
            store.add_budget_event(start.run_id, event)
        for head in step.conversations:
            store.put_conversation_head(start.run_id, head.conversation, head.turn, head.state)
    stored = store.get_run(start.run_id)
    assert stored is not None
    return stored


async def run_step(step: StepInput, abandoned: Callable[[], bool]) -> StepResult:
    """Execute the script from the top against `step.journal`; see the module docstring. A step that
    is `abandoned` stops as a cancelled one does."""
    start = step.start
    env = load_environment(start.cwd)
    with tempfile.TemporaryDirectory(prefix="piflow-step-") as scratch, \
            RunStore.open(Path(scratch) / "runs.db") as store:
        record = _seed(store, step)
        backend = _ParkingBackend(step.outcomes)
        run = ActiveRun(
            record,
            script_body(start.snapshot["script"]),
            start.snapshot,
            store=store,
            bus=events.EventBus(),
            scheduler=_Discovery(),
            backend=backend,
            resolution=resolution_context(start.snapshot, env),
            resumed=False,
            notify=lambda _run, _message, _kind: None,
            extensions=worker_extensions(),
        )
        run.worktrees = _WorkerWorktrees(run.id, start.cwd, scratch)
        backend.run = run

        async def drive() -> Any:
            with run.scope:
                return await run.execute()

        task = asyncio.ensure_future(drive())
        try:
            runaway = not await _until_blocked(task, run, backend, store, abandoned, start.step_limit)
        except asyncio.CancelledError:  # the run stopped: kill the script's worker, abort its functions' signal
            run.scope.cancel()
            await asyncio.wait({task})
            raise
        result = StepResult(finished=task.done() or runaway, phase=run.phase)
        run.flush()
        waiting_paths = {key.rsplit("@", 1)[0] for key in step.waiting}
        agents = [_agent_json(agent) for agent in store.agents(start.run_id)  # before cancelling settles them
                  if agent.journal_path not in waiting_paths]
        if not task.done():
            run.scope.cancel()
        try:
            value = await task
            if result.finished and run.budget.hard_exhausted_now:
                raise WorkflowError("BUDGET_EXHAUSTED", "Budgeted work was attempted after hard exhaustion")
            result.value = value
        except WorkflowError as exc:
            if result.finished:
                result.error = exc.to_json()
        if runaway:
            result.value, result.error = None, WorkflowError("WORKER_UNRESPONSIVE", (
                f"The script ran {start.step_limit:g} seconds without waiting for an agent or a checkpoint "
                "(a runaway loop?); a run on Temporal must wait within that time")).to_json()
        seeded = {entry.path for entry in step.journal}
        answers = {path: outcome for (path, _), outcome in backend.outcomes.items() if outcome.error is None}
        result.journal = [_entry(path, kind, value, answers.get(path))
                          for path, (kind, value) in store.operations(start.run_id).items() if path not in seeded]
        if not result.finished:
            waiting = set(step.waiting)
            result.attempts = [p for p in backend.parked.values() if f"{p.path}@{p.attempt}" not in waiting]
            _choose_fixture_rules(result.attempts, start.snapshot, step.fixture_uses)
            result.checkpoints = [PendingCheckpoint(c.label, checkpoint_path(c.label), c.prompt, c.context)
                                  for c in store.awaiting_checkpoints(start.run_id)]
        result.usage = run.budget.snapshot_usage()
        result.budget_events = store.budget_events(start.run_id)
        result.agents = agents
        result.conversations = _new_heads(store, step, run)
        result.setups = _new_setups(store, step)
        return result


def _new_setups(store: RunStore, step: StepInput) -> list[RecordedSetup]:
    """The set-ups this step recorded for replayed attempts whose outcome has none yet (the
    workflow keeps them with the outcome; its system prompt is the outcome's own)."""
    from piflow.engine.store.tables import stored_setup

    unknown = {(o.path, o.attempt) for o in step.outcomes if o.setup is None}
    if not unknown:
        return []
    paths = {agent.id: agent.journal_path for agent in store.agents(step.start.run_id)}
    found = []
    for agent_id, attempts in store.run_attempts(step.start.run_id).items():
        for attempt in attempts:
            path = paths.get(agent_id)
            if path is not None and (path, attempt.attempt) in unknown and attempt.setup is not None:
                setup = dataclasses.replace(attempt.setup, system_prompt=None)
                found.append(RecordedSetup(path, attempt.attempt, stored_setup(setup)))
    return found


def _entry(path: str, kind: str | None, value: Any, answer: AttemptOutcome | None) -> JournalEntry:
    """A journaled operation for the step's result; an agent's output that is its successful attempt's
    outcome names that attempt instead (the workflow holds it), so a big output crosses Temporal once."""
    if answer is not None and _same(answer.value, value):
        return JournalEntry(path, kind, None, answer.attempt)
    return JournalEntry(path, kind, value)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (`1 == True` in Python, not in JSON)."""
    return bool(a == b) and json.dumps(a) == json.dumps(b)


def _choose_fixture_rules(attempts: list[PendingAttempt], snapshot: dict[str, Any], uses: dict[str, int]) -> None:
    """Choose each new attempt's scripted fixture rule here, in the order the script started them and
    from the run's counts the workflow keeps, as the embedded engine does at attempt start: a `times`
    rule then answers as often per run, whichever workers run the attempts."""
    from piflow.engine.backends.scripted import Fixtures

    path = snapshot.get("fixtures")
    if not attempts or not path or (snapshot.get("backend") or "scripted") != "scripted":
        return
    try:
        fixtures = Fixtures.load(path)
    except WorkflowError:
        return  # each attempt reports the fixture file's error itself
    used = {int(rule): count for rule, count in uses.items()}
    for pending in attempts:
        rule = fixtures.rule_for(request_from_json(pending.request), used)
        pending.fixture_rule = -1 if rule is None else rule
        if rule is not None:
            used[rule] = used.get(rule, 0) + 1


def _new_heads(store: RunStore, step: StepInput, run: ActiveRun) -> list[ConversationHead]:
    """The heads saved with turns this step journaled (the workflow keeps them for later turns)."""
    seeded = {(head.conversation, head.turn) for head in step.conversations}
    heads = []
    for name in sorted({runner.conversation for runner in run.agents.values() if runner.conversation is not None}):
        head = store.conversation_head(run.id, name)
        if head is not None and (name, head[0]) not in seeded:
            heads.append(ConversationHead(name, head[0], head[1]))
    return heads


def _agent_json(agent: AgentRecord) -> dict[str, Any]:
    return {"path": agent.journal_path, "label": agent.label or agent.name, "name": agent.name, "role": agent.role,
            "model": agent.model, "state": str(agent.state), "attempts": agent.attempts, "error": agent.error,
            "structuralPath": agent.structural_path, "tools": agent.tools}


async def _until_blocked(task: asyncio.Future[Any], run: ActiveRun, backend: _ParkingBackend, store: RunStore,
                         abandoned: Callable[[], bool], limit: float) -> bool:
    """True when the script finished, or has waited on parked operations only for QUIET_SECONDS;
    False when it did neither within `limit` seconds (a runaway script)."""
    loop = asyncio.get_running_loop()
    last: tuple[int, ...] = ()
    quiet_since = began = loop.time()
    while not task.done():
        if loop.time() - began > limit:
            return False
        await asyncio.wait({task}, timeout=_POLL_SECONDS)
        if abandoned():
            raise asyncio.CancelledError
        waiting = len(backend.parked) + len(run.waiting_checkpoints)
        seen = (waiting, store.last_event_seq(run.id), len(run.operations))
        if seen != last:
            last, quiet_since = seen, loop.time()
        elif waiting and loop.time() - quiet_since >= QUIET_SECONDS:
            return True
    return True
