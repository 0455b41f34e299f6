"""Run store: a view read from several queries sees one moment, even while an owner commits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store_support import new_run

from piflow.engine.lifecycle import RunState
from piflow.engine.store import RunStore
from piflow.engine.views import observed_run


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def owner(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


@pytest.fixture
def reader(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


def _reach_checkpoint(owner: RunStore, run_id: str) -> None:
    """What the engine commits when a run reaches a checkpoint: the question and the run's state."""
    with owner.batch():
        owner.await_checkpoint(run_id, "ship", "Ship it?", None)
        owner.update_run(run_id, state=RunState.AWAITING_INPUT)


def test_a_consistent_read_never_sees_a_pending_checkpoint_on_a_running_run(owner: RunStore, reader: RunStore) -> None:
    run = new_run(owner)
    with reader.consistent_read():
        record = reader.get_run(run.id)
        _reach_checkpoint(owner, run.id)  # commits between the reader's two queries
        awaiting = reader.awaiting_checkpoints(run.id)
    assert record is not None and (record.state, awaiting) == ("running", [])
    record = reader.get_run(run.id)
    assert record is not None and record.state == "awaiting_input"
    assert [c.label for c in reader.awaiting_checkpoints(run.id)] == ["ship"]


def test_without_one_the_same_reads_mix_two_moments(owner: RunStore, reader: RunStore) -> None:
    """Why views need it: the reads below are what the editor's progress did before."""
    run = new_run(owner)
    record = reader.get_run(run.id)
    _reach_checkpoint(owner, run.id)
    assert record is not None and record.state == "running"
    assert [c.label for c in reader.awaiting_checkpoints(run.id)] == ["ship"]


def test_a_run_finishing_mid_read_is_never_shown_interrupted(owner: RunStore, reader: RunStore) -> None:
    run = new_run(owner)
    owner.acquire_lease(run.id, "owner", os.getpid())
    with reader.consistent_read():
        record = reader.get_run(run.id)
        with owner.batch():  # the owner finishes and lets go of the run
            owner.update_run(run.id, state=RunState.COMPLETED)
            owner.release_lease(run.id, "owner")
        assert record is not None and observed_run(reader, record).state == "running"
    record = reader.get_run(run.id)
    assert record is not None and observed_run(reader, record).state == "completed"


def test_inside_a_batch_a_consistent_read_sees_the_batch_writes(owner: RunStore) -> None:
    run = new_run(owner)
    with owner.batch():
        owner.update_run(run.id, phase="review")
        with owner.consistent_read():
            record = owner.get_run(run.id)
        owner.update_run(run.id, phase="ship")
    assert record is not None and record.phase == "review"
    final = owner.get_run(run.id)
    assert final is not None and final.phase == "ship"


def test_after_a_consistent_read_the_store_writes_as_usual(owner: RunStore, reader: RunStore) -> None:
    run = new_run(owner)
    with reader.consistent_read():
        reader.get_run(run.id)
    reader.update_run(run.id, phase="after")
    record = owner.get_run(run.id)
    assert record is not None and record.phase == "after"
