"""Run store: the append-only event log (spec I) and budget events (spec H)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store_support import new_run, run_child

from piflow.engine.events import BUDGET_EVENT
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def store(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


def test_events_come_back_in_append_order_with_increasing_seq(store: RunStore) -> None:
    first, second = new_run(store), new_run(store)
    seqs = [
        store.append_event(first.id, "workflow:run-started", {"n": 1}),
        store.append_event(second.id, "workflow:run-started", {"n": 2}),
        store.append_event(first.id, "workflow:phase-changed", {"phase": "audit"}),
    ]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    events = store.events()
    assert [(e.seq, e.run_id, e.type, e.payload) for e in events] == [
        (seqs[0], first.id, "workflow:run-started", {"n": 1}),
        (seqs[1], second.id, "workflow:run-started", {"n": 2}),
        (seqs[2], first.id, "workflow:phase-changed", {"phase": "audit"}),
    ]
    assert [e.seq for e in store.events(first.id)] == [seqs[0], seqs[2]]
    assert events[0].to_json().keys() == {"seq", "runId", "type", "payload", "at"}


def test_events_after_a_seq_and_with_a_limit(store: RunStore) -> None:
    run = new_run(store)
    seqs = [store.append_event(run.id, "piflow:log", {"i": i}) for i in range(5)]
    assert [e.payload["i"] for e in store.events(after_seq=seqs[1])] == [2, 3, 4]
    assert [e.payload["i"] for e in store.events(run.id, after_seq=seqs[1], limit=2)] == [2, 3]
    assert store.events(run.id, after_seq=seqs[-1]) == []


def test_last_event_seq_is_the_cheap_anything_new_check(store: RunStore) -> None:
    assert store.last_event_seq() == 0
    first, second = new_run(store), new_run(store)
    seq = store.append_event(first.id, "workflow:run-started", {})
    assert store.last_event_seq() == seq
    assert store.last_event_seq(second.id) == 0
    later = store.append_event(second.id, "workflow:run-started", {})
    assert store.last_event_seq() == later
    assert store.last_event_seq(first.id) == seq


def test_seq_is_never_reused_after_a_run_is_deleted(store: RunStore) -> None:
    old, kept = new_run(store), new_run(store)
    store.append_event(kept.id, "a", {})
    last = store.append_event(old.id, "b", {})
    store.delete_run(old.id)
    assert store.append_event(kept.id, "c", {}) > last


def test_a_follower_in_another_process_sees_events_after_its_cursor(store: RunStore, path: Path) -> None:
    run = new_run(store)
    cursor = store.append_event(run.id, "workflow:run-started", {})
    code = "store.append_event(sys.argv[2], 'workflow:checkpoint-state-changed', {'state': 'approved'})"
    run_child(path, code, run.id)
    assert store.last_event_seq() > cursor
    (event,) = store.events(after_seq=cursor)
    assert (event.type, event.payload) == ("workflow:checkpoint-state-changed", {"state": "approved"})


def test_events_of_an_unknown_run_are_refused(store: RunStore) -> None:
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.append_event("nope", "x", {})
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.events("nope")


# -- budget events -------------------------------------------------------------------------------
def _budget_event(kind: str, version: int, **extra: object) -> dict[str, object]:
    return {
        "type": kind,
        "budgetVersion": version,
        "dimensions": ["tokens"],
        "usage": {"tokens": 150},
        "limits": {"tokens": {"soft": 100}},
        "at": 1.0,
        **extra,
    }


def test_each_budget_event_is_recorded_once_per_version_type_and_proposal(store: RunStore) -> None:
    run = new_run(store)
    assert store.add_budget_event(run.id, _budget_event("soft_crossed", 1)) is True
    assert store.add_budget_event(run.id, _budget_event("soft_crossed", 1, at=2.0)) is False
    assert store.add_budget_event(run.id, _budget_event("soft_crossed", 2)) is True
    assert store.add_budget_event(run.id, _budget_event("adjustment_requested", 2, proposalId="a")) is True
    assert store.add_budget_event(run.id, _budget_event("adjustment_requested", 2, proposalId="b")) is True
    assert store.add_budget_event(run.id, _budget_event("adjustment_requested", 2, proposalId="a")) is False
    other = new_run(store)
    assert store.add_budget_event(other.id, _budget_event("soft_crossed", 1)) is True
    assert [(e["type"], e["budgetVersion"], e.get("proposalId")) for e in store.budget_events(run.id)] == [
        ("soft_crossed", 1, None),
        ("soft_crossed", 2, None),
        ("adjustment_requested", 2, "a"),
        ("adjustment_requested", 2, "b"),
    ]
    assert store.budget_events(run.id)[0]["at"] == 1.0


def test_budget_events_are_events_of_their_type(store: RunStore) -> None:
    run = new_run(store)
    store.append_event(run.id, "workflow:run-started", {})
    store.add_budget_event(run.id, _budget_event("hard_exhausted", 1))
    assert [e.type for e in store.events(run.id)] == ["workflow:run-started", BUDGET_EVENT]
    assert store.budget_events(run.id) == [_budget_event("hard_exhausted", 1)]


def test_a_budget_event_needs_its_type_and_version(store: RunStore) -> None:
    run = new_run(store)
    with pytest.raises(WorkflowError) as raised:
        store.add_budget_event(run.id, {"type": "soft_crossed"})
    assert (raised.value.code, raised.value.message) == (
        "INTERNAL_ERROR",
        "Budget events require budgetVersion",
    )
