"""The durable run store (SQLite, WAL) shared by every piflow process of a project."""

from piflow.engine.store.location import default_store_path, known_store_paths
from piflow.engine.store.records import (
    CHECKPOINT_STATES,
    DECISION_STATES,
    WORKTREE_STATES,
    AgentRecord,
    AttemptRecord,
    AttemptSetup,
    CheckpointRecord,
    DamagedRecord,
    DecisionRecord,
    EventRecord,
    RunRecord,
    StoreError,
    WorktreeRecord,
)
from piflow.engine.store.store import RunStore

__all__ = [
    "CHECKPOINT_STATES",
    "DECISION_STATES",
    "WORKTREE_STATES",
    "AgentRecord",
    "AttemptRecord",
    "AttemptSetup",
    "CheckpointRecord",
    "DamagedRecord",
    "DecisionRecord",
    "EventRecord",
    "RunRecord",
    "RunStore",
    "StoreError",
    "WorktreeRecord",
    "default_store_path",
    "known_store_paths",
]
