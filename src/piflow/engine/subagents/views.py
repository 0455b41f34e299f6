"""What `piflow show` and the editor's run view show of a pi-subagents run, as typed views.

Folded from the run's agents (a child is an agent whose journal path is `child/<key>`) and its
pi-subagents events (`progress.py`): the children with their output references, the host steps,
the lane boards, the emits and the console lines. `engine/views.py` adds it to a detailed run view;
`view_wire.py` gives it its JSON shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from piflow.engine.events import RUN_LOG
from piflow.engine.journal import child_path
from piflow.engine.lifecycle import AgentState, RunState
from piflow.engine.store import AgentRecord, RunStore
from piflow.engine.subagents.progress import SUBAGENT_CHILD, SUBAGENT_EMIT, SUBAGENT_HOST, SUBAGENT_LANES

_CHILD_PREFIX: Final = child_path("k")[:-1]
"""`child/`: the journal paths of children."""
_LIVE: Final = frozenset({RunState.RUNNING, RunState.PAUSING, RunState.AWAITING_INPUT, RunState.QUEUED})


@dataclass(frozen=True, slots=True)
class ChildView:
    """One child: `output_reference` is where its output was saved, once it completed."""

    key: str
    agent: str
    state: AgentState
    child_run_id: str | None
    model: str | None
    tokens: int
    cost_usd: float
    output_reference: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class HostStepView:
    """One `runs.host` step; `state` is running, passed, failed, timed-out, stopped or interrupted."""

    key: str
    command: str | None
    state: str
    exit_code: int | None
    duration_ms: int | None
    output_path: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class LaneStageView:
    """A stage of a lane: pending, running, completed, blocked, failed, stopped, detached or skipped."""

    key: str
    state: str
    verdict: str | None
    error: str | None
    child_run_id: str | None


@dataclass(frozen=True, slots=True)
class LaneView:
    """One lane of a `runs.lanes` board: its stages in order, and the one that failed, if any."""

    key: str
    state: str
    """running, complete or blocked."""
    failed_stage: str | None
    stages: list[LaneStageView]


@dataclass(frozen=True, slots=True)
class LaneBoardView:
    """The board of the `call`-th `runs.lanes` of the script, as it last changed."""

    call: int
    lanes: list[LaneView]


@dataclass(frozen=True, slots=True)
class ConsoleLineView:
    """A line the script wrote to its console, with its level."""

    level: str
    message: str


@dataclass(frozen=True, slots=True)
class SubagentsView:
    """What `piflow show` adds for a pi-subagents run: its children, host steps, lanes, emits, console."""

    children: list[ChildView]
    host_steps: list[HostStepView]
    boards: list[LaneBoardView]
    emits: list[Any]
    console: list[ConsoleLineView]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _lane(data: dict[str, Any]) -> LaneView:
    stages = [
        LaneStageView(str(s.get("key")), str(s.get("state")), _text(s.get("verdict")), _text(s.get("error")),
                      _text(s.get("runId")))
        for s in data.get("stages") or [] if isinstance(s, dict)
    ]
    return LaneView(str(data.get("key")), str(data.get("state")), _text(data.get("failedStage")), stages)


def lane_board(payload: Any) -> LaneBoardView | None:
    """The board a `piflow:subagents-lanes` event carries (whole), or None for a malformed payload."""
    if not isinstance(payload, dict) or not isinstance(payload.get("call"), int):
        return None
    lanes = payload.get("lanes")
    if not isinstance(lanes, list):
        lanes = []
    return LaneBoardView(payload["call"], [_lane(lane) for lane in lanes if isinstance(lane, dict)])


def _child(agent: AgentRecord, started: dict[str, Any]) -> ChildView:
    key = agent.journal_path[len(_CHILD_PREFIX):] if agent.journal_path else agent.label or agent.name
    error = agent.error.get("message") if agent.error else None
    return ChildView(
        key=key,
        agent=agent.role or str(started.get("agent")),
        state=agent.state,
        child_run_id=_text(started.get("childRunId")),
        model=agent.model,
        tokens=agent.tokens_input + agent.tokens_output,
        cost_usd=round(agent.cost_usd, 10),
        output_reference=_text(started.get("outputReference")) if agent.state == AgentState.COMPLETED else None,
        error=_text(error),
    )


def subagents_view(store: RunStore, run_id: str, state: RunState, agents: list[AgentRecord]) -> SubagentsView | None:
    """The pi-subagents part of a run's view, or None for a run with no child, host step, lane or emit."""
    started: dict[str, dict[str, Any]] = {}
    hosts: dict[str, dict[str, Any]] = {}
    boards: dict[int, LaneBoardView] = {}
    emits: list[Any] = []
    console: list[ConsoleLineView] = []
    for event in store.events_of_types(run_id, (SUBAGENT_CHILD, SUBAGENT_HOST, SUBAGENT_LANES, SUBAGENT_EMIT,
                                                RUN_LOG)):
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type == SUBAGENT_CHILD:
            started[str(payload.get("key"))] = payload
        elif event.type == SUBAGENT_HOST:
            hosts[str(payload.get("key"))] = payload
        elif event.type == SUBAGENT_LANES and (board := lane_board(payload)) is not None:
            boards[board.call] = board
        elif event.type == SUBAGENT_EMIT:
            emits.append(payload.get("value"))
        elif event.type == RUN_LOG and isinstance(payload.get("console"), str):
            console.append(ConsoleLineView(payload["console"], str(payload.get("message", ""))))
    latest: dict[str, AgentRecord] = {}  # a child interrupted by a crash runs again as a new agent
    for agent in agents:
        if agent.journal_path and agent.journal_path.startswith(_CHILD_PREFIX):
            latest[agent.journal_path] = agent
    children = [_child(agent, started.get(path[len(_CHILD_PREFIX):], {})) for path, agent in latest.items()]
    if not (children or hosts or boards or emits or console):
        return None
    live = state in _LIVE
    host_steps = [
        HostStepView(
            key=key,
            command=_text(data.get("command")),
            state="interrupted" if data.get("state") == "running" and not live else str(data.get("state")),
            exit_code=_int(data.get("exitCode")),
            duration_ms=_int(data.get("durationMs")),
            output_path=_text(data.get("outputPath")),
            error=_text(data.get("error")),
        )
        for key, data in hosts.items()
    ]
    return SubagentsView(children, host_steps, [boards[call] for call in sorted(boards)], emits, console)
