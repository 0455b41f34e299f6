"""Run store: checkpoints (spec F.4) and budget decisions (spec H), answered from anywhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store_support import new_run, start_child

from piflow.engine.store import DecisionRecord, RunStore
from piflow.errors import WorkflowError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def store(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


# -- checkpoints ---------------------------------------------------------------------------------
def test_awaiting_a_checkpoint_twice_keeps_the_first(store: RunStore) -> None:
    run = new_run(store)
    assert store.await_checkpoint(run.id, "deploy", "Deploy now?", {"files": 3}) is True
    assert store.await_checkpoint(run.id, "deploy", "Other prompt", None) is False
    (checkpoint,) = store.checkpoints(run.id)
    assert (checkpoint.label, checkpoint.prompt, checkpoint.context, checkpoint.state) == (
        "deploy",
        "Deploy now?",
        {"files": 3},
        "awaiting",
    )
    assert checkpoint.answered_at is None
    assert checkpoint.to_json()["answeredAt"] is None


def test_the_first_answer_wins_and_is_journaled(store: RunStore) -> None:
    run = new_run(store)
    store.await_checkpoint(run.id, "ship it?", "Ship?", None)
    assert store.answer_checkpoint(run.id, "ship it?", approved=False) is True
    assert store.answer_checkpoint(run.id, "ship it?", approved=True) is False
    (checkpoint,) = store.checkpoints(run.id)
    assert checkpoint.state == "rejected" and checkpoint.answered_at is not None
    assert store.journal(run.id) == {"checkpoint/ship%20it%3F": False}
    assert store.awaiting_checkpoints(run.id) == []


def test_awaiting_checkpoints_lists_only_unanswered_ones_in_order(store: RunStore) -> None:
    run = new_run(store)
    for label in ("c", "a", "b"):
        store.await_checkpoint(run.id, label, label.upper(), None)
    store.answer_checkpoint(run.id, "a", approved=True)
    assert [c.label for c in store.awaiting_checkpoints(run.id)] == ["c", "b"]
    assert [c.label for c in store.checkpoints(run.id)] == ["c", "a", "b"]


def test_answering_a_checkpoint_that_is_not_awaited_does_nothing(store: RunStore) -> None:
    run = new_run(store)
    assert store.answer_checkpoint(run.id, "never", approved=True) is False
    assert store.journal(run.id) == {}
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.answer_checkpoint("nope", "never", approved=True)


def test_an_answer_whose_journal_path_exists_changes_nothing(store: RunStore) -> None:
    run = new_run(store)
    store.journal_put(run.id, "checkpoint/go", True)
    store.await_checkpoint(run.id, "go", "Go?", None)
    with pytest.raises(WorkflowError, match="Completed structural path already exists: checkpoint/go"):
        store.answer_checkpoint(run.id, "go", approved=False)
    assert store.checkpoints(run.id)[0].state == "awaiting"
    assert store.journal(run.id) == {"checkpoint/go": True}


def test_a_second_store_sees_the_checkpoint_and_its_answer_wins_over_later_ones(
    store: RunStore, path: Path
) -> None:
    run = new_run(store)
    store.await_checkpoint(run.id, "go", "Go?", None)
    with RunStore.open(path) as other:
        assert [c.label for c in other.awaiting_checkpoints(run.id)] == ["go"]
        assert other.answer_checkpoint(run.id, "go", approved=True) is True
    assert store.answer_checkpoint(run.id, "go", approved=False) is False
    assert store.journal(run.id) == {"checkpoint/go": True}
    assert store.awaiting_checkpoints(run.id) == []


def test_exactly_one_of_several_racing_processes_answers(store: RunStore, path: Path) -> None:
    run = new_run(store)
    store.await_checkpoint(run.id, "go", "Go?", None)
    code = """
        approved = sys.argv[3] == "yes"
        print(store.answer_checkpoint(sys.argv[2], "go", approved))
    """
    answers = ["yes" if i % 2 else "no" for i in range(6)]
    children = [start_child(path, code, run.id, answer) for answer in answers]
    outcomes = []
    for child, answer in zip(children, answers, strict=True):
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        outcomes.append((out.strip(), answer))
    winners = [answer for printed, answer in outcomes if printed == "True"]
    assert len(winners) == 1
    assert [printed for printed, _ in outcomes].count("False") == 5
    (checkpoint,) = store.checkpoints(run.id)
    assert checkpoint.state == ("approved" if winners[0] == "yes" else "rejected")
    assert store.journal(run.id) == {"checkpoint/go": winners[0] == "yes"}


# -- budget decisions ----------------------------------------------------------------------------
def _proposal(run_id: str, proposal_id: str = "p-1") -> DecisionRecord:
    return DecisionRecord(
        run_id,
        proposal_id,
        "budget",
        {
            "consumed": {"tokens": 210},
            "previous": {"tokens": {"hard": 200}},
            "proposed": {"tokens": {"hard": 400}},
            "budgetVersion": 1,
        },
    )


def test_a_proposal_is_stored_once_and_listed(store: RunStore) -> None:
    run = new_run(store)
    proposal = _proposal(run.id)
    assert store.put_decision(proposal) is True
    assert store.put_decision(DecisionRecord(run.id, "p-1", "budget", {"other": True})) is False
    assert store.decisions(run.id) == [proposal]
    assert proposal.to_json()["proposalId"] == "p-1"


def test_the_first_answer_to_a_pending_proposal_wins(store: RunStore, path: Path) -> None:
    run = new_run(store)
    store.put_decision(_proposal(run.id))
    with RunStore.open(path) as other:
        assert other.answer_decision(run.id, "p-1", approved=True) is True
    assert store.answer_decision(run.id, "p-1", approved=False) is False
    (decision,) = store.decisions(run.id)
    assert decision.state == "approved" and decision.answered_at is not None


def test_answering_an_unknown_proposal_does_nothing(store: RunStore) -> None:
    run = new_run(store)
    assert store.answer_decision(run.id, "missing", approved=True) is False
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.answer_decision("nope", "p-1", approved=True)
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.put_decision(_proposal("nope"))


def test_a_decision_state_must_be_one_of_the_spec(store: RunStore) -> None:
    with pytest.raises(WorkflowError, match="Invalid decision state: 'maybe'"):
        DecisionRecord("r", "p", "budget", {}, state="maybe")
