"""Typed host/worker messages and state enums: what crosses the pipe enters as a typed call or is
refused at the boundary, and the states the engine compares are the strings the store and JSON carry."""

from __future__ import annotations

import json
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_support import finished, wait_for, write_fixtures
from test_store_support import new_run

from piflow.engine import events
from piflow.engine.engine import Engine
from piflow.engine.lifecycle import AgentState, CheckpointState, RunState
from piflow.engine.store import DamagedRecord, RunStore
from piflow.engine.worker.boundary import admit
from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.protocol import (
    AgentCall,
    CheckpointCall,
    FunctionCall,
    LogCall,
    PhaseCall,
    Placement,
    TurnCall,
    WorkerCall,
)
from piflow.errors import WorkflowError


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


PLACED = {"path": ["batch", "a"], "occurrence": 2, "worktreeOwner": "worktree/named/w"}
MALFORMED = "call reached the host malformed"


# -- the boundary builds the typed call ---------------------------------------------------------

@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            {"op": "agent", "prompt": "p", "options": {"label": "l"}, "identity": {**PLACED, "callSite": "3:9"}},
            AgentCall(7, "p", {"label": "l"}, "3:9", Placement(("batch", "a"), 2, "worktree/named/w")),
        ),
        (
            {"op": "turn", "prompt": "p", "options": None, "turn": 3,
             "conversation": {"name": "dev", "callSite": "1:2", "path": [], "occurrence": 1, "worktreeOwner": None}},
            TurnCall(7, "p", None, "dev", "1:2", Placement((), 1), 3),
        ),
        ({"op": "checkpoint", "value": {"name": "n"}, "label": None}, CheckpointCall(7, {"name": "n"}, None)),
        ({"op": "phase", "name": 5}, PhaseCall(7, 5)),
        ({"op": "log", "message": "hi"}, LogCall(7, "hi")),
        (
            {"op": "function", "name": "lookup", "input": {"q": 1}, "identity": PLACED},
            FunctionCall(7, "lookup", {"q": 1}, Placement(("batch", "a"), 2, "worktree/named/w")),
        ),
    ],
)
def test_a_well_formed_call_enters_as_its_typed_call(message: dict[str, Any], expected: WorkerCall) -> None:
    assert admit(7, {"t": "call", "id": 7, **message}) == expected


@pytest.mark.parametrize(
    ("message", "code", "text"),
    [
        ({"op": "agent", "prompt": "p", "identity": {"path": "batch", "occurrence": 1, "callSite": "1:2"}},
         "INVALID_METADATA", MALFORMED),
        ({"op": "agent", "prompt": "p", "identity": {"path": [], "occurrence": True, "callSite": "1:2"}},
         "INVALID_METADATA", MALFORMED),
        ({"op": "agent", "prompt": "p", "identity": {"path": [], "occurrence": 1}}, "INVALID_METADATA", MALFORMED),
        ({"op": "turn", "prompt": "p", "turn": -1,
          "conversation": {"name": "c", "callSite": "1:2", "path": [], "occurrence": 1}},
         "INVALID_METADATA", MALFORMED),
        ({"op": "checkpoint", "value": None, "label": 3}, "INVALID_METADATA", MALFORMED),
        ({"op": "function", "name": "f", "input": {}, "identity": {"path": [1], "occurrence": 1}},
         "INVALID_METADATA", MALFORMED),
        ({"op": "function", "name": "f", "input": "\ud800", "identity": {"path": [], "occurrence": 1}},
         "RESULT_INVALID", "Invalid input for f: it must be well-formed Unicode"),
        ({"op": "log", "message": _deep(200)}, "INVALID_METADATA", "log message must be nested at most 128"),
        ({"op": "launch"}, "INTERNAL_ERROR", "Unknown workflow worker call: launch"),
    ],
)
def test_a_malformed_call_is_refused_with_the_error_the_script_sees(
    message: dict[str, Any], code: str, text: str
) -> None:
    refused = admit(1, {"t": "call", "id": 1, **message})
    assert isinstance(refused, WorkflowError)
    assert (refused.code, text in refused.message) == (code, True)


# -- a refused call never reaches dispatch -------------------------------------------------------

FAKE_WORKER = r"""
import json, sys
sys.stdin.readline(), sys.stdin.readline()  # the compile and start messages
good = {"callSite": "0:5", "path": [], "occurrence": 1, "worktreeOwner": None}
sys.stdout.write(json.dumps({"t": "call", "id": 1, "op": "agent", "prompt": "bad",
                             "identity": {**good, "path": "not a list"}}) + "\n")
sys.stdout.write(json.dumps({"t": "call", "id": 2, "op": "agent", "prompt": "good", "identity": good}) + "\n")
sys.stdout.flush()
answers = {}
while len(answers) < 2:
    for result in json.loads(sys.stdin.readline())["results"]:
        answers[result["id"]] = result
sys.stdout.write(json.dumps({"t": "done", "ok": True, "value": [answers[1], answers[2]]}) + "\n")
sys.stdout.flush()
"""


async def test_a_malformed_message_is_answered_at_the_boundary_and_never_dispatched(tmp_path: Path) -> None:
    """A worker (here one speaking the protocol from a script) sends a malformed and a good call:
    the host's dispatch sees only the good one, typed; the malformed one is failed back to the script."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    dispatched: list[WorkerCall] = []

    def answer(call: WorkerCall) -> Any:
        dispatched.append(call)
        return "served"

    worker = WorkerProcess(python=str(python))
    await worker.start(body="")
    refused, served = await worker.serve(answer)
    assert dispatched == [AgentCall(2, "good", None, "0:5", Placement((), 1))]
    assert served == {"id": 2, "ok": True, "value": "served"}
    assert refused["id"] == 1 and refused["ok"] is False
    assert refused["error"]["code"] == "INVALID_METADATA"
    assert MALFORMED in refused["error"]["message"]


# -- states: enum members in the engine, the same strings in the store and JSON ------------------

def test_state_enums_hold_the_specs_strings() -> None:
    assert [state.value for state in RunState] == [
        "queued", "running", "pausing", "paused", "awaiting_input",
        "completed", "failed", "stopped", "interrupted", "budget_exhausted",
    ]
    assert [state.value for state in AgentState] == [
        "queued", "running", "waiting_for_child", "paused", "retrying", "completed", "failed", "cancelled",
    ]
    assert [state.value for state in CheckpointState] == ["awaiting", "approved", "rejected"]


async def test_a_run_through_the_store_round_trips_its_states(engine: Engine, launch: Any, store: RunStore,
                                                             project: Path) -> None:
    fixtures = write_fixtures(project, {"responses": [{"match": {"prompt": "x"}, "text": "done"}]})
    run_id = await launch('await agent("x"); return await checkpoint({name: "go", prompt: "Go?", context: 1})',
                          fixtures=fixtures)
    await wait_for(lambda: store.awaiting_checkpoints(run_id))
    [awaiting] = store.awaiting_checkpoints(run_id)
    assert awaiting.state is CheckpointState.AWAITING
    engine.respond(run_id, name="go", approved=True)
    record = await finished(engine, run_id)
    assert record.result == "approved"

    stored = store.get_run(run_id)
    assert stored is not None and stored.state is RunState.COMPLETED
    assert [agent.state for agent in store.agents(run_id)] == [AgentState.COMPLETED]
    assert all(type(agent.state) is AgentState for agent in store.agents(run_id))
    with sqlite3.connect(store.location) as raw:  # the text columns keep the spec's strings
        assert raw.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchall() == [("completed",)]
        assert raw.execute("SELECT state FROM agents WHERE run_id = ?", (run_id,)).fetchall() == [("completed",)]
        assert raw.execute("SELECT state FROM checkpoints WHERE run_id = ?", (run_id,)).fetchall() == [("approved",)]
    assert json.loads(json.dumps(stored.to_json()))["state"] == "completed"
    states = [event.payload["state"] for event in store.events(run_id) if event.type == events.RUN_STATE_CHANGED]
    assert states == ["awaiting_input", "running", "completed"]


def test_a_stored_state_outside_the_enum_is_a_damaged_row(store: RunStore) -> None:
    run = new_run(store)
    with sqlite3.connect(store.location) as raw:
        raw.execute("UPDATE runs SET state = 'finished' WHERE id = ?", (run.id,))
    with pytest.raises(DamagedRecord) as damaged:
        store.get_run(run.id)
    assert "Invalid run state: 'finished'" in str(damaged.value)
