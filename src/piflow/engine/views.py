"""Read models of runs for people: the snapshot the CLI, the server and editors all show.

The views are typed (frozen dataclasses, snake_case, enum states); the wire and JSON shapes they
travel in are built at the edges (`piflow.view_wire`), never here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from piflow.engine.lifecycle import AGENT_SETTLED, ENDED, AgentState, CheckpointState, DecisionState, RunState
from piflow.engine.store import AgentRecord, AttemptRecord, AttemptSetup, RunRecord, RunStore
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.subagents.views import SubagentsView

OUTPUT_INLINE_BYTES: Final = 64 * 1024
"""An agent's output travels in a run view when its JSON is at most this large; larger ones are
fetched one agent at a time (`agent_detail`), so a view of a big run stays small."""
PREVIEW_CHARACTERS: Final = 200
_LONGEST_ESCAPE: Final = len("\\uXXXX")

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
class ErrorView:
    """A failure as a user reads it: its error code and message (as the store kept them)."""

    code: Any
    message: Any


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt of an agent; `error` is None for an attempt that did not fail with one."""

    number: int
    state: AgentState
    tokens: int
    cost_usd: float
    error: ErrorView | None
    transcript_path: str | None
    setup: AttemptSetup | None = None


@dataclass(frozen=True, slots=True)
class OutputView:
    """An agent's output: its preview, and its value when it is inline (`inline`; the value may be
    null) — a larger one is `truncated` and fetched alone (`agent_detail`)."""

    preview: str | None
    value: Any = None
    inline: bool = False
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class AgentDetailView:
    """One agent with its output, attempts and latest transcript."""

    agent: AgentView
    output: OutputView
    attempt_list: list[AttemptView]
    transcript_path: str | None

    @property
    def state(self) -> AgentState:
        return self.agent.state


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
        return [a.agent if isinstance(a, AgentDetailView) else a for a in self.agent_list]


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


def output_preview(value: Any) -> str:
    """One line of at most 200 characters: a string output itself, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARACTERS else line[: PREVIEW_CHARACTERS - 1] + "…"


def _prefix_preview(prefix: str) -> str:
    """The preview of an output of which only the first characters of its JSON text were read."""
    if prefix.startswith('"'):
        for cut in range(_LONGEST_ESCAPE):  # the prefix may end inside an escape sequence
            try:
                return output_preview(json.loads(prefix[: len(prefix) - cut] + '"'))
            except ValueError:
                continue
    return output_preview(prefix)[: PREVIEW_CHARACTERS - 1] + "…"


def _output(stored: tuple[str, int] | None, *, full: bool) -> OutputView:
    """An agent's output: inline when small enough or `full`, else only its preview (always when
    only the first characters of its text are at hand)."""
    if stored is None:
        return OutputView(preview=None)
    text, size = stored
    if len(text) < size:
        return OutputView(preview=_prefix_preview(text), truncated=True)
    if full or size <= OUTPUT_INLINE_BYTES:
        value = json.loads(text)
        return OutputView(preview=output_preview(value), value=value, inline=True)
    return OutputView(preview=_prefix_preview(text), truncated=True)


def _attempt_view(attempt: AttemptRecord, agent: AgentRecord, last: bool) -> AttemptView:
    """One attempt; an attempt that ended without a recorded error failed after the backend
    answered (an invalid result) unless it is the last one, which shares its agent's outcome."""
    error = attempt.error
    state: AgentState
    if attempt.ended_at is None:
        state = AgentState.RUNNING
    elif error is not None:
        state = AgentState.CANCELLED if error.get("code") == "CANCELLED" else AgentState.FAILED
    elif not last:
        state = AgentState.FAILED
    elif agent.state in (AgentState.FAILED, AgentState.CANCELLED):
        state, error = agent.state, agent.error
    else:
        state = AgentState.COMPLETED
    return AttemptView(
        number=attempt.attempt,
        state=state,
        tokens=attempt.tokens_input + attempt.tokens_output,
        cost_usd=round(attempt.cost_usd, 10),
        error=None if error is None else ErrorView(error.get("code"), error.get("message")),
        transcript_path=attempt.transcript_path or None,
        setup=attempt.setup,
    )


def agent_detail_view(
    agent: AgentRecord, attempts: list[AttemptRecord], stored: tuple[str, int] | None, *, full: bool
) -> AgentDetailView:
    """One agent with its attempts and its output (`stored`: its JSON text, or the first characters
    of it, and the text's full length); the store's and the Temporal executor's agents alike."""
    return AgentDetailView(
        agent=agent_view(agent),
        output=_output(stored, full=full),
        attempt_list=[_attempt_view(a, agent, a is attempts[-1]) for a in attempts],
        transcript_path=next((a.transcript_path for a in reversed(attempts) if a.transcript_path), None),
    )


def agent_details(store: RunStore, run_id: str, agents: list[AgentRecord]) -> list[AgentDetailView]:
    """The agents of a run with their outputs (previews only beyond 64 KiB) and attempts."""
    attempts = store.run_attempts(run_id)
    stored = store.journal_texts(
        run_id, [a.journal_path for a in agents if a.journal_path], cap=OUTPUT_INLINE_BYTES + 1
    )
    return [
        agent_detail_view(a, attempts.get(a.id, []), stored.get(a.journal_path or ""), full=False) for a in agents
    ]


def agent_detail(store: RunStore, run_id: str, agent_id: str) -> AgentDetailView:
    """One agent of a run with its full output, whatever its size (`piflow.showAgent`)."""
    agent = next((a for a in store.agents(run_id) if a.id == agent_id), None)
    if agent is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow agent: {agent_id} (not an agent of run {run_id})")
    stored = store.journal_texts(run_id, [agent.journal_path] if agent.journal_path else [])
    attempts = store.run_attempts(run_id).get(agent.id, [])
    return agent_detail_view(agent, attempts, stored.get(agent.journal_path or ""), full=True)


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
        agent_list: Sequence[AgentView | AgentDetailView] = (
            agent_details(store, run_id, agents) if details else [agent_view(a) for a in agents]
        )
        subagents: SubagentsView | None = None
        if details:  # imported here: a run's progress and result never show the pi-subagents views
            from piflow.engine.subagents.views import subagents_view

            subagents = subagents_view(store, run_id, run.state, agents)
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
