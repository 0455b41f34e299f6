"""Read models of runs for people: the snapshot the CLI, the server and editors all show.

The views are typed (frozen dataclasses, snake_case, enum states); the wire and JSON shapes they
travel in are built at the edges (`piflow.view_wire`), never here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from piflow.engine.lifecycle import AGENT_SETTLED, ENDED, AgentState, CheckpointState, DecisionState, RunState
from piflow.engine.store import AgentRecord, RunRecord, RunStore
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.agent_details import AgentDetailView
    from piflow.engine.subagents.views import SubagentsView

OUTPUT_INLINE_BYTES: Final = 64 * 1024
"""An agent's output travels in a run view when its JSON is at most this large; larger ones are
fetched one agent at a time (`agent_detail`), so a view of a big run stays small."""

ATTENTION_ORDER = (
    "awaiting_input",
    "budget_exhausted",
    "running",
    "pausing",
    "paused",
    "interrupted",
    "failed",
    "queued",
    "stopped",
    "completed",
)


@dataclass(frozen=True, slots=True)
class AgentView:
    """One agent of a run, as progress shows it."""

    id: str
    label: str
    name: str
    role: str | None
    model: str | None
    requested_model: str | None
    tools: list[str]
    state: AgentState
    attempts: int
    structural_path: list[str]
    journal_path: str | None
    tokens: int
    cost_usd: float
    activity: str | None
    error: dict[str, Any] | None
    parent_id: str | None = None
    """The agent that started this one as its child (spec J.5); None for a script's agent."""


@dataclass(frozen=True, slots=True)
class BudgetView:
    """A run's budget: its limits and their version, what it has used, and its budget events."""

    limits: dict[str, Any]
    version: int
    usage: dict[str, Any]
    events: list[dict[str, Any]]
    """As the store keeps them (spec budget events, camelCase JSON)."""


@dataclass(frozen=True, slots=True)
class CheckpointView:
    """One `checkpoint()` of a run: its label, question, context and whether it was answered."""

    name: str
    prompt: Any
    context: Any
    state: CheckpointState


@dataclass(frozen=True, slots=True)
class ProposalView:
    """A budget adjustment proposal and whether it was decided (spec H)."""

    proposal_id: str
    state: DecisionState
    payload: dict[str, Any]
    """The decision's payload as the store keeps it (the proposal's spec fields)."""


@dataclass(frozen=True, slots=True)
class WorktreeView:
    """A git worktree a run made: the agent that owns it, its branch, path and base commit."""

    owner: str
    branch: str
    path: str
    base: str | None


@dataclass(frozen=True, slots=True)
class RunSummaryView:
    """One line's worth of a run: for lists and pickers."""

    run_id: str
    workflow_name: str
    script_path: str | None
    cwd: str
    state: RunState
    phase: str | None
    agents_total: int
    agents_settled: int
    cost_usd: Any
    tokens: Any
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything about a run; `agent_list` holds `AgentDetailView`s in a detailed view, else
    `AgentView`s. `result` is meaningful only when the run completed."""

    summary: RunSummaryView
    error: dict[str, Any] | None
    warnings: list[str]
    agent_list: Sequence[AgentView | AgentDetailView]
    budget: BudgetView
    checkpoints: list[CheckpointView]
    proposals: list[ProposalView]
    worktrees: list[WorktreeView]
    result: Any
    subagents: SubagentsView | None = None
    """A pi-subagents run's children, host steps, lane boards, emits and console (detailed views only)."""

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def state(self) -> RunState:
        return self.summary.state

    @property
    def has_result(self) -> bool:
        return self.summary.state == RunState.COMPLETED

    @property
    def agents(self) -> list[AgentView]:
        """The agents themselves, whether or not the view has their details."""
        return [a if isinstance(a, AgentView) else a.agent for a in self.agent_list]


def observed_run(store: RunStore, run: RunRecord) -> RunRecord:
    """The run as a reader must show it: an unfinished run whose owner is gone is `interrupted`.

    Computed on read, never written: recording it is the job of the next owner (resume), so
    looking at runs (`piflow runs`/`show`, an editor) never changes the store.
    """
    if run.state in ENDED or store.lease_owner(run.id) is not None:
        return run
    return replace(run, state=RunState.INTERRUPTED)


def agent_view(agent: AgentRecord) -> AgentView:
    return AgentView(
        id=agent.id,
        label=agent.label or agent.name,
        name=agent.name,
        role=agent.role,
        model=agent.model,
        requested_model=agent.requested_model,
        tools=agent.tools,
        state=agent.state,
        attempts=agent.attempts,
        structural_path=agent.structural_path,
        journal_path=agent.journal_path,
        tokens=agent.tokens_input + agent.tokens_output,
        cost_usd=round(agent.cost_usd, 10),
        activity=agent.activity,
        error=agent.error,
        parent_id=agent.parent_id,
    )


def run_summary(run: RunRecord, agents: list[AgentRecord]) -> RunSummaryView:
    """One line's worth of a run: for lists and pickers (reading its agents finds a damaged one)."""
    return _summary(run, len(agents), sum(1 for a in agents if a.state in AGENT_SETTLED))


def summary_of(store: RunStore, run: RunRecord) -> RunSummaryView:
    """A run's summary with its agents counted, not read: what an editor redraws while big runs go on."""
    return _summary(run, *store.agent_counts(run.id, AGENT_SETTLED))


def _summary(run: RunRecord, agents_total: int, agents_settled: int) -> RunSummaryView:
    usage = run.usage or {}
    return RunSummaryView(
        run_id=run.id,
        workflow_name=run.workflow_name,
        script_path=run.script_path,
        cwd=run.cwd,
        state=run.state,
        phase=run.phase,
        agents_total=agents_total,
        agents_settled=agents_settled,
        cost_usd=usage.get("costUsd", 0),
        tokens=usage.get("tokens", 0),
        created_at=run.created_at,
        updated_at=run.updated_at,
    )


def run_view(store: RunStore, run_id: str, *, details: bool = False, with_agents: bool = True) -> RunView:
    """Everything about a run: state, agents, budget, checkpoints, result or error.

    With `details`, each agent also carries its output, attempts and transcript (what `piflow show`
    and `piflow.showRun` answer); without, the view is cheap enough to redraw progress from.
    Without `with_agents`, the agents are counted, not read, and `agent_list` is empty: the end of
    `piflow run --json` (state, result, error) then costs the same for 10 agents as for 10,000
    (reading 10,000 agents takes ~0.2 s).
    """
    with store.consistent_read():  # one moment: see RunStore.consistent_read
        run = store.get_run(run_id)
        if run is None:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
        run = observed_run(store, run)
        agents = store.agents(run_id) if with_agents else []
        agent_list: Sequence[AgentView | AgentDetailView]
        subagents: SubagentsView | None = None
        if details:  # imported here: a run's progress and end show no agent's details, no pi-subagents views
            from piflow.engine.agent_details import agent_details
            from piflow.engine.subagents.views import subagents_view

            agent_list = agent_details(store, run_id, agents)
            subagents = subagents_view(store, run_id, run.state, agents)
        else:
            agent_list = [agent_view(a) for a in agents]
        return RunView(
            summary=run_summary(run, agents) if with_agents else summary_of(store, run),
            error=run.error,
            warnings=run.warnings,
            agent_list=agent_list,
            budget=BudgetView(
                limits=run.budget or {},
                version=run.budget_version,
                usage=run.usage or {},
                events=store.budget_events(run_id),
            ),
            checkpoints=[CheckpointView(c.label, c.prompt, c.context, c.state) for c in store.checkpoints(run_id)],
            proposals=[ProposalView(d.proposal_id, d.state, d.payload) for d in store.decisions(run_id)],
            worktrees=[WorktreeView(w.owner, w.branch, w.path, w.base) for w in store.worktrees(run_id)],
            result=run.result if run.state == RunState.COMPLETED else None,
            subagents=subagents,
        )


def attention_key(state: str, updated_at: float) -> tuple[int, float]:
    """Where a run goes in a list: those needing attention first, then the newest."""
    rank = ATTENTION_ORDER.index(state) if state in ATTENTION_ORDER else len(ATTENTION_ORDER)
    return rank, -float(updated_at)
