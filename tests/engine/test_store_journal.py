"""Run store: the journal (spec G.3) and batches (one transaction for many calls)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_store_support import new_run

from piflow.engine.store import AgentRecord, RunStore
from piflow.errors import WorkflowError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def store(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


class Boom(Exception):
    pass


def test_journal_returns_every_completed_path_in_completion_order(store: RunStore) -> None:
    run = new_run(store)
    assert store.journal(run.id) == {}
    store.journal_put(run.id, "agent/b/callsite%3A1%3A2/occurrence%3A1", {"value": [1, 2]})
    store.journal_put(run.id, "agent/a/callsite%3A1%3A2/occurrence%3A1", None)
    store.journal_put(run.id, "checkpoint/go", False)
    journal = store.journal(run.id)
    assert journal == {
        "agent/b/callsite%3A1%3A2/occurrence%3A1": {"value": [1, 2]},
        "agent/a/callsite%3A1%3A2/occurrence%3A1": None,
        "checkpoint/go": False,
    }
    assert list(journal) == [
        "agent/b/callsite%3A1%3A2/occurrence%3A1",
        "agent/a/callsite%3A1%3A2/occurrence%3A1",
        "checkpoint/go",
    ]


def test_journals_of_runs_are_separate(store: RunStore) -> None:
    first, second = new_run(store), new_run(store)
    store.journal_put(first.id, "agent/x", 1)
    store.journal_put(second.id, "agent/x", 2)
    assert store.journal(first.id) == {"agent/x": 1}
    assert store.journal(second.id) == {"agent/x": 2}


def test_storing_a_path_twice_is_a_duplicate_and_keeps_the_first_value(store: RunStore) -> None:
    run = new_run(store)
    store.journal_put(run.id, "agent/x", "first")
    with pytest.raises(WorkflowError) as raised:
        store.journal_put(run.id, "agent/x", "second")
    assert (raised.value.code, raised.value.message) == (
        "DUPLICATE_NAME",
        "Completed structural path already exists: agent/x",
    )
    assert store.journal(run.id) == {"agent/x": "first"}


def test_journal_of_an_unknown_run_is_refused(store: RunStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.journal("nope"),
        lambda: store.journal_put("nope", "x", 1),
    ]
    for call in calls:
        with pytest.raises(WorkflowError) as raised:
            call()
        assert (raised.value.code, raised.value.message) == (
            "RESUME_INCOMPATIBLE",
            "Unknown workflow run: nope",
        )


def test_journal_values_must_be_plain_json(store: RunStore) -> None:
    run = new_run(store)
    for value in (float("inf"), object()):
        with pytest.raises(WorkflowError) as raised:
            store.journal_put(run.id, "agent/x", value)
        assert raised.value.code == "INTERNAL_ERROR"
    assert store.journal(run.id) == {}


# -- batches -------------------------------------------------------------------------------------
def test_a_batch_commits_all_of_its_calls_together(store: RunStore, path: Path) -> None:
    run = new_run(store)
    with RunStore.open(path) as reader, store.batch():
        store.journal_put(run.id, "agent/x", 1)
        store.update_run(run.id, state="completed", result=1)
        store.append_event(run.id, "workflow:run-completed", {})
        # Another connection sees nothing of an open batch, and is not blocked by it (WAL).
        assert reader.journal(run.id) == {}
        assert reader.events(run.id) == []
        seen = reader.get_run(run.id)
        assert seen is not None and seen.state == "running"
    with RunStore.open(path) as reader:
        assert reader.journal(run.id) == {"agent/x": 1}
        assert len(reader.events(run.id)) == 1
        seen = reader.get_run(run.id)
        assert seen is not None and seen.state == "completed"


def test_an_exception_inside_a_batch_leaves_nothing_behind(store: RunStore) -> None:
    run = new_run(store)
    with pytest.raises(Boom), store.batch():
        store.put_agent(
            AgentRecord(id=f"{run.id}:1", run_id=run.id, n=1, name="a", model="p/m", state="completed")
        )
        store.journal_put(run.id, "agent/x", 1)
        store.update_run(run.id, state="completed", usage={"tokens": 9})
        store.append_event(run.id, "workflow:agent-state-changed", {})
        store.await_checkpoint(run.id, "go", "Go?", None)
        raise Boom
    assert store.agents(run.id) == []
    assert store.journal(run.id) == {}
    assert store.get_run(run.id) == run
    assert store.events(run.id) == []
    assert store.checkpoints(run.id) == []


def test_a_failing_call_caught_inside_a_batch_leaves_the_rest_to_commit(store: RunStore) -> None:
    run = new_run(store)
    store.journal_put(run.id, "agent/x", 1)
    with store.batch():
        store.journal_put(run.id, "agent/y", 2)
        with pytest.raises(WorkflowError, match="already exists"):
            store.journal_put(run.id, "agent/x", 3)
        store.journal_put(run.id, "agent/z", 4)
    assert store.journal(run.id) == {"agent/x": 1, "agent/y": 2, "agent/z": 4}


def test_a_nested_batch_joins_the_outer_one_and_rolls_back_alone(store: RunStore, path: Path) -> None:
    run = new_run(store)
    with store.batch():
        store.journal_put(run.id, "agent/outer", 1)
        with store.batch():
            store.journal_put(run.id, "agent/inner", 2)
        with pytest.raises(Boom), store.batch():
            store.journal_put(run.id, "agent/undone", 3)
            raise Boom
        with RunStore.open(path) as reader:
            assert reader.journal(run.id) == {}  # the inner batch committed nothing by itself
    assert store.journal(run.id) == {"agent/outer": 1, "agent/inner": 2}


def test_the_outer_batch_rolls_back_committed_looking_inner_batches(store: RunStore) -> None:
    run = new_run(store)
    with pytest.raises(Boom), store.batch():
        with store.batch():
            store.journal_put(run.id, "agent/inner", 2)
        raise Boom
    assert store.journal(run.id) == {}


def test_the_store_is_usable_after_a_rolled_back_batch(store: RunStore) -> None:
    run = new_run(store)
    with pytest.raises(Boom), store.batch():
        store.journal_put(run.id, "agent/x", 1)
        raise Boom
    store.journal_put(run.id, "agent/x", 2)
    assert store.journal(run.id) == {"agent/x": 2}
