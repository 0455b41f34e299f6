"""One live run: its lifecycle, budget, journal, checkpoints and the worker executing its script."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from piflow.engine import events
from piflow.engine.budgets import BudgetTracker
from piflow.engine.calls import CallServer, checkpoint_notice
from piflow.engine.extensions import ExtensionRegistry, resolve_variables
from piflow.engine.functions import FunctionCalls
from piflow.engine.journal import OperationKind, checkpoint_path
from piflow.engine.lifecycle import RESUMABLE, CheckpointState, RunState
from piflow.engine.operations import Operations
from piflow.engine.resolution import ResolutionContext
from piflow.engine.run_lifecycle import RunLifecycle
from piflow.engine.scheduler import FairScheduler
from piflow.engine.store import RunRecord, RunStore, StoreError
from piflow.engine.subagents.deadline import workflow_deadline
from piflow.engine.worker.boundary import malformed_call
from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.protocol import FunctionCall
from piflow.engine.worktrees import RunWorktrees
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.backends.base import AgentBackend

_CLOCK_STATES = frozenset({RunState.RUNNING, RunState.PAUSING})
"""While a run is in these states its budget's duration clock runs."""


class GroupCommit:
    """One group commit: the writes staged in one event-loop tick, and how their transaction ended.

    Each commit fails or succeeds on its own: a failed one fails only the operations whose writes
    it held, and the next one starts clean.
    """

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: WorkflowError | None = None

    async def wait(self) -> None:
        """Return once committed; raise what made the commit fail."""
        await self.done.wait()
        if self.error is not None:
            raise self.error


class ActiveRun:
    """The in-memory side of a run this process owns; every change is persisted as it happens."""

    def __init__(
        self,
        record: RunRecord,
        script_body: str,
        snapshot: dict[str, Any],
        *,
        store: RunStore,
        bus: events.EventBus,
        scheduler: FairScheduler,
        backend: AgentBackend,
        resolution: ResolutionContext,
        resumed: bool,
        notify: Callable[[ActiveRun, str, str], None],
        extensions: ExtensionRegistry,
    ) -> None:
        self.id = record.id
        self.record = record
        self.workflow_name = record.workflow_name
        self.cwd = record.cwd
        self.body = script_body
        self.snapshot = snapshot
        self.store = store
        self.bus = bus
        self.scheduler = scheduler
        self.backend = backend
        self.resolution = resolution
        self.resumed = resumed
        self._notify = notify
        self.extensions = extensions
        self.operations = Operations(store, record.id)
        self.agents: dict[str, Any] = {}
        self.phase = record.phase
        self.error: dict[str, Any] | None = None
        self.result: Any = None
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.lease_lost = False
        self.store_failure: StoreError | None = None
        """Set when a write of this run failed (a full disk): the run stops, `interrupted` and resumable."""
        self.worktrees = RunWorktrees(record.id, record.cwd, store.run_dir(record.id), store)
        self.worker: WorkerProcess | None = None
        """The worker the engine spawned for this execution while it prepared it (else one is spawned here)."""
        self.waiting_checkpoints: dict[str, anyio.Event] = {}
        self.functions: FunctionCalls | None = None
        """The extension function calls of the current execution (made when it starts)."""
        self.variables: dict[str, Any] | None = None
        """Variables the launch resolved before it saved the run; None: resolve them when executing."""
        self._batch_depth = 0
        self._staged: list[Callable[[], None]] = []
        self._stage_ready = anyio.Event()
        self._next_commit = GroupCommit()
        self._agent_counter: int | None = None
        self._pending: list[events.Event] = []
        self._progress_listeners: list[Callable[[ActiveRun], None]] = []
        self.budget = BudgetTracker(
            record.budget,
            record.budget_version,
            record.usage,
            store.budget_events(record.id),
            on_event=self._budget_event,
        )
        self.lifecycle = RunLifecycle(record.state, self._on_transition)
        if record.state in _CLOCK_STATES:
            self.budget.clock(True)

    # -- persistence helpers ----------------------------------------------------------------
    @property
    def worker_log(self) -> Path:
        """Where the worker's stderr goes: a Python traceback belongs in a file, never on a terminal."""
        return self.store.run_dir(self.id) / "worker.log"

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction; events are published and operations replayable only after it commits."""
        self._batch_depth += 1
        try:
            with self.store.batch():
                yield
        except BaseException as exc:
            if self._batch_depth == 1:
                self._pending.clear()
                self.operations.rolled_back()
            if isinstance(exc, StoreError):
                self.store_failed(exc)
            raise
        finally:
            self._batch_depth -= 1
        if self._batch_depth == 0:
            self.operations.committed()
            pending, self._pending = self._pending, []
            for event in pending:
                self.bus.publish(event)

    def store_failed(self, exc: StoreError) -> None:
        """Stop the run at its first failed write: going on would do work that cannot be journaled."""
        if self.store_failure is None:
            self.store_failure = exc
            self.scope.cancel()

    def emit(self, kind: str, extra: dict[str, Any]) -> None:
        payload = {**events.base_payload(self.record), **extra}
        self._publish(events.Event(self.store.append_event(self.id, kind, payload), self.id, kind, payload))

    def _publish(self, event: events.Event) -> None:
        if self._batch_depth:
            self._pending.append(event)
        else:
            self.bus.publish(event)

    def _budget_event(self, event: dict[str, Any]) -> None:
        published = record_budget_event(self.store, self.record, event)
        if published is not None:
            self._publish(published)

    # -- group commit ------------------------------------------------------------------------
    def stage(self, write: Callable[[], None]) -> GroupCommit:
        """Queue store writes; everything staged in one event-loop tick commits in one transaction.

        Agents stage their bookkeeping here and wait for the returned commit before a result
        reaches the script, so a journaled value is durable before anything depends on it.
        """
        self._staged.append(write)
        self._stage_ready.set()
        return self._next_commit

    def flush(self) -> None:
        writes, self._staged = self._staged, []
        if not writes:
            return
        commit, self._next_commit = self._next_commit, GroupCommit()
        try:
            with self.batch():
                for write in writes:
                    write()
        except WorkflowError as exc:  # rolled back whole: every waiter of this commit fails with it
            commit.error = exc
        finally:
            commit.done.set()

    async def write_forever(self) -> None:
        while True:
            await self._stage_ready.wait()
            self._stage_ready = anyio.Event()
            await anyio.lowlevel.checkpoint()
            self.flush()

    def next_agent_number(self) -> int:
        if self._agent_counter is None:
            self._agent_counter = self.store.next_agent_number(self.id) - 1
        self._agent_counter += 1
        return self._agent_counter

    def persist_usage(self) -> None:
        self.store.update_run(self.id, usage=self.budget.snapshot_usage())

    def on_progress(self, listener: Callable[[ActiveRun], None]) -> None:
        self._progress_listeners.append(listener)

    def progress_changed(self) -> None:
        for listener in self._progress_listeners:
            listener(self)

    # -- lifecycle --------------------------------------------------------------------------
    def _on_transition(self, previous: RunState, state: RunState, reason: str | None) -> None:
        if state != RunState.PAUSING:
            self.budget.clock(state in _CLOCK_STATES)
        fields: dict[str, Any] = {"state": state, **_budget_fields(self.budget)}
        if state in (RunState.RUNNING, RunState.COMPLETED):
            fields["error"] = None
            self.error = None
        with self.batch():
            self.store.update_run(self.id, **fields)
            payload: dict[str, Any] = {"previousState": previous, "state": state}
            if reason is not None:
                payload["reason"] = reason
                if reason.isupper():
                    payload["errorCode"] = reason
            self.emit(events.RUN_STATE_CHANGED, payload)
            if state == RunState.RUNNING and previous in RESUMABLE:
                self.emit(events.RUN_RESUMED, {})
        self.progress_changed()

    async def agent_cwd(self, owner: str | None) -> str:
        """The cwd of an agent: the launch cwd, or its `withWorktree` scope's worktree (made lazily)."""
        if owner is None:
            return self.cwd
        record, created = await self.worktrees.ensure_async(owner)
        if created:
            with self.batch():
                self.emit(events.WORKTREE_CREATED,
                          {"owner": owner, "branch": record.branch, "path": record.path, "base": record.base})
        return record.cwd

    async def provider_pause(self) -> None:
        self._notify(self, f"Workflow {self.workflow_name} paused: provider limit.", "notice")
        await self.lifecycle.provider_pause()

    def set_phase(self, name: str) -> None:
        if name == self.phase:
            return
        previous, self.phase = self.phase, name
        with self.batch():
            self.store.update_run(self.id, phase=name)
            payload: dict[str, Any] = {"phase": name}
            if previous is not None:
                payload["previousPhase"] = previous
            self.emit(events.PHASE_CHANGED, payload)
        self.progress_changed()

    # -- checkpoints (spec F.4) -------------------------------------------------------------
    async def checkpoint(self, value: Any, label: str | None) -> CheckpointState:
        """`label` is the worker's count of valid checkpoints by name, None when it found `value` invalid."""
        from piflow.analysis.checkpoint import validate_checkpoint

        checked = validate_checkpoint(value)
        if label is None:  # valid here, invalid in the worker: the script changed a built-in prototype
            raise malformed_call("checkpoint")
        path = checkpoint_path(label)
        answered = self.operations.check(OperationKind.CHECKPOINT, path)
        if answered is not None:
            return CheckpointState.APPROVED if answered.value else CheckpointState.REJECTED
        prompt, context = checked["prompt"], checked["context"]
        waiter = self.waiting_checkpoints.setdefault(label, anyio.Event())
        with self.batch():
            first = self.store.await_checkpoint(self.id, label, prompt, context)
            if first:
                self.emit(events.CHECKPOINT_STATE_CHANGED, {"name": label, "state": CheckpointState.AWAITING,
                                                            "prompt": prompt, "context": context})
            if self.lifecycle.state == RunState.RUNNING:  # one commit: no reader sees a running run awaiting
                self.lifecycle.await_input()
        await self.lifecycle.enter_awaiting_input()  # (a pausing or paused run: once it runs again)
        self._notify(self, checkpoint_notice(self.workflow_name, label, prompt, context), "checkpoint")
        self.sync_checkpoints()
        await waiter.wait()
        answer = self.operations.refresh(OperationKind.CHECKPOINT, path)
        self.waiting_checkpoints.pop(label, None)
        if not self.store.awaiting_checkpoints(self.id):
            self.lifecycle.resolve_awaiting_input()
        return CheckpointState.APPROVED if answer is not None and answer.value else CheckpointState.REJECTED

    def sync_checkpoints(self) -> None:
        """Wake waiters whose checkpoint was answered (here or by another process)."""
        if not self.waiting_checkpoints:
            return
        awaiting = {c.label for c in self.store.awaiting_checkpoints(self.id)}
        for label, waiter in list(self.waiting_checkpoints.items()):
            if label not in awaiting:
                waiter.set()

    async def call_function(self, server: CallServer, call: FunctionCall) -> Any:
        """An extension function call from the script (spec L.3): validated, journaled, replayed."""
        assert self.functions is not None and self.functions.server is server, "calls come from this execution"
        return await self.functions.call(call)

    # -- execution ---------------------------------------------------------------------------
    async def execute(self) -> Any:
        """Run the script once from the top; completed operations replay from the journal."""
        server = CallServer(self)
        functions = self.functions = FunctionCalls(self, server, self.extensions)
        variables, self.variables = self.variables, None
        if variables is None:
            variables = await resolve_variables(self.extensions, functions.facts, functions.signal)
        worker, self.worker = self.worker or WorkerProcess(log=self.worker_log), None
        outcome: list[Any] = []
        try:
            async with anyio.create_task_group() as tasks:
                timed_out = workflow_deadline(self, tasks.cancel_scope)  # pi-subagents' timeoutMs
                await worker.start(body=self.body, args=self.snapshot.get("args"),
                                   functions=sorted(self.extensions.functions), variables=variables,
                                   dialect=self.snapshot.get("dialect"), workflow=self.snapshot.get("workflow"))
                tasks.start_soon(server.flush_forever, worker.settle)
                tasks.start_soon(self.write_forever)
                async for call in worker.calls():
                    if not server.replayed(call):
                        tasks.start_soon(server.serve, call)
                try:
                    outcome.append(await worker.wait_done())
                except WorkflowError as exc:  # raised outside the task group, not as a group
                    outcome.append(exc)
                tasks.cancel_scope.cancel()
        finally:
            functions.signal.abort(WorkflowError("CANCELLED", "Workflow cancelled"))
            self.flush()
            with anyio.CancelScope(shield=True):
                await worker.kill()
        if not outcome and timed_out is not None:  # the deadline cancelled the execution
            raise timed_out
        if isinstance(outcome[0], WorkflowError):
            raise outcome[0]
        return outcome[0]


def record_budget_event(store: RunStore, record: RunRecord, event: dict[str, Any]) -> events.Event | None:
    """Persist a budget event once per (version, type, proposal); the bus event to publish, if new."""
    if not store.add_budget_event(record.id, event):
        return None
    payload = {**events.base_payload(record), **{k: v for k, v in event.items() if k != "at"}, "timestamp": event["at"]}
    return events.Event(store.last_event_seq(record.id), record.id, events.BUDGET_EVENT, payload)


def _budget_fields(budget: BudgetTracker) -> dict[str, Any]:
    state = budget.state_json()
    return {"budget": state["budget"], "budget_version": state["budgetVersion"], "usage": state["usage"]}


def result_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
