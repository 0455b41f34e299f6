"""Serving a pi-subagents script's calls: `runs.run/all/steer/status`, `emit`, `console`, `state`.

One `SubagentCalls` per execution of a run (a replay builds it anew). The worker has already
checked what the spec makes the worker throw (keys, params shape, the JSON boundary); this side
decides what needs the run: agents and models, the fan-out limit, output paths, admission of a
`runs.all` batch as a whole before any child starts, and journaling. Children, steers, emits,
console lines and state writes are journaled operations, so a resumed run replays them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from piflow.engine import events
from piflow.engine.journal import OperationKind, child_path, structural_path
from piflow.engine.subagents.agents import SnapshotAgents
from piflow.engine.subagents.children import (
    ChildInfo,
    ChildPlan,
    check_output_collisions,
    child_run_id,
    output_path,
    refused_result,
    run_plan,
)
from piflow.engine.subagents.progress import SUBAGENT_EMIT
from piflow.engine.worker.subagents_protocol import ChildItem, ChildrenCall, EmitCall, StateCall, StatusCall, SteerCall
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun

STATE_LIMIT_BYTES: Final = 256 * 1024
CONSOLE_LIMIT_BYTES: Final = 4096


def _failure(message: str) -> WorkflowError:
    return WorkflowError("INVALID_METADATA", message)


class SubagentCalls:
    """The pi-subagents side of one worker execution."""

    def __init__(self, run: ActiveRun) -> None:
        self.run = run
        self.agents = SnapshotAgents.from_snapshot(run.snapshot.get("agents") or {}, run.resolution)
        limit = self.agents.settings.global_concurrency_limit
        self.limiter = anyio.CapacityLimiter(limit) if limit else None
        self.children: dict[str, ChildInfo] = {}
        """Every child this execution launched or replayed, by key."""
        self.by_run_id: dict[str, ChildInfo] = {}
        self.pending: dict[str, anyio.Event] = {}
        self.outputs: dict[Path, str] = {}
        self.spawned = 0
        self.state: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        aggregate = run.snapshot.get("output")
        self.aggregate = Path(run.cwd, aggregate).resolve() if isinstance(aggregate, str) else None

    def _next(self, what: str) -> int:
        n = self._counts[what] = self._counts.get(what, 0) + 1
        return n

    def next_lanes_call(self) -> int:
        """The number of a `runs.lanes` call in this execution (1, 2, …): its board's identity."""
        return self._next("lanes")

    # -- children -------------------------------------------------------------------------------
    async def launch(self, call: ChildrenCall) -> Any:
        """`runs.run` (one item, fail-fast) or `runs.all` (admitted whole, failures collected).

        A detached child (`runs.run` with `async: true`, sent as a one-item batch: the script already
        holds its running receipt) never fails the call: a refused one is its failed ChildResult,
        which `runs.status` shows.
        """
        first = call.items[0] if len(call.items) == 1 else None
        if call.batch and first is not None and isinstance(first.params, dict) and first.params.get("async") is True:
            try:
                return await self._launch(call)
            except WorkflowError as exc:
                refused = refused_result(first.key, first.params, exc)
                self.run.emit(events.RUN_WARNING, {"message": f"{first.key}: {exc.message}"})
                if first.key not in self.children:
                    self.children[first.key] = ChildInfo(first.key, str(refused.get("agent", "")), "", "", None,
                                                         result=refused)
                return [refused]
        return await self._launch(call)

    async def _launch(self, call: ChildrenCall) -> Any:
        plans = [self._plan(item, "runs.all item " + str(index) if call.batch else "runs.run")
                 for index, item in enumerate(call.items)]
        fresh = [plan for plan in plans if plan.key not in self.children]
        check_output_collisions(fresh, self.outputs, self.aggregate)
        settings = self.agents.settings
        limit = settings.max_subagent_spawns_per_run
        if fresh and self.spawned + len(fresh) > limit:
            raise _failure(
                f"Run fan-out limit reached at workflow[{fresh[0].key}] ({self.spawned}/{limit} used; this "
                f"admission group needs {len(fresh)}). No children from this admission group were started. "
                "Raise subagents.maxSubagentSpawnsPerRun in pi's settings.json or launch fewer children."
            )
        session = settings.max_subagent_spawns_per_session
        if fresh and session is not None and self.spawned + len(fresh) > session:
            # piflow runs outside any pi chat session: each run is its own session (as its own mission).
            raise _failure(f"Subagent spawn limit reached for this session ({self.spawned}/{session} used; this "
                           f"admission group needs {len(fresh)}). Raise subagents.maxSubagentSpawnsPerSession in "
                           "pi's settings.json or launch fewer children.")
        for plan in fresh:
            self.spawned += 1
            self.outputs[plan.output_path] = plan.key
            info = ChildInfo(plan.key, plan.agent, plan.run_id, plan.conversation, plan.model,
                             [*(plan.continues.run_ids if plan.continues else []), plan.run_id], turn=plan.turn)
            self.children[plan.key] = info
            self.by_run_id[plan.run_id] = info
        results: list[dict[str, Any]] = [{} for _ in plans]

        async def one(index: int, plan: ChildPlan) -> None:
            results[index] = await self._child(plan)

        async with anyio.create_task_group() as tasks:
            for index, plan in enumerate(plans):
                tasks.start_soon(one, index, plan)
        if call.batch:
            return results
        result = results[0]
        if not result["ok"]:
            raise WorkflowError("AGENT_FAILED", f"Run '{result['key']}' failed: {result.get('error')}")
        return results

    async def launch_child(self, key: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One child from params the worker validated, to its ChildResult (`ok` False when it failed).

        The entry point `runs.lanes` builds on.
        """
        outcome = await self.launch(ChildrenCall(0, (ChildItem(key, dict(params)),), True))
        result: dict[str, Any] = outcome[0]
        return result

    async def _child(self, plan: ChildPlan) -> dict[str, Any]:
        info = self.children[plan.key]
        waiter = self.pending.get(plan.key)
        if waiter is not None:  # the same invocation, launched again with the same params (A.3)
            await waiter.wait()
            assert info.result is not None
            return info.result
        if info.result is not None:
            return info.result
        waiter = self.pending[plan.key] = anyio.Event()
        result, agent_id = await run_plan(self.run, plan, self.agents, self.limiter)
        info.result, info.agent_id = result, agent_id
        waiter.set()
        self.pending.pop(plan.key, None)
        return result

    def _plan(self, item: ChildItem, label: str) -> ChildPlan:
        key, params = item.key, item.params
        if not isinstance(params, dict):
            raise _failure(f"{label} params must be an object.")
        earlier = self.children.get(key)
        resume = params.get("resume")
        continues: ChildInfo | None = None
        model: str | None
        if resume is not None:
            continues = self._resumed(resume, label)
            agent, model = continues.agent, continues.model
        else:
            named = params.get("agent")
            if not isinstance(named, str) or not named.strip():
                raise _failure(f"{label} requires agent (the name of an agent definition).")
            agent = named
            model = params.get("model") if isinstance(params.get("model"), str) else None
        task = params.get("task")
        if task is None:
            task = ""
        if not isinstance(task, str):
            raise _failure(f"{label} task must be a string.")
        definition = self.agents.definition(agent)
        self.agents.model(model, definition)  # UNKNOWN_MODEL before anything of the group starts
        run_id = child_run_id(self.run.id, key)
        conversation = continues.conversation if continues is not None else structural_path("child", run_id)
        if earlier is not None:
            run_id, conversation = earlier.run_id, earlier.conversation
        turn = continues.turn + 1 if continues is not None else 1
        if earlier is not None:
            turn = earlier.turn
        return ChildPlan(key, params, definition.name, task, run_id, conversation, model, continues,
                         output_path(self.run, key, params), turn)

    def _resumed(self, resume: Any, label: str) -> ChildInfo:
        """The child a `resume` continues: a run id of this workflow run, or a keyed receipt (A.10)."""
        if isinstance(resume, str):
            found = self.by_run_id.get(resume) or next(
                (info for info in self.by_run_id.values() if info.run_id.startswith(resume) and len(resume) >= 8), None)
            if found is None:
                raise _failure(f"{label} cannot resume '{resume}': no child of this workflow has that run id.")
            if found.result is None or not found.result.get("ok"):
                raise _failure(f"{label} cannot resume '{resume}': not resumable (the child did not complete).")
            return found
        if isinstance(resume, dict):
            return self._receipt(resume, label)
        raise _failure(f"{label} resume must be a run id or {{workflowRunId, key, latest: true}}.")

    def _receipt(self, resume: Mapping[str, Any], label: str) -> ChildInfo:
        """Keyed resume: the latest completed child `key` of another workflow run in this store."""
        store = self.run.store
        workflow, key = resume.get("workflowRunId"), resume.get("key")
        if not isinstance(workflow, str) or not isinstance(key, str):
            raise _failure("runs.run keyed resume requires workflowRunId and key strings.")
        try:
            other = store.resolve_run_id(workflow)
        except WorkflowError:
            raise _failure(f"{label} cannot resume key '{key}' of workflow run '{workflow}': no such run.") from None
        recorded = store.operation(other, child_path(key))
        agent = next((a for a in store.agents(other) if a.journal_path == child_path(key) and a.state == "completed"),
                     None)
        if recorded is None or agent is None or agent.role is None:
            raise _failure(f"{label} cannot resume key '{key}' of workflow run '{workflow}': not resumable "
                           "(no completed child with that key).")
        run_id = child_run_id(other, key)
        # Another run's conversation head is not in this run: its continuation is this run's turn 1.
        return ChildInfo(key, agent.role, run_id, structural_path("child", run_id), agent.model, [run_id], turn=0)

    # -- steer, status ---------------------------------------------------------------------------
    async def steer(self, call: SteerCall) -> dict[str, Any]:
        """Deliver a message to the running child `key` (A.8); the receipt is journaled."""
        n = self._next("steer/" + call.key)
        path = structural_path("steer", call.key, str(n))
        recorded = self.run.operations.check(OperationKind.STEER, path)
        if recorded is not None:
            return dict(recorded.value)
        info = self.children.get(call.key)
        if info is None:
            raise _failure(f"runs.steer('{call.key}') requires a prior runs.run/runs.all launch with that key.")
        receipt: dict[str, Any] = {"key": call.key}
        agent_id = self._agent_id(call.key)
        steer = getattr(self.run.backend, "steer", None)
        mode = call.options.get("mode", "steer") if isinstance(call.options, dict) else "steer"
        if agent_id is None:
            receipt |= {"state": "missed", "error": f"Run '{call.key}' is not running."}
        elif steer is None:
            backend = self.run.backend.name
            receipt |= {"state": "failed", "error": f"The {backend} backend cannot steer a running child."}
        else:
            try:
                receipt |= {"state": await steer(agent_id, call.message, mode), "requestId": f"{call.key}-{n}"}
            except WorkflowError as exc:
                receipt |= {"state": "failed", "error": exc.message}
        with self.run.batch():
            self.run.operations.record(OperationKind.STEER, path, receipt)
        return receipt

    def _agent_id(self, key: str) -> str | None:
        path = child_path(key)
        return next((agent_id for agent_id, runner in self.run.agents.items()
                     if runner.journal_path == path and runner.record.state in ("running", "queued", "retrying")), None)

    async def status(self, call: StatusCall) -> dict[str, Any]:
        info = self.children.get(call.target) or self.by_run_id.get(call.target)
        if info is None:
            raise _failure(f"Status '{call.target}' failed: no child of this workflow has that key or run id.")
        if info.result is not None:
            return info.result
        return {"key": info.key, "ok": False, "state": "running", "output": "", "agent": info.agent,
                "runId": info.run_id, "artifactPaths": [], "continuation": {"runIds": info.run_ids}}

    # -- emit, console, state ---------------------------------------------------------------------
    async def emit(self, call: EmitCall) -> None:
        """An emit or console line: an event, journaled by its occurrence so a replay does not repeat it."""
        what = "console" if call.level is not None else "emit"
        path = structural_path(what, str(self._next(what)))
        if self.run.operations.check(OperationKind.EMIT, path) is not None:
            return
        run = self.run
        with run.batch():
            run.operations.record(OperationKind.EMIT, path, None)
            if call.level is None:
                run.emit(SUBAGENT_EMIT, {"value": call.value})
            else:
                text = call.value.encode("utf-8")[:CONSOLE_LIMIT_BYTES].decode("utf-8", "ignore")
                run.emit(events.RUN_LOG, {"message": text, "console": call.level})

    async def state_call(self, call: StateCall) -> Any:
        """`state.get/set` of the run's mission state (256 KiB), replayed from the journal on resume."""
        if call.action == "get":
            return self.state.get(call.key)
        path = structural_path("state", call.key, str(self._next("state/" + call.key)))
        if self.run.operations.check(OperationKind.STATE, path) is None:
            proposed = {**self.state, call.key: call.value}
            if len(json.dumps(proposed, separators=(",", ":"), ensure_ascii=False).encode()) > STATE_LIMIT_BYTES:
                raise _failure("Workflow state exceeds its 256 KiB cap.")
            with self.run.batch():
                self.run.operations.record(OperationKind.STATE, path, call.value)
        self.state[call.key] = call.value
        return None
