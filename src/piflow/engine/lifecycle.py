"""The states of runs, agents, checkpoints, decisions and worktrees (spec F), and their groups.

Values only: every reader of the store imports them (`piflow runs` too), so nothing here loads
anyio; the cooperative pause of a live run that moves between them is `engine/run_lifecycle.py`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class RunState(StrEnum):
    """A run's state (spec F.1); the values are what the store, events and JSON outputs carry."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    AWAITING_INPUT = "awaiting_input"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    BUDGET_EXHAUSTED = "budget_exhausted"


class AgentState(StrEnum):
    """An agent's state (spec F.2)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_CHILD = "waiting_for_child"
    PAUSED = "paused"
    RETRYING = "retrying"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CheckpointState(StrEnum):
    """A `checkpoint()`'s state (spec F.4): awaiting until answered."""

    AWAITING = "awaiting"
    APPROVED = "approved"
    REJECTED = "rejected"


class DecisionState(StrEnum):
    """A budget adjustment proposal's state (spec H): pending until approved or rejected."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class WorktreeState(StrEnum):
    """A worktree's state (spec G.1): creating until git has finished."""

    CREATING = "creating"
    READY = "ready"


IRREVERSIBLE: Final = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.STOPPED})
RESUMABLE: Final = frozenset({RunState.PAUSED, RunState.INTERRUPTED, RunState.BUDGET_EXHAUSTED})
ENDED: Final = IRREVERSIBLE | {RunState.INTERRUPTED, RunState.BUDGET_EXHAUSTED}

AGENT_SETTLED: Final = frozenset({AgentState.COMPLETED, AgentState.FAILED, AgentState.CANCELLED})
