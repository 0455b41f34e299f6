"""Run store: schema migrations, storage errors and crash safety."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from test_store_support import new_run, run_child, start_child

from piflow.engine.store import RunStore
from piflow.engine.store.schema import MIGRATIONS, migrate
from piflow.errors import WorkflowError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def store(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


def _version(path: Path) -> int:
    with sqlite3.connect(path) as raw:
        version: int = raw.execute("PRAGMA user_version").fetchone()[0]
    return version


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


# -- migrations ----------------------------------------------------------------------------------
def test_a_new_store_is_migrated_to_the_latest_version_and_reopens_as_is(path: Path) -> None:
    with RunStore.open(path) as store:
        run = new_run(store)
    assert _version(path) == len(MIGRATIONS)
    with RunStore.open(path) as store:
        assert store.get_run(run.id) == run


def test_migrations_apply_in_order_from_the_stored_version(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "db", isolation_level=None)
    migrate(connection, "db", MIGRATIONS)
    assert {"runs", "journal", "events", "leases"} <= _tables(connection)
    later = (*MIGRATIONS, ("CREATE TABLE extra (a)", "INSERT INTO extra VALUES (1)"))
    migrate(connection, "db", later)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1
    assert connection.execute("SELECT a FROM extra").fetchall() == [(1,)]
    migrate(connection, "db", later)  # nothing to do: applied once
    assert connection.execute("SELECT count(*) FROM extra").fetchone()[0] == 1
    connection.close()


def test_a_failing_migration_changes_nothing(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "db", isolation_level=None)
    with pytest.raises(sqlite3.Error):
        migrate(connection, "db", [("CREATE TABLE first (a)", "CREATE TABLE broken (")])
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 0
    assert _tables(connection) == set()
    assert not connection.in_transaction
    connection.close()


def test_a_store_written_by_a_newer_piflow_is_refused(path: Path) -> None:
    RunStore.open(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(WorkflowError) as raised:
        RunStore.open(path)
    assert raised.value.code == "INTERNAL_ERROR"
    assert raised.value.message == (
        f"Run store {path} has schema version 99, newer than this piflow supports ({len(MIGRATIONS)}); "
        "upgrade piflow or configure another store path"
    )
    assert _version(path) == 99


def test_processes_opening_a_new_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    children = [start_child(path, "print(store.last_event_seq())") for _ in range(4)]
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert out.strip() == "0"
    assert _version(path) == len(MIGRATIONS)


# -- storage errors ------------------------------------------------------------------------------
def _cap_pages(store: RunStore, extra: int) -> None:
    """Let the store grow by `extra` pages only (SQLite's cap is per connection: set it on the store's)."""
    connection = store._connection
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages + extra}")


def test_a_full_disk_is_an_internal_error_and_rolls_the_batch_back(store: RunStore) -> None:
    run = new_run(store)
    store.journal_put(run.id, "agent/before", 1)
    _cap_pages(store, 2)
    with pytest.raises(WorkflowError) as raised, store.batch():
        store.journal_put(run.id, "agent/small", 1)
        store.update_run(run.id, state="completed")
        store.journal_put(run.id, "agent/large", "x" * 100_000)
    assert raised.value.code == "INTERNAL_ERROR"
    assert (
        raised.value.message == f"Run store {store._location} failed: database or disk is full (SQLITE_FULL)"
    )
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    assert store.journal(run.id) == {"agent/before": 1}
    assert store.get_run(run.id) == run
    store._connection.execute("PRAGMA max_page_count = 1000000")
    store.journal_put(run.id, "agent/large", "x" * 100_000)
    assert len(store.journal(run.id)) == 2


def test_a_full_disk_leaves_no_half_created_run(store: RunStore) -> None:
    run = new_run(store)
    _cap_pages(store, 2)
    with pytest.raises(WorkflowError, match="SQLITE_FULL"):
        store.create_run(replace(run, id="other"), "x" * 100_000, {})
    assert [r.id for r in store.list_runs()] == [run.id]


def test_a_batch_that_swallowed_a_full_disk_error_cannot_commit_half(store: RunStore) -> None:
    run = new_run(store)
    _cap_pages(store, 2)
    with pytest.raises(WorkflowError, match="the batch was rolled back by an earlier error"), store.batch():
        store.journal_put(run.id, "agent/first", 1)
        with pytest.raises(WorkflowError, match="SQLITE_FULL"):
            store.journal_put(run.id, "agent/large", "x" * 100_000)
        # SQLite rolled the whole transaction back: nothing later in the batch may commit alone.
        with pytest.raises(WorkflowError, match="the batch was rolled back by an earlier error"):
            store.journal_put(run.id, "agent/after", 2)
    assert store.journal(run.id) == {}
    store.journal_put(run.id, "agent/after", 2)
    assert store.journal(run.id) == {"agent/after": 2}


def test_a_busy_store_is_an_internal_error_and_recovers(path: Path) -> None:
    with RunStore.open(path, busy_timeout=0.1) as store:
        run = new_run(store)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(WorkflowError) as raised:
            store.journal_put(run.id, "agent/x", 1)
        assert raised.value.code == "INTERNAL_ERROR" and "database is locked" in raised.value.message
        assert store.journal(run.id) == {}  # readers are not blocked
        blocker.execute("COMMIT")
        blocker.close()
        store.journal_put(run.id, "agent/x", 1)
        assert store.journal(run.id) == {"agent/x": 1}


def test_a_file_that_is_not_a_store_is_a_clear_error(path: Path) -> None:
    path.write_bytes(b"definitely not sqlite " * 200)
    with pytest.raises(WorkflowError) as raised:
        RunStore.open(path)
    assert raised.value.code == "CONFIG_ERROR"  # a store path named something else: refused, untouched
    assert str(path) in raised.value.message and "not a database" in raised.value.message
    assert path.read_bytes() == b"definitely not sqlite " * 200


def test_an_uncreatable_store_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(WorkflowError) as raised:
        RunStore.open(blocker / "runs.db")
    assert raised.value.code == "INTERNAL_ERROR"
    assert raised.value.message.startswith(f"Cannot create the run store {blocker / 'runs.db'}: ")


# -- crash safety --------------------------------------------------------------------------------
BATCH_LOOP = """
from piflow.engine.store import AgentRecord
run_id, size = sys.argv[2], int(sys.argv[3])
fixed = {"run_id": run_id, "name": "agent", "model": "p/m", "state": "completed"}
batch = 0
while True:
    batch += 1
    with store.batch():
        for i in range(size):
            n = (batch - 1) * size + i + 1
            store.put_agent(AgentRecord(id=f"{run_id}:{n}", n=n, **fixed))
            store.journal_put(run_id, f"agent/{batch}/{i}", {"batch": batch, "i": i})
            store.append_event(run_id, "workflow:agent-state-changed", {"batch": batch})
        store.update_run(run_id, usage={"batches": batch})
    print(batch, flush=True)
"""


@pytest.mark.parametrize("kill_after", [1, 7, 30])
def test_sigkill_during_a_batch_loop_leaves_only_whole_batches(path: Path, kill_after: int) -> None:
    size = 40
    with RunStore.open(path) as store:
        run = new_run(store)
    child = start_child(path, BATCH_LOOP, run.id, str(size))
    try:
        assert child.stdout is not None
        reported = 0
        while reported < kill_after:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else ""
            reported = int(line)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        rest = child.stdout.read()  # not communicate(): it would skip what readline() buffered
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    reported = max([reported, *(int(line) for line in rest.split())])

    with RunStore.open(path) as store:
        recovered = store.get_run(run.id)
        assert recovered is not None
        batches = recovered.usage["batches"]
        assert batches in (reported, reported + 1)  # the last commit may not have been printed yet
        journal = store.journal(run.id)
        assert journal == {
            f"agent/{b}/{i}": {"batch": b, "i": i} for b in range(1, batches + 1) for i in range(size)
        }
        assert [agent.n for agent in store.agents(run.id)] == list(range(1, batches * size + 1))
        assert len(store.events(run.id)) == batches * size
        store.journal_put(run.id, "agent/after-recovery", True)  # the store goes on after a crash
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_committed_checkpoint_answer_survives_the_answering_process(path: Path) -> None:
    with RunStore.open(path) as store:
        run = new_run(store)
        store.await_checkpoint(run.id, "go", "Go?", None)
    code = """
        print(store.answer_checkpoint(sys.argv[2], "go", True), flush=True)
        os.kill(os.getpid(), 9)
    """
    child = start_child(path, code, run.id)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL and out.strip() == "True"
    assert run_child(path, "print(store.journal(sys.argv[2]))", run.id) == "{'checkpoint/go': True}"
