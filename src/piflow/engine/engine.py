"""The engine: launches, resumes and controls runs; owns their leases; recovers crashed runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from piflow.analysis.budget import (
    budget_relaxed,
    merge_budget,
    resume_budget_allowed,
    validate_budget,
    validate_budget_patch,
)
from piflow.engine import control, events
from piflow.engine.backends import DeferredBackend, create_backend
from piflow.engine.control import ControlOutcome
from piflow.engine.environment import LaunchEnvironment, load_environment
from piflow.engine.extensions import ExtensionRegistry, load_extensions
from piflow.engine.functions import launch_variables
from piflow.engine.lifecycle import ENDED, IRREVERSIBLE, RESUMABLE, DecisionState, RunState
from piflow.engine.owner import EarlyWorker, discard_worker, spawn_worker
from piflow.engine.runs import ActiveRun, record_budget_event
from piflow.engine.scheduler import FairScheduler
from piflow.engine.snapshot import build_snapshot, check_cold_resume, resolution_context, script_body
from piflow.engine.store import DecisionRecord, RunRecord, RunStore, StoreError
from piflow.engine.worker.client import WorkerProcess
from piflow.errors import WorkflowError

LEASE_RENEW_SECONDS = 2.0
CONTROL_POLL_SECONDS = 0.2
Notifier = Callable[[ActiveRun, str, str], None]


@dataclass(frozen=True)
class LaunchRequest:
    """What `piflow run` / the editor's ▶ Run asks for."""

    script: str
    cwd: str
    script_path: str | None = None
    workflow: str | None = None
    """A registered workflow's name (spec L.2), instead of `script`."""
    name: str | None = None
    description: str | None = None
    args: Any = None
    budget: Any = None
    concurrency: int | None = None
    backend: str | None = None
    fixtures: str | None = None


class Engine:
    """Use as `async with Engine(store) as engine:`; runs live inside the engine's task group."""

    def __init__(
        self,
        store: RunStore,
        *,
        bus: events.EventBus | None = None,
        environment: Callable[[str], LaunchEnvironment] = load_environment,
        notify: Notifier | None = None,
        extensions: ExtensionRegistry | None = None,
        early_worker: EarlyWorker | None = None,
    ) -> None:
        """`early_worker`: a worker the owner process spawned before importing the engine; the first
        launch or resume uses it instead of spawning one."""
        self.store = store
        self._early_worker = early_worker
        self.bus = bus or events.EventBus()
        self.scheduler = FairScheduler()
        self.token = os.urandom(16).hex()  # this engine's leases: as random as a UUID4, without `uuid`
        self._environment = environment
        self._notify_hook = notify
        self._extensions = extensions
        self._transcripts = store.location.parent / "transcripts"
        self.active: dict[str, ActiveRun] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._seen_seq = 0

    async def __aenter__(self) -> Engine:
        """Start the engine's own host task: runs outlive the task that entered the engine.

        The language server enters the engine in one handler and leaves it at shutdown in another,
        so the task group lives in a task of its own (the engine runs on asyncio, like pygls).
        """
        ready = anyio.Event()
        self._closed = anyio.Event()
        self._host = asyncio.ensure_future(self._host_main(ready))
        await ready.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
        self._closed.set()
        await self._host

    async def _host_main(self, ready: anyio.Event) -> None:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            self._seen_seq = self.store.last_event_seq()
            tasks.start_soon(self._maintain)
            ready.set()
            await self._closed.wait()
            tasks.cancel_scope.cancel()

    @property
    def extensions(self) -> ExtensionRegistry:
        """Installed extensions, loaded once; frozen when the first run starts (spec L.1)."""
        if self._extensions is None:
            self._extensions = load_extensions()
        self._extensions.frozen = True
        return self._extensions

    def _environment_for(self, cwd: str) -> LaunchEnvironment:
        env = self._environment(cwd)
        env = env.with_extension_tools(frozenset(self.extensions.tools))
        return replace(env, workflows={**self.extensions.workflows, **env.workflows})

    def _notify(self, run: ActiveRun, message: str, kind: str = "notice") -> None:
        """An engine message for people (`kind`: notice, checkpoint): logged as a run event."""
        with run.batch():
            run.emit(events.RUN_LOG, {"message": message, "notice": kind})
        if self._notify_hook is not None:
            self._notify_hook(run, message, kind)

    # -- launching ---------------------------------------------------------------------------
    async def launch(self, request: LaunchRequest) -> str:
        """Validate, snapshot and start a run; returns its id while it runs in the background."""
        worker = await self._spawn_worker()
        try:
            return await self._launch(request, worker)
        except BaseException:
            await discard_worker(worker)  # a failed launch or resume leaves no worker behind
            raise

    async def _spawn_worker(self) -> WorkerProcess:
        """The worker of the run about to start, spawned first (or earlier still, by the owner
        process): its interpreter and imports overlap the validation, snapshot and store writes
        that come before its script."""
        early = self._early_worker.take() if self._early_worker is not None else None
        return early if early is not None else await spawn_worker(self.store.location)

    async def _launch(self, request: LaunchRequest, worker: WorkerProcess) -> str:
        env = self._environment_for(request.cwd)
        budget = validate_budget(request.budget) if request.budget is not None else None
        concurrency = request.concurrency if request.concurrency is not None else env.concurrency
        self.scheduler.register("__probe__", concurrency)
        self.scheduler.unregister("__probe__")
        name = (request.name or "").strip() or request.workflow or _default_name(request.script_path)
        backend_name = request.backend or env.backend
        env = env.with_backend(backend_name)
        if backend_name == "pi":
            env = await _with_current_pi_tools(env)
        snapshot = build_snapshot(request, env, name=name, budget=budget, concurrency=concurrency,
                                  backend=backend_name)
        # The worker compiles while the run is being created; the snapshot keeps what it compiles.
        await worker.compile(script_body(snapshot["script"]), snapshot.get("dialect"))
        if worker.instrumentation is not None:
            snapshot["instrumented"] = worker.instrumentation.to_json()
        backend = create_backend(backend_name, request.fixtures or env.fixtures, env, self._transcripts,
                                 self.extensions.agent_tools())
        now = time.time()
        record = RunRecord(
            id=_new_id(),
            workflow_name=name,
            script_path=request.script_path,
            cwd=request.cwd,
            state=RunState.RUNNING,
            phase=None,
            error=None,
            budget=budget or None,
            budget_version=1,
            concurrency=concurrency,
            backend=backend_name,
            created_at=now,
            updated_at=now,
        )
        # Variables resolve before the run is saved: a failing one fails the launch and leaves no run (L.4).
        variables = await launch_variables(self.extensions, record.cwd, record.id, name, snapshot.get("args"))
        self.store.create_run(record, snapshot["script"], snapshot)
        self.store.acquire_lease(record.id, self.token, os.getpid())
        stored = self.store.get_run(record.id)
        assert stored is not None
        run = self._activate(stored, snapshot, backend, env, worker, resumed=False)
        run.variables = variables
        with run.batch():
            run.emit(events.RUN_STARTED, {})
        self._start(run)
        return record.id

    def _activate(
        self,
        record: RunRecord,
        snapshot: dict[str, Any],
        backend: Any,
        env: LaunchEnvironment,
        worker: WorkerProcess,
        *,
        resumed: bool,
    ) -> ActiveRun:
        self.scheduler.register(record.id, record.concurrency)
        run = ActiveRun(
            record,
            script_body(snapshot["script"]),
            snapshot,
            store=self.store,
            bus=self.bus,
            scheduler=self.scheduler,
            backend=backend,
            resolution=resolution_context(snapshot, env),
            resumed=resumed,
            notify=self._notify,
            extensions=self.extensions,
        )
        worker.move_log(run.worker_log)
        run.worker = worker
        self.active[record.id] = run
        return run

    def _start(self, run: ActiveRun) -> None:
        assert self._tasks is not None, "use the engine inside `async with`"
        self._tasks.start_soon(self._drive, run)

    async def _drive(self, run: ActiveRun) -> None:
        try:
            with run.scope:
                value = await run.execute()
                await self._complete(run, value)
            if run.store_failure is not None:
                self._fail(run, run.store_failure)
            elif run.scope.cancelled_caught and run.lifecycle.state not in ENDED and not run.lease_lost:
                run.lifecycle.terminal(RunState.STOPPED, "CANCELLED")
        except WorkflowError as exc:
            # The store may still be failing: then the run stays as last committed, and the next
            # process to look finds it `interrupted` (its owner is gone), resumable.
            with contextlib.suppress(StoreError):
                self._fail(run, run.store_failure or exc)
        finally:
            self.scheduler.unregister(run.id)
            self.active.pop(run.id, None)
            with contextlib.suppress(WorkflowError):
                self.store.release_lease(run.id, self.token)
            run.done.set()

    async def _complete(self, run: ActiveRun, value: Any) -> None:
        if run.budget.hard_exhausted_now:
            raise WorkflowError("BUDGET_EXHAUSTED", "Budgeted work was attempted after hard exhaustion")
        changes = await run.worktrees.changed_async()
        if changes:
            self._notify(run, "Changes: " + ", ".join(f"{w.branch} ({w.path})" for w in changes))
        with run.batch():
            self.store.update_run(run.id, result=value)
            run.result = value
            run.lifecycle.terminal(RunState.COMPLETED)
            run.emit(events.RUN_COMPLETED, {"result": True})

    def _fail(self, run: ActiveRun, exc: WorkflowError) -> None:
        state = run.lifecycle.state
        if state in ENDED:
            return
        error = exc.to_json()  # keeps `authored`: a script's own message is shown as written
        if run.store_failure is not None:
            final = RunState.INTERRUPTED  # nothing the run completed was lost: it can go on from there
        elif exc.code == "BUDGET_EXHAUSTED":
            final = RunState.BUDGET_EXHAUSTED
        elif exc.code == "CANCELLED" and not run.resumed:
            final = RunState.STOPPED
        else:
            final = RunState.FAILED
        with run.batch():
            self.store.update_run(run.id, error=error)
            run.error = error
            run.lifecycle.terminal(final, exc.code)
            if final == RunState.FAILED:
                run.emit(events.RUN_FAILED, {"error": {"code": exc.code,
                                                       "message": f"Workflow execution failed ({exc.code})"}})

    async def wait(self, run_id: str) -> RunRecord:
        """The run's record once it has ended here; raises the `StoreError` that stopped it, if one did."""
        run = self.active.get(run_id)
        if run is not None:
            await run.done.wait()
            if run.store_failure is not None:
                raise run.store_failure
        record = self.store.get_run(run_id)
        if record is None:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
        return record

    # -- control -----------------------------------------------------------------------------
    def _remote_owner(self, run_id: str) -> int | None:
        """The pid of another live process owning the run, if any."""
        return control.owner_pid(self.store, run_id, self.token)

    def _record(self, run_id: str) -> RunRecord:
        self.recover()
        record = self.store.get_run(self.store.resolve_run_id(run_id))
        assert record is not None
        return record

    def pause(self, run_id: str) -> RunState:
        record = self._record(run_id)
        run = self.active.get(record.id)
        if run is not None:
            run.lifecycle.pause()
            return run.lifecycle.state
        return control.pause(self.store, record)

    def stop(self, run_id: str) -> ControlOutcome:
        try:
            record = self._record(run_id)
        except WorkflowError:
            return ControlOutcome("unknown", run_id=run_id, stopped=False, reason="unknown_run")
        run = self.active.get(record.id)
        if run is None or record.state in IRREVERSIBLE:
            return control.stop(self.store, record, self.token)
        run.lifecycle.terminal(RunState.STOPPED, "stopped")
        run.scope.cancel()
        return ControlOutcome(RunState.STOPPED, run_id=record.id, stopped=True)

    def respond(
        self, run_id: str, *, name: str | None = None, proposal_id: str | None = None, approved: bool
    ) -> ControlOutcome:
        """Answer a checkpoint by label, or a budget proposal by id; the first answer wins."""
        record = self._record(run_id)
        if proposal_id is not None:
            return self._answer_proposal(record, proposal_id, approved)
        if not name:
            raise WorkflowError("INVALID_METADATA", "workflow_respond requires name or proposalId")
        reply, recorded = control.answer_checkpoint(self.store, record, name, approved)
        if recorded is not None:
            self.bus.publish(recorded)
            run = self.active.get(record.id)
            if run is not None:
                run.sync_checkpoints()
        return reply

    # -- resuming ----------------------------------------------------------------------------
    async def resume(self, run_id: str, budget_patch: Any = None) -> ControlOutcome:
        record = self._record(run_id)
        run = self.active.get(record.id)
        if run is not None:
            if budget_patch is not None:
                raise WorkflowError("RESUME_INCOMPATIBLE",
                                    "Only budget-exhausted runs can be resumed with a budget patch")
            run.lifecycle.resume()
            return ControlOutcome(run.lifecycle.state, run_id=record.id)
        if self._remote_owner(record.id) is not None:
            if record.state != RunState.PAUSED:
                raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot resume {record.state} run")
            control.request(self.store, record.id, "resume")
            return ControlOutcome(RunState.RUNNING, run_id=record.id)
        if record.state not in RESUMABLE:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot resume {record.state} run")
        if budget_patch is not None:
            return await self._resume_with_budget(record, budget_patch)
        if record.state == RunState.BUDGET_EXHAUSTED and not resume_budget_allowed(record.budget, record.usage or {}):
            raise WorkflowError("RESUME_INCOMPATIBLE",
                                "Every exhausted hard budget must be raised above retained usage or removed")
        await self._cold_resume(record)
        return ControlOutcome(RunState.RUNNING, run_id=record.id)

    async def _cold_resume(self, record: RunRecord, budget: Any = None, version: int | None = None) -> None:
        worker = await self._spawn_worker()
        try:
            env = self._environment_for(record.cwd)
            snapshot = self.store.snapshot(record.id)
            body = script_body(snapshot["script"]) if isinstance(snapshot.get("script"), str) else None
            if body is not None:  # (a snapshot without its script is refused by the checks below)
                await worker.compile(body, snapshot.get("dialect"), snapshot.get("instrumented"))
            # Variables resolve again for each execution (L.4); a failing one fails the resume, not the run.
            variables = await launch_variables(self.extensions, record.cwd, record.id, record.workflow_name,
                                               snapshot.get("args"))
            self._restart(record, env, snapshot, worker, budget, version, variables)
        except BaseException:
            await discard_worker(worker)  # a failed launch or resume leaves no worker behind
            raise

    def _restart(
        self,
        record: RunRecord,
        env: LaunchEnvironment,
        snapshot: dict[str, Any],
        worker: WorkerProcess,
        budget: Any,
        version: int | None,
        variables: dict[str, Any] | None = None,
    ) -> None:
        """Re-check the launch snapshot (spec F.3) while the worker compiles its script, then run it again
        from the top."""
        stored_snapshot = dict(snapshot)
        snapshot, warning = check_cold_resume(snapshot, env)
        if worker.instrumentation is not None:  # made now if the snapshot had none for this piflow
            snapshot["instrumented"] = worker.instrumentation.to_json()
        if snapshot != stored_snapshot:  # an unchanged one is not re-encoded (a 10,000-agent one is ~1 MB)
            self.store.replace_snapshot(record.id, snapshot)
        self.store.acquire_lease(record.id, self.token, os.getpid())
        control.cancel_abandoned_agents(self.store, record)
        if version is not None:
            self.store.update_run(record.id, budget=budget or None, budget_version=version)
        stored = self.store.get_run(record.id)
        assert stored is not None
        backend = DeferredBackend(lambda: create_backend(snapshot.get("backend") or env.backend,
                                                         snapshot.get("fixtures"), env, self._transcripts,
                                                         self.extensions.agent_tools()))
        run = self._activate(stored, snapshot, backend, env, worker, resumed=True)
        run.variables = variables
        if warning:
            with run.batch():
                run.emit(events.RUN_WARNING, {"message": warning})
                self.store.update_run(record.id, warnings=[*stored.warnings, warning])
        run.lifecycle.resume()
        self._start(run)

    async def _resume_with_budget(self, record: RunRecord, patch: Any) -> ControlOutcome:
        if record.state != RunState.BUDGET_EXHAUSTED:
            raise WorkflowError("RESUME_INCOMPATIBLE",
                                "Only budget-exhausted runs can be resumed with workflow_resume")
        current = record.budget or {}
        proposed = merge_budget(current, validate_budget_patch(patch))
        usage = record.usage or {}
        if not resume_budget_allowed(proposed, usage):
            raise WorkflowError("RESUME_INCOMPATIBLE",
                                "Every exhausted hard budget must be raised above retained usage or removed")
        if budget_relaxed(current, proposed):
            proposal_id = _new_id()
            payload = {"kind": "budget", "proposalId": proposal_id, "runId": record.id, "consumed": usage,
                       "previous": current, "proposed": proposed, "budgetVersion": record.budget_version}
            self.store.put_decision(DecisionRecord(run_id=record.id, proposal_id=proposal_id, kind="budget",
                                                   payload=payload, state=DecisionState.PENDING))
            self._record_budget_event(record, "adjustment_requested", usage, proposed,
                                      proposalId=proposal_id, previous=current, proposed=proposed)
            return ControlOutcome(RunState.BUDGET_EXHAUSTED, run_id=record.id, proposal_id=proposal_id,
                                  message=proposal_message(record, payload))
        version = record.budget_version + (0 if proposed == current else 1)
        await self._cold_resume(record, proposed, version)
        return ControlOutcome(RunState.RUNNING, run_id=record.id)

    def _record_budget_event(self, record: RunRecord, kind: str, usage: Any, limits: Any, **extra: Any) -> None:
        event = {"type": kind, "budgetVersion": record.budget_version, "dimensions": [], "usage": usage,
                 "limits": limits, "at": time.time(), **extra}
        published = record_budget_event(self.store, record, event)
        if published is not None:
            self.bus.publish(published)

    def _answer_proposal(self, record: RunRecord, proposal_id: str, approved: bool) -> ControlOutcome:
        decision = next((d for d in self.store.decisions(record.id) if d.proposal_id == proposal_id), None)
        if decision is None or not self.store.answer_decision(record.id, proposal_id, approved):
            return ControlOutcome(RunState.BUDGET_EXHAUSTED, approved=False, reason="proposal_not_pending")
        payload = decision.payload
        kind = "adjustment_approved" if approved else "adjustment_rejected"
        self._record_budget_event(record, kind, payload["consumed"], payload["proposed"], proposalId=proposal_id)
        if not approved:
            return ControlOutcome(RunState.BUDGET_EXHAUSTED, approved=False, reason="rejected")
        assert self._tasks is not None
        self._tasks.start_soon(self._cold_resume, record, payload["proposed"], record.budget_version + 1)
        return ControlOutcome(RunState.RUNNING, approved=True, reason="approved")

    # -- background maintenance -------------------------------------------------------------
    def recover(self) -> None:
        """Runs left running by a dead process become `interrupted` (reason `session_shutdown`)."""
        for record in self.store.list_runs():
            if record.state in ENDED or record.id in self.active:
                continue
            if self._remote_owner(record.id) is not None:
                continue
            control.set_state(self.store, record, RunState.INTERRUPTED, "session_shutdown")

    async def _maintain(self) -> None:
        renew_at = time.monotonic()
        while True:
            await anyio.sleep(CONTROL_POLL_SECONDS)
            if time.monotonic() >= renew_at:
                renew_at = time.monotonic() + LEASE_RENEW_SECONDS
                for run_id, run in list(self.active.items()):
                    try:
                        self.store.renew_lease(run_id, self.token)
                    except WorkflowError:  # another process took the run over: stop driving it here
                        run.lease_lost = True
                        run.scope.cancel()
            self._poll_requests()

    def _poll_requests(self) -> None:
        """Carry out what other processes asked of our runs: answers, pause, stop, resume."""
        new = self.store.events(after_seq=self._seen_seq)
        if not new:
            return
        self._seen_seq = new[-1].seq
        for event in new:
            run = self.active.get(event.run_id)
            if run is None:
                continue
            if event.type == events.CHECKPOINT_STATE_CHANGED:
                run.sync_checkpoints()
            elif event.type == events.CONTROL_REQUEST:
                action = event.payload.get("action")
                with contextlib.suppress(WorkflowError):
                    if action == "pause":
                        run.lifecycle.pause()
                    elif action == "resume":
                        run.lifecycle.resume()
                    elif action == "stop":
                        self.stop(run.id)

    async def shutdown(self) -> None:
        """Process exit: every unfinished run becomes `interrupted`, resumable later."""
        for run in list(self.active.values()):
            if run.lifecycle.state not in ENDED:
                with contextlib.suppress(WorkflowError):
                    run.lifecycle.terminal(RunState.INTERRUPTED, "interrupted")
            run.scope.cancel()
        for run in list(self.active.values()):
            with anyio.move_on_after(5, shield=True):
                await run.done.wait()


def proposal_message(record: RunRecord, payload: dict[str, Any]) -> str:
    import json

    def dump(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    pid = payload["proposalId"]
    return (
        f"Workflow {record.workflow_name} budget adjustment {pid} for run {record.id} requires approval. "
        f"Consumed usage: {dump(payload['consumed'])}. Previous limits: {dump(payload['previous'])}. "
        f"Proposed limits: {dump(payload['proposed'])}. Respond with piflow budget approve {record.id[:8]} {pid}."
    )


async def _with_current_pi_tools(env: LaunchEnvironment) -> LaunchEnvironment:
    """A launch on pi checks tools against what pi offers now: probed when the cache is stale. When pi
    cannot be asked the built-ins stand in (the agent then reports pi's own error)."""
    from piflow.engine.backends.pi import current_pi_tools

    try:
        tools = await current_pi_tools(env.agent_dir, Path(env.cwd), env.resource_policy)
    except WorkflowError:
        return env
    return env.with_pi_tools(tools.names)


def _new_id() -> str:
    """A new run or proposal id (a UUID4). `uuid` loads `platform` (~1.5 ms): a resume makes no id."""
    import uuid

    return str(uuid.uuid4())


def _default_name(script_path: str | None) -> str:
    if not script_path:
        return "workflow"
    base = os.path.basename(script_path)
    for suffix in (".workflow.js", ".js"):
        if base.endswith(suffix):
            return base[: -len(suffix)] or "workflow"
    return base
