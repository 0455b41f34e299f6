"""The rows of the run store as frozen dataclasses, with their camelCase JSON views.

Records are plain data handed between the store and the engine; the store owns their
encoding in SQLite, the engine owns their meaning (spec F, G.1, H, I).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from enum import StrEnum
from functools import cache
from typing import Any, Final, TypeVar

from piflow.config.resources import ResourcePolicy
from piflow.engine.lifecycle import AgentState, CheckpointState, DecisionState, RunState, WorktreeState
from piflow.errors import WorkflowError

RUN_STATES: Final = frozenset(RunState)
AGENT_STATES: Final = frozenset(AgentState)
CHECKPOINT_STATES: Final = frozenset(CheckpointState)
DECISION_STATES: Final = frozenset(DecisionState)
WORKTREE_STATES: Final = frozenset(WorktreeState)


class StoreError(WorkflowError):
    """The run store failed (disk full, I/O error, busy past the timeout): nothing of the failed
    transaction was kept, everything committed before it is safe."""

    def __init__(self, message: str) -> None:
        super().__init__("INTERNAL_ERROR", message)


class DamagedRecord(StoreError):
    """A stored row piflow cannot read (edited by hand, written by another tool): which one and why.

    Raised while decoding, so one damaged row fails the read that met it and nothing else.
    """

    def __init__(self, table: str, key: str, problem: str) -> None:
        super().__init__(f"Damaged row {key} in the run store's {table} table: {problem}")
        self.table = table
        self.key = key
        self.problem = problem


def check_state(kind: str, value: object, allowed: frozenset[str]) -> None:
    """Refuse a state outside the spec's list before it reaches the store (a programming error)."""
    if value not in allowed:
        raise WorkflowError("INTERNAL_ERROR", f"Invalid {kind} state: {value!r}")


_State = TypeVar("_State", bound=StrEnum)


def _enum_state(record: object, kind: str, states: type[_State]) -> None:
    """Set `record.state` to its enum member: a record read back from the store carries the stored
    text, and the engine compares members; a text outside the enum is refused as `check_state` does."""
    value = record.state  # type: ignore[attr-defined]
    if type(value) is not states:
        try:
            object.__setattr__(record, "state", states(value))
        except ValueError:
            raise WorkflowError("INTERNAL_ERROR", f"Invalid {kind} state: {value!r}") from None


def empty_usage() -> dict[str, Any]:
    """A run's budget usage before any work (spec H dimensions)."""
    return {"tokens": 0, "costUsd": 0, "durationMs": 0, "agentLaunches": 0}


@cache
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


class _Record:
    """`to_json()` for every record: each field under its camelCase name."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord(_Record):
    """One workflow run (spec G.1 `state.json`); `result` is meaningful only when `has_result`.

    Keyword-only: with this many optional fields, positional construction invites mix-ups.
    """

    id: str
    workflow_name: str
    cwd: str
    state: RunState
    concurrency: int
    backend: str
    script_path: str | None = None
    phase: str | None = None
    error: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    budget_version: int = 1
    usage: dict[str, Any] = field(default_factory=empty_usage)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    result: Any = None
    has_result: bool = False
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _enum_state(self, "run", RunState)

    def to_json(self) -> dict[str, Any]:
        """The run without `hasResult`: `result` is present exactly when the run has one."""
        data = _Record.to_json(self)
        del data["hasResult"]
        if not self.has_result:
            del data["result"]
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRecord(_Record):
    """One agent node (`id` is `<runId>:<n>`); `model` is `provider/model[:thinking]`. Keyword-only."""

    id: str
    run_id: str
    n: int
    name: str
    model: str
    state: AgentState
    label: str | None = None
    role: str | None = None
    requested_model: str | None = None
    tools: list[str] = field(default_factory=list)
    structural_path: list[str] = field(default_factory=list)
    journal_path: str | None = None
    parent_id: str | None = None
    parent_breadcrumb: str | None = None
    worktree_owner: str | None = None
    attempts: int = 0
    tokens_input: int = 0
    tokens_output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0
    activity: str | None = None
    error: dict[str, Any] | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        _enum_state(self, "agent", AgentState)


@dataclass(frozen=True, slots=True)
class AttemptSetup:
    """What an attempt ran with (spec J.3 `setup`), for audit: the setup hooks that ran (in order),
    the session's model, thinking, tools and cwd, the effective system prompt when the backend
    reports it (whole, as audit needs the words; its SHA-256 lets attempts compare at a glance) and
    the resource policy when one applied."""

    hook_names: tuple[str, ...]
    model: str | None
    thinking: str | None
    tools: tuple[str, ...]
    cwd: str | None
    system_prompt: str | None = None
    system_prompt_sha256: str | None = None
    disabled_resources: ResourcePolicy | None = None


@dataclass(frozen=True, slots=True)
class AttemptRecord(_Record):
    """One attempt of an agent (spec J.3 `attemptDetails`), written at start and again at its end."""

    agent_id: str
    attempt: int
    started_at: float
    ended_at: float | None = None
    error: dict[str, Any] | None = None
    tokens_input: int = 0
    tokens_output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0
    transcript_path: str | None = None
    session_id: str | None = None
    setup: AttemptSetup | None = None
    """What the attempt started with; None for attempts of stores from before it was recorded."""


@dataclass(frozen=True, slots=True)
class CheckpointRecord(_Record):
    """A `checkpoint()` the run waits on (spec F.4); its answer is also journaled."""

    run_id: str
    label: str
    prompt: str
    context: Any
    state: CheckpointState
    created_at: float
    answered_at: float | None = None

    def __post_init__(self) -> None:
        _enum_state(self, "checkpoint", CheckpointState)


@dataclass(frozen=True, slots=True)
class DecisionRecord(_Record):
    """A budget adjustment proposal (spec H); `payload` holds consumed/previous/proposed/budgetVersion."""

    run_id: str
    proposal_id: str
    kind: str
    payload: dict[str, Any]
    state: DecisionState = DecisionState.PENDING
    created_at: float = field(default_factory=time.time)
    answered_at: float | None = None

    def __post_init__(self) -> None:
        _enum_state(self, "decision", DecisionState)


@dataclass(frozen=True, slots=True)
class EventRecord(_Record):
    """One persisted event (spec I); `seq` is global, strictly increasing and never reused."""

    seq: int
    run_id: str
    type: str
    payload: Any
    at: float


@dataclass(frozen=True, slots=True)
class WorktreeRecord(_Record):
    """A worktree owned by part of a run (spec G.1); `creating` until git has finished."""

    run_id: str
    owner: str
    path: str
    branch: str
    base: str
    cwd: str
    state: WorktreeState = WorktreeState.CREATING

    def __post_init__(self) -> None:
        _enum_state(self, "worktree", WorktreeState)
