"""Controlling a run this process does not drive: plain requests and records in its store.

Pause, stop and checkpoint answers for a run owned by another process (or by none: its owner
died) need no engine: a live owner is asked through a control event it picks up, a run without
one is settled in the store directly. The engine uses these for runs it does not drive, and the
language server (which drives none) uses them for every run. Nothing here recovers other runs:
a run whose owner is dead is read as interrupted, and recorded so only by what is asked of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from piflow.engine import events
from piflow.engine.lifecycle import IRREVERSIBLE, AgentState, CheckpointState, RunState
from piflow.engine.store import RunRecord, RunStore
from piflow.engine.views import observed_run
from piflow.errors import WorkflowError


@dataclass(frozen=True, slots=True)
class ControlOutcome:
    """What a control request (stop, resume, a checkpoint or budget answer) came to; a field that
    does not apply to the request is None. `state` is the run's (or, for a checkpoint answer,
    `checkpoint_answered`/`not_pending`; `unknown` for a run that is not there)."""

    state: str
    run_id: str | None = None
    accepted: bool | None = None
    stopped: bool | None = None
    approved: bool | None = None
    reason: str | None = None
    proposal_id: str | None = None
    message: str | None = None


def owner_pid(store: RunStore, run_id: str, token: str | None = None) -> int | None:
    """The pid of the live process owning the run, unless it is the one holding `token`."""
    owner = store.lease_owner(run_id)
    return None if owner is None or owner[1] == token else owner[0]


def find(store: RunStore, run_id: str) -> RunRecord:
    """The run named by `run_id` (a prefix of 8+ characters is enough), as it is."""
    with store.consistent_read():
        record = store.get_run(store.resolve_run_id(run_id))
        if record is None:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
        return observed_run(store, record)


def request(store: RunStore, run_id: str, action: str, **extra: Any) -> None:
    """Ask the run's owner to do something (it polls its store for these)."""
    store.append_event(run_id, events.CONTROL_REQUEST, {"runId": run_id, "action": action, **extra})


def pause(store: RunStore, record: RunRecord) -> RunState:
    """Ask the live owner of a running run to pause it."""
    if record.state != RunState.RUNNING or owner_pid(store, record.id) is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot pause {record.state} run")
    request(store, record.id, "pause")
    return RunState.PAUSING


def stop(store: RunStore, record: RunRecord, token: str | None = None) -> ControlOutcome:
    """Stop a run: its live owner (other than `token`'s) is asked to; a run without one is stopped
    here, with the agents its dead owner left unsettled cancelled. A stopped run is final."""
    if record.state in IRREVERSIBLE:
        return ControlOutcome(record.state, run_id=record.id, stopped=False, reason="already_terminal")
    if owner_pid(store, record.id, token) is not None:
        request(store, record.id, "stop")
    else:
        with store.batch():
            set_state(store, record, RunState.STOPPED, "stopped")
            cancel_abandoned_agents(store, record)
    return ControlOutcome(RunState.STOPPED, run_id=record.id, stopped=True)


def answer_checkpoint(
    store: RunStore, record: RunRecord, name: str, approved: bool
) -> tuple[ControlOutcome, events.Event | None]:
    """Record the first answer to a waiting checkpoint (its owner picks it up); the reply, and the
    event recorded (None when the checkpoint was not waiting)."""
    with store.batch():
        accepted = store.answer_checkpoint(record.id, name, approved)
        recorded = None
        if accepted:
            answer = CheckpointState.APPROVED if approved else CheckpointState.REJECTED
            payload = {**events.base_payload(record), "name": name, "state": answer}
            seq = store.append_event(record.id, events.CHECKPOINT_STATE_CHANGED, payload)
            recorded = events.Event(seq, record.id, events.CHECKPOINT_STATE_CHANGED, payload)
    reply = ControlOutcome("checkpoint_answered" if accepted else "not_pending", accepted=accepted,
                           approved=approved, reason="checkpoint")
    return reply, recorded


def set_state(store: RunStore, record: RunRecord, state: RunState, reason: str) -> None:
    """Record a run's new state with its event."""
    with store.batch():
        store.update_run(record.id, state=state)
        store.append_event(record.id, events.RUN_STATE_CHANGED, {
            **events.base_payload(record), "previousState": record.state, "state": state, "reason": reason,
        })


def cancel_abandoned_agents(store: RunStore, record: RunRecord) -> None:
    """Agents a dead owner left unsettled are cancelled (with their events) before the run goes on or ends."""
    error = {"code": "CANCELLED", "message": "Agent cancelled: its run's process ended"}
    with store.batch():
        for agent in store.cancel_unsettled_agents(record.id, error):
            cancelled = replace(agent, state=AgentState.CANCELLED, activity=None, error=error)
            store.append_event(record.id, events.AGENT_STATE_CHANGED, {
                **events.base_payload(record), **events.agent_state_payload(cancelled, agent.state),
            })
