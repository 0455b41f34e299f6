"""The in-process event bus: every spec I event, published after it is persisted."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from piflow.engine.store import AgentRecord, RunRecord

RUN_STARTED: Final = "workflow:run-started"
RUN_RESUMED: Final = "workflow:run-resumed"
RUN_STATE_CHANGED: Final = "workflow:run-state-changed"
RUN_COMPLETED: Final = "workflow:run-completed"
RUN_FAILED: Final = "workflow:run-failed"
AGENT_STATE_CHANGED: Final = "workflow:agent-state-changed"
PHASE_CHANGED: Final = "workflow:phase-changed"
CHECKPOINT_STATE_CHANGED: Final = "workflow:checkpoint-state-changed"
BUDGET_EVENT: Final = "workflow:budget-event"
WORKTREE_CREATED: Final = "workflow:worktree-created"
# piflow's own events (not in the reference): a script's log() lines and run warnings.
RUN_LOG: Final = "piflow:log"
RUN_WARNING: Final = "piflow:warning"
# Requests written by a process that does not own the run; the owner carries them out.
CONTROL_REQUEST: Final = "piflow:control"


def base_payload(record: RunRecord) -> dict[str, Any]:
    """The fields every event of a run carries (spec I)."""
    return {"runId": record.id, "workflowName": record.workflow_name, "cwd": record.cwd, "timestamp": time.time()}


def agent_state_payload(rec: AgentRecord, previous: str | None) -> dict[str, Any]:
    """The `agent-state-changed` fields of an agent now in `rec.state` (spec I)."""
    payload: dict[str, Any] = {
        "agentId": rec.id,
        "displayLabel": rec.label or rec.name,
        "structuralPath": rec.structural_path,
        "state": rec.state,
        "attempt": rec.attempts,
    }
    if rec.role is not None:
        payload["role"] = rec.role
    if rec.worktree_owner is not None:
        payload["worktreeOwner"] = rec.worktree_owner
    if rec.parent_id is not None:
        payload["parentId"] = rec.parent_id
    if rec.parent_breadcrumb is not None:
        payload["parentBreadcrumb"] = rec.parent_breadcrumb
    if previous is not None:
        payload["previousState"] = previous
    return payload


@dataclass(frozen=True)
class Event:
    """One published event; `payload` already holds the base fields of spec I."""

    seq: int
    run_id: str
    type: str
    payload: dict[str, Any]


Listener = Callable[[Event], None]


class EventBus:
    """Best-effort fan-out: listener errors are logged and ignored, never reach the engine."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def publish(self, event: Event) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not break a run
                import logging  # on a listener's failure only: a run never needs logging otherwise

                logging.getLogger(__name__).exception("event listener failed for %s", event.type)
