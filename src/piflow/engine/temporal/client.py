"""The Temporal executor as clients see it: launch, list, show, answer and control runs on a cluster.

What it shows is the engine's typed views (`engine/views.py`), built from the run workflow's
`snapshot` query (a finished run's workflow result), so `piflow show` and `runs` print a
Temporal run as they print an embedded one.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from piflow.analysis.budget import validate_budget
from piflow.engine.environment import load_environment
from piflow.engine.lifecycle import AGENT_SETTLED, AgentState, CheckpointState, RunState
from piflow.engine.snapshot import build_snapshot
from piflow.engine.temporal.settings import TemporalSettings, connect, ensure_search_attributes
from piflow.engine.temporal.wire import (
    CONTROL_SIGNAL,
    PROJECT_ATTRIBUTE,
    RESPOND_UPDATE,
    SCRIPT_ATTRIBUTE,
    SNAPSHOT_QUERY,
    STATE_ATTRIBUTE,
    WORKFLOW_NAME,
    RunSnapshot,
    RunStart,
)
from piflow.engine.views import AgentView, BudgetView, CheckpointView, RunSummaryView, RunView
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecution, WorkflowHandle

    from piflow.engine.engine import LaunchRequest

_ID_PREFIX = "piflow-"


class TemporalRuns:
    """One project's runs on one cluster. Use as `async with TemporalRuns(settings, cwd) as runs:`."""

    def __init__(self, settings: TemporalSettings, cwd: str) -> None:
        self.settings = settings
        self.cwd = cwd
        self._client: Client | None = None

    async def __aenter__(self) -> TemporalRuns:
        self._client = await connect(self.settings)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._client = None

    @property
    def client(self) -> Client:
        assert self._client is not None, "use TemporalRuns inside `async with`"
        return self._client

    async def launch(self, request: LaunchRequest) -> str:
        """Validate and snapshot here (as the embedded engine does), then start the run's workflow."""
        from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

        env = load_environment(request.cwd)
        budget = validate_budget(request.budget) if request.budget is not None else None
        concurrency = request.concurrency if request.concurrency is not None else env.concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 16:
            raise WorkflowError("INVALID_SETTINGS", "Invalid run concurrency")
        name = (request.name or "").strip() or request.workflow or _default_name(request.script_path)
        backend = request.backend or env.backend
        env = env.with_backend(backend)
        snapshot = build_snapshot(request, env, name=name, budget=budget, concurrency=concurrency, backend=backend)
        snapshot["fixtures"] = request.fixtures or (str(env.fixtures) if env.fixtures else None)
        await ensure_search_attributes(self.client, self.settings.namespace)
        run_id = str(uuid.uuid4())
        start = RunStart(run_id, name, request.cwd, request.script_path, snapshot, budget or None, concurrency,
                         time.time())
        attributes = TypedSearchAttributes([
            SearchAttributePair(SearchAttributeKey.for_keyword(PROJECT_ATTRIBUTE), request.cwd),
            SearchAttributePair(SearchAttributeKey.for_keyword(SCRIPT_ATTRIBUTE), request.script_path or name),
            SearchAttributePair(SearchAttributeKey.for_keyword(STATE_ATTRIBUTE), "running"),
        ])
        await self.client.start_workflow(WORKFLOW_NAME, start, id=_ID_PREFIX + run_id,
                                         task_queue=self.settings.task_queue, search_attributes=attributes)
        return run_id

    async def resolve(self, text: str) -> str:
        """A run id from an id or a prefix of 8+ characters, among this project's runs."""
        ids = [summary.run_id for summary in await self.summaries()]
        if text in ids:
            return text
        matches = [run_id for run_id in ids if run_id.startswith(text)] if len(text) >= 8 else []
        if len(matches) != 1:
            what = "matches several runs" if matches else "is no run of this project"
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {text} ({what} on the Temporal "
                                                       f"cluster {self.settings.address})")
        return matches[0]

    async def summaries(self) -> list[RunSummaryView]:
        """The project's runs from Temporal's visibility (the `PiflowProject` search attribute)."""
        from temporalio.service import RPCError

        project = self.cwd.replace("\\", "\\\\").replace('"', '\\"')
        try:
            return [self._summary(execution) async for execution in
                    self.client.list_workflows(f'{PROJECT_ATTRIBUTE} = "{project}"')]
        except RPCError as exc:
            if "invalid search attribute" in exc.message:  # no worker or launch registered them yet: no runs
                return []
            raise

    def _summary(self, execution: WorkflowExecution) -> RunSummaryView:
        from temporalio.common import SearchAttributeKey

        attributes = execution.typed_search_attributes
        state = attributes.get(SearchAttributeKey.for_keyword(STATE_ATTRIBUTE)) or "running"
        if execution.status is not None and execution.status.name in ("TERMINATED", "TIMED_OUT", "FAILED"):
            state = "failed"  # ended outside piflow (e.g. `temporal workflow terminate`)
        script = attributes.get(SearchAttributeKey.for_keyword(SCRIPT_ATTRIBUTE))
        return RunSummaryView(
            run_id=execution.id.removeprefix(_ID_PREFIX), workflow_name=_default_name(script), script_path=script,
            cwd=self.cwd, state=RunState(state), phase=None, agents_total=0, agents_settled=0, cost_usd=0, tokens=0,
            created_at=execution.start_time.timestamp(),
            updated_at=(execution.close_time or execution.start_time).timestamp(),
        )

    def _handle(self, run_id: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(_ID_PREFIX + run_id)

    async def snapshot(self, run_id: str) -> RunSnapshot:
        """The run as its workflow knows it (a query: a worker answers it, replaying a closed run)."""
        result: RunSnapshot = await self._handle(run_id).query(SNAPSHOT_QUERY, result_type=RunSnapshot)
        return result

    async def view(self, run_id: str) -> RunView:
        return run_view_of(await self.snapshot(run_id))

    async def respond(self, run_id: str, label: str, approved: bool) -> bool:
        """Answer a checkpoint; False when it is not waiting (already answered, or no such label)."""
        from temporalio.service import RPCError, RPCStatusCode

        try:
            accepted: bool = await self._handle(run_id).execute_update(RESPOND_UPDATE, args=[label, approved])
        except RPCError as exc:  # the run has ended: nothing waits any more
            if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                return False
            raise
        return accepted

    async def control(self, run_id: str, action: str) -> None:
        """pause, resume or stop."""
        await self._handle(run_id).signal(CONTROL_SIGNAL, action)


def run_view_of(snapshot: RunSnapshot) -> RunView:
    """The engine's typed view of a run from its workflow's snapshot."""
    run_id = snapshot.run_id
    agents = [
        AgentView(
            id=f"{run_id}:{n}", label=a.get("label") or a.get("name") or a["path"], name=a.get("name") or "agent",
            role=a.get("role"), model=a.get("model"), requested_model=None, tools=list(a.get("tools") or []),
            state=AgentState(a.get("state") or "running"), attempts=int(a.get("attempts") or 1),
            structural_path=list(a.get("structuralPath") or []), journal_path=a["path"], tokens=int(a["tokens"]),
            cost_usd=round(float(a["costUsd"]), 10), activity=None, error=a.get("error"),
        )
        for n, a in enumerate(snapshot.agents, start=1)
    ]
    usage = snapshot.usage
    summary = RunSummaryView(
        run_id=run_id, workflow_name=snapshot.workflow_name, script_path=snapshot.script_path,
        cwd=snapshot.cwd, state=RunState(snapshot.state), phase=snapshot.phase, agents_total=len(agents),
        agents_settled=sum(1 for a in agents if a.state in AGENT_SETTLED), cost_usd=usage.get("costUsd", 0),
        tokens=usage.get("tokens", 0), created_at=snapshot.created_at, updated_at=snapshot.updated_at,
    )
    return RunView(
        summary=summary, error=snapshot.error, warnings=[], agent_list=agents,
        budget=BudgetView(limits=snapshot.budget or {}, version=1, usage=usage, events=snapshot.budget_events),
        checkpoints=[CheckpointView(c.label, c.prompt, c.context, CheckpointState.AWAITING)
                     for c in snapshot.checkpoints],
        proposals=[], worktrees=[], result=snapshot.result,
    )


def _default_name(script_path: str | None) -> str:
    from piflow.engine.engine import _default_name as name_of

    return name_of(script_path)
