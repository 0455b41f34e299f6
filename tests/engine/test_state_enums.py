"""Budget proposals and worktrees have enum states like runs, agents and checkpoints: the engine
compares members, while the store and the JSON keep the spec's words."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from test_store_support import new_run

from piflow.engine.lifecycle import DecisionState, WorktreeState
from piflow.engine.store import DecisionRecord, RunStore, WorktreeRecord


def test_decision_and_worktree_states_read_back_as_members_and_are_stored_as_words(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore.open(path) as store:
        run = new_run(store)
        store.put_decision(DecisionRecord(run.id, "p-1", "budget", {"proposed": {}}))
        store.answer_decision(run.id, "p-1", approved=False)
        store.put_worktree(WorktreeRecord(run.id, "w", "/wt", "b", "c0ffee", "/wt", state=WorktreeState.READY))
        (decision,) = store.decisions(run.id)
        (worktree,) = store.worktrees(run.id)
        assert type(decision.state) is DecisionState and decision.state is DecisionState.REJECTED
        assert type(worktree.state) is WorktreeState and worktree.state is WorktreeState.READY
        assert json.loads(json.dumps(decision.to_json()))["state"] == "rejected"
    with sqlite3.connect(path) as connection:
        stored = connection.execute("SELECT d.state, w.state FROM decisions d, worktrees w").fetchone()
    assert stored == ("rejected", "ready")


def test_a_new_proposal_is_pending_and_a_new_worktree_is_being_created() -> None:
    assert DecisionRecord("r", "p", "budget", {}).state is DecisionState.PENDING
    assert WorktreeRecord("r", "w", "/wt", "b", "c0ffee", "/wt").state is WorktreeState.CREATING
    assert DecisionRecord("r", "p", "budget", {}, state="approved").state is DecisionState.APPROVED  # type: ignore[arg-type]
