"""The durable run store (SQLite, WAL) shared by every piflow process of a project.

The public names are imported on first use (`piflow.lazy`): an owner process computes its store's
location (`default_store_path`) and spawns its run's worker before it loads SQLite and the records.
"""

from typing import TYPE_CHECKING

from piflow.lazy import export_lazily

if TYPE_CHECKING:
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

export_lazily(
    __name__,
    {
        "CHECKPOINT_STATES": "piflow.engine.store.records",
        "DECISION_STATES": "piflow.engine.store.records",
        "WORKTREE_STATES": "piflow.engine.store.records",
        "AgentRecord": "piflow.engine.store.records",
        "AttemptRecord": "piflow.engine.store.records",
        "AttemptSetup": "piflow.engine.store.records",
        "CheckpointRecord": "piflow.engine.store.records",
        "DamagedRecord": "piflow.engine.store.records",
        "DecisionRecord": "piflow.engine.store.records",
        "EventRecord": "piflow.engine.store.records",
        "RunRecord": "piflow.engine.store.records",
        "StoreError": "piflow.engine.store.records",
        "WorktreeRecord": "piflow.engine.store.records",
        "RunStore": "piflow.engine.store.store",
        "default_store_path": "piflow.engine.store.location",
        "known_store_paths": "piflow.engine.store.location",
    },
)
