"""The Temporal executor as clients see it: launch, list, show, answer and control runs on a cluster.

What it shows is the engine's typed views (`engine/views.py`), built from the run workflow's
`snapshot` query (a finished run's workflow result), so `piflow show` and `runs` print a
Temporal run as they print an embedded one.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from piflow.analysis.budget import (
    budget_relaxed,
    merge_budget,
    resume_budget_allowed,
    validate_budget,
    validate_budget_patch,
)
from piflow.engine.agent_details import AgentDetailView, agent_detail_view
from piflow.engine.control import ControlOutcome
from piflow.engine.environment import load_environment
from piflow.engine.lifecycle import (
    AGENT_SETTLED,
    AgentState,
    CheckpointState,
    DecisionState,
    RunState,
)
from piflow.engine.snapshot import build_snapshot
from piflow.engine.store.records import AgentRecord, AttemptRecord, AttemptSetup, RunRecord
from piflow.engine.temporal.settings import TemporalSettings, connect, ensure_search_attributes
from piflow.engine.temporal.wire import (
    BUDGET_UPDATE,
    CONTROL_SIGNAL,
    DETAILS_QUERY,
    PROJECT_ATTRIBUTE,
    RESPOND_UPDATE,
    SCRIPT_ATTRIBUTE,
    SNAPSHOT_QUERY,
    STATE_ATTRIBUTE,
    WORKFLOW_NAME,
    AgentDetails,
    AttemptOutcome,
    RunDetails,
    RunSnapshot,
    RunStart,
)
from piflow.engine.views import (
    OUTPUT_INLINE_BYTES,
    AgentView,
    BudgetView,
    CheckpointView,
    ProposalView,
    RunSummaryView,
    RunView,
    agent_view,
)
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
        return await self.start(self.prepare(request))

    def prepare(self, request: LaunchRequest) -> RunStart:
        """The launch validated and its snapshot built: the run workflow's input. Blocking work
        (imports, the project's files, preflight): the language server calls it on a thread."""
        from piflow.engine.extensions import load_extensions

        extensions = load_extensions()  # the workers' (installed alike): their tools and workflows are known
        env = load_environment(request.cwd).with_extension_tools(frozenset(extensions.tools))
        env = replace(env, workflows={**extensions.workflows, **env.workflows})
        budget = validate_budget(request.budget) if request.budget is not None else None
        concurrency = request.concurrency if request.concurrency is not None else env.concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 16:
            raise WorkflowError("INVALID_SETTINGS", "Invalid run concurrency")
        name = (request.name or "").strip() or request.workflow or _default_name(request.script_path)
        backend = request.backend or env.backend
        env = env.with_backend(backend)
        snapshot = build_snapshot(request, env, name=name, budget=budget, concurrency=concurrency, backend=backend)
        snapshot["fixtures"] = request.fixtures or (str(env.fixtures) if env.fixtures else None)
        return RunStart(str(uuid.uuid4()), name, request.cwd, request.script_path, snapshot, budget or None,
                        concurrency, time.time())

    async def start(self, start: RunStart) -> str:
        """Start a prepared run's workflow on the cluster; returns the run's id."""
        from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

        await ensure_search_attributes(self.client, self.settings.namespace)
        attributes = TypedSearchAttributes([
            SearchAttributePair(SearchAttributeKey.for_keyword(PROJECT_ATTRIBUTE), start.cwd),
            SearchAttributePair(SearchAttributeKey.for_keyword(SCRIPT_ATTRIBUTE),
                                start.script_path or start.workflow_name),
            SearchAttributePair(SearchAttributeKey.for_keyword(STATE_ATTRIBUTE), "running"),
        ])
        await self.client.start_workflow(WORKFLOW_NAME, start, id=_ID_PREFIX + start.run_id,
                                         task_queue=self.settings.task_queue, search_attributes=attributes)
        return start.run_id

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

    async def summaries(self, *, open_only: bool = False) -> list[RunSummaryView]:
        """The project's runs from Temporal's visibility (the `PiflowProject` search attribute); with
        `open_only`, those whose workflow is still open (live, paused or budget-exhausted runs)."""
        from temporalio.service import RPCError

        project = self.cwd.replace("\\", "\\\\").replace('"', '\\"')
        query = f'{PROJECT_ATTRIBUTE} = "{project}"' + (' AND ExecutionStatus = "Running"' if open_only else "")
        try:
            return [self._summary(execution) async for execution in self.client.list_workflows(query)]
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

    async def snapshot(self, run_id: str, *, timeout: float | None = None) -> RunSnapshot:
        """The run as its workflow knows it (a query: a worker answers it, replaying a closed run);
        `timeout`: how long to wait for a worker to answer (default: the SDK's)."""
        from datetime import timedelta

        result: RunSnapshot = await self._handle(run_id).query(
            SNAPSHOT_QUERY, result_type=RunSnapshot,
            rpc_timeout=None if timeout is None else timedelta(seconds=timeout))
        return result

    async def details(self, run_id: str, paths: list[str] | None, *, full: bool = False,
                      timeout: float | None = None) -> RunDetails:
        """The launched script and the outputs and attempts of the agents at `paths` (None: all);
        outputs past 64 KiB come as previews unless `full` (one agent's whole output, `showAgent`)."""
        from datetime import timedelta

        result: RunDetails = await self._handle(run_id).query(
            DETAILS_QUERY, args=[paths, None if full else OUTPUT_INLINE_BYTES + 1], result_type=RunDetails,
            rpc_timeout=None if timeout is None else timedelta(seconds=timeout))
        return result

    async def view(self, run_id: str, *, details: bool = False) -> RunView:
        """The run as `piflow show` shows it; with `details`, its agents' outputs and attempts too."""
        snapshot = await self.snapshot(run_id)
        return run_view_of(snapshot, (await self.details(run_id, None)) if details else None)

    async def agent(self, run_id: str, agent_id: str, *, timeout: float | None = None) -> AgentDetailView:
        """One agent (`<runId>:<n>`) with its whole output (`piflow.showAgent`)."""
        snapshot = await self.snapshot(run_id, timeout=timeout)
        records = agent_records(snapshot)
        record = next((r for r in records if r.id == agent_id), None)
        if record is None or record.journal_path is None:
            raise WorkflowError("RESUME_INCOMPATIBLE",
                                f"Unknown workflow agent: {agent_id} (not an agent of run {run_id})")
        found = (await self.details(run_id, [record.journal_path], full=True, timeout=timeout)).agents
        return _agent_detail(record, found[0] if found else None, full=True)

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

    async def _recorded_state(self, run_id: str) -> tuple[bool, RunState]:
        """Whether the run's workflow is open, and the state it last recorded (its `PiflowState` search
        attribute, as `runs` lists it): the cluster answers at once, where a query waits for the
        workflow task (up to `wire.STEP_WAIT_SECONDS` while a step runs the script)."""
        from temporalio.client import WorkflowExecutionStatus

        description = await self._handle(run_id).describe()
        return description.status == WorkflowExecutionStatus.RUNNING, self._summary(description).state

    async def pause(self, run_id: str) -> RunState:
        """Pause a running run: `pausing` while its running agents finish, then `paused` (spec F.1)."""
        _, state = await self._recorded_state(run_id)
        if state != RunState.RUNNING:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot pause {state} run")
        await self.control(run_id, "pause")
        return RunState.PAUSING

    async def stop(self, run_id: str) -> ControlOutcome:
        """Stop a run (a budget-exhausted one too); a completed, failed or stopped run stays as it is."""
        from temporalio.service import RPCError, RPCStatusCode

        try:
            open_now, state = await self._recorded_state(run_id)
        except RPCError as exc:  # as the embedded engine answers a run that is not there
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return ControlOutcome("unknown", run_id=run_id, stopped=False, reason="unknown_run")
        if not open_now:
            return ControlOutcome(state, run_id=run_id, stopped=False, reason="already_terminal")
        await self.control(run_id, "stop")
        return ControlOutcome(RunState.STOPPED, run_id=run_id, stopped=True)

    async def resume(self, run_id: str, patch: Any = None) -> ControlOutcome:
        """Resume a paused run, or an exhausted one under its budget changed by `patch`, as the embedded
        engine does (spec H): a relaxed budget is a proposal that waits for `piflow budget approve`."""
        snapshot = await self.snapshot(run_id)
        if snapshot.state in (RunState.PAUSED, RunState.PAUSING):
            if patch is not None:
                raise WorkflowError("RESUME_INCOMPATIBLE",
                                    "Only budget-exhausted runs can be resumed with a budget patch")
            await self.control(run_id, "resume")
            return ControlOutcome(RunState.RUNNING, run_id=run_id)
        if snapshot.state != RunState.BUDGET_EXHAUSTED:
            if patch is not None:
                raise WorkflowError("RESUME_INCOMPATIBLE",
                                    "Only budget-exhausted runs can be resumed with workflow_resume")
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot resume {snapshot.state} run")
        current = snapshot.budget or {}
        proposed = merge_budget(current, validate_budget_patch(patch)) if patch is not None else current
        if not resume_budget_allowed(proposed, snapshot.usage):
            raise WorkflowError("RESUME_INCOMPATIBLE",
                                "Every exhausted hard budget must be raised above retained usage or removed")
        if not budget_relaxed(current, proposed):
            await self._budget(run_id, "apply", None, dict(proposed))
            return ControlOutcome(RunState.RUNNING, run_id=run_id)
        from piflow.engine.engine import proposal_message

        proposal_id = str(uuid.uuid4())
        await self._budget(run_id, "propose", proposal_id, dict(proposed))
        payload = {"proposalId": proposal_id, "consumed": snapshot.usage, "previous": current, "proposed": proposed}
        record = RunRecord(id=run_id, workflow_name=snapshot.workflow_name, cwd=snapshot.cwd,
                           state=RunState.BUDGET_EXHAUSTED, concurrency=1, backend="temporal")
        return ControlOutcome(RunState.BUDGET_EXHAUSTED, run_id=run_id, proposal_id=proposal_id,
                              message=proposal_message(record, payload))

    async def decide(self, run_id: str, proposal_id: str, approved: bool) -> ControlOutcome:
        """Approve (the run goes on under the proposed budget) or reject a budget proposal."""
        state = await self._budget(run_id, "approve" if approved else "reject", proposal_id, None)
        if state == RunState.RUNNING:
            return ControlOutcome(RunState.RUNNING, run_id=run_id, approved=True, reason="approved")
        reason = "rejected" if state == RunState.BUDGET_EXHAUSTED else "proposal_not_pending"
        return ControlOutcome(RunState.BUDGET_EXHAUSTED, run_id=run_id, approved=False, reason=reason)

    async def _budget(self, run_id: str, action: str, proposal_id: str | None, limits: dict[str, Any] | None) -> str:
        from temporalio.service import RPCError, RPCStatusCode

        try:
            state: str = await self._handle(run_id).execute_update(BUDGET_UPDATE, args=[action, proposal_id, limits])
        except RPCError as exc:  # the run has ended: nothing is exhausted or proposed any more
            if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise
            state = "not_pending" if action in ("approve", "reject") else "not_budget_exhausted"
        if state == "not_budget_exhausted":
            raise WorkflowError("RESUME_INCOMPATIBLE", "Only budget-exhausted runs can be resumed with workflow_resume")
        return state


def agent_records(snapshot: RunSnapshot) -> list[AgentRecord]:
    """The run's agents as the store would hold them (`<runId>:<n>` in the workflow's order), so the
    engine's own view functions show them."""
    run_id = snapshot.run_id
    return [
        AgentRecord(
            id=f"{run_id}:{n}", run_id=run_id, n=n, name=a.get("name") or "agent", model=a.get("model") or "",
            state=AgentState(a.get("state") or "running"), label=a.get("label") or a.get("name") or a["path"],
            role=a.get("role"), tools=list(a.get("tools") or []), structural_path=list(a.get("structuralPath") or []),
            journal_path=a["path"], attempts=int(a.get("attempts") or 1), tokens_output=int(a["tokens"]),
            cost_usd=float(a["costUsd"]), error=a.get("error"),
        )
        for n, a in enumerate(snapshot.agents, start=1)
    ]


def _agent_detail(agent: AgentRecord, details: AgentDetails | None, *, full: bool) -> AgentDetailView:
    """`agent_detail_view` of one agent from the workflow's `details`: its attempt outcomes as the
    store's attempt records (those in flight still running), its output's JSON text."""
    attempts: list[AttemptRecord] = []
    output = None
    if details is not None:
        attempts = [
            AttemptRecord(agent_id=agent.id, attempt=o.attempt, started_at=0.0, ended_at=0.0, error=o.error,
                          tokens_input=o.tokens_input, tokens_output=o.tokens_output, cost_usd=o.cost_usd,
                          transcript_path=o.transcript_path, session_id=o.session_id, setup=_setup(o))
            for o in details.attempts
        ]
        attempts += [AttemptRecord(agent_id=agent.id, attempt=n, started_at=0.0) for n in details.running]
        attempts.sort(key=lambda a: a.attempt)
        output = None if details.output is None else (details.output, details.output_size)
    return agent_detail_view(agent, attempts, output, full=full)


def _setup(outcome: AttemptOutcome) -> AttemptSetup | None:
    from piflow.engine.store.tables import setup_from_stored

    if outcome.setup is None:
        return None
    return replace(setup_from_stored(outcome.setup), system_prompt=outcome.system_prompt)


def run_view_of(snapshot: RunSnapshot, details: RunDetails | None = None) -> RunView:
    """The engine's typed view of a run from its workflow's snapshot; given the workflow's `details`
    (`piflow show`, `piflow.showRun`), its agents as detail views with outputs and attempts."""
    records = agent_records(snapshot)
    agents = [agent_view(record) for record in records]
    usage = snapshot.usage
    summary = RunSummaryView(
        run_id=snapshot.run_id, workflow_name=snapshot.workflow_name, script_path=snapshot.script_path,
        cwd=snapshot.cwd, state=RunState(snapshot.state), phase=snapshot.phase, agents_total=len(agents),
        agents_settled=sum(1 for a in agents if a.state in AGENT_SETTLED), cost_usd=usage.get("costUsd", 0),
        tokens=usage.get("tokens", 0), created_at=snapshot.created_at, updated_at=snapshot.updated_at,
    )
    agent_list: list[AgentView | AgentDetailView] = list(agents)
    if details is not None:
        by_path = {found.path: found for found in details.agents}
        agent_list = [_agent_detail(record, by_path.get(record.journal_path or ""), full=False) for record in records]
    return RunView(
        summary=summary, error=snapshot.error, warnings=[], agent_list=agent_list,
        budget=BudgetView(limits=snapshot.budget or {}, version=snapshot.budget_version, usage=usage,
                          events=snapshot.budget_events),
        checkpoints=[
            *(CheckpointView(a.checkpoint.label, a.checkpoint.prompt, a.checkpoint.context,
                             CheckpointState.APPROVED if a.approved else CheckpointState.REJECTED)
              for a in snapshot.answered),
            *(CheckpointView(c.label, c.prompt, c.context, CheckpointState.AWAITING) for c in snapshot.checkpoints)],
        proposals=[ProposalView(p["proposalId"], DecisionState.PENDING, p) for p in snapshot.proposals],
        worktrees=[], result=snapshot.result,
    )


def _default_name(script_path: str | None) -> str:
    from piflow.engine.engine import _default_name as name_of

    return name_of(script_path)
