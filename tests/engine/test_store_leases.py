"""Run store: run ownership leases across processes (DESIGN 6)."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_store_support import new_run, run_child, start_child

from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

HOLD = """
store.acquire_lease(sys.argv[2], sys.argv[3], os.getpid())
print("held", flush=True)
time.sleep(120)
"""

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def store(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


def _owned_message(store: RunStore, run_id: str, token: str, **kwargs: float) -> str:
    with pytest.raises(WorkflowError) as raised:
        store.acquire_lease(run_id, token, os.getpid(), **kwargs)
    assert raised.value.code == "RUN_OWNED"
    return raised.value.message


def test_a_free_run_is_acquired_and_reacquired_by_its_owner(store: RunStore) -> None:
    run = new_run(store)
    assert store.lease_owner(run.id) is None
    store.acquire_lease(run.id, "a", os.getpid())
    store.acquire_lease(run.id, "a", os.getpid())
    assert store.lease_owner(run.id) == (os.getpid(), "a")


def test_another_token_of_a_live_owner_gets_run_owned(store: RunStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "a", os.getpid())
    message = _owned_message(store, run.id, "b")
    assert message == f"Workflow run {run.id} is already owned by process {os.getpid()}"
    assert store.lease_owner(run.id) == (os.getpid(), "a")


def test_a_second_process_gets_run_owned(store: RunStore, path: Path) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "parent", os.getpid())
    code = """
        try:
            store.acquire_lease(sys.argv[2], "child", os.getpid())
        except WorkflowError as error:
            print(error.code, error.message)
    """
    assert (
        run_child(path, code, run.id)
        == f"RUN_OWNED Workflow run {run.id} is already owned by process {os.getpid()}"
    )


def test_the_lease_of_a_dead_process_is_reclaimed(store: RunStore, path: Path) -> None:
    run = new_run(store)
    code = "store.acquire_lease(sys.argv[2], 'child', os.getpid()); print(os.getpid())"
    child_pid = int(run_child(path, code, run.id))
    assert store.lease_owner(run.id) is None
    store.acquire_lease(run.id, "parent", os.getpid())
    assert store.lease_owner(run.id) == (os.getpid(), "parent")
    assert child_pid != os.getpid()


def test_a_live_holder_in_another_process_keeps_the_run_until_killed(store: RunStore, path: Path) -> None:
    run = new_run(store)
    child = start_child(path, HOLD, run.id, "child")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert store.lease_owner(run.id) == (child.pid, "child")
        assert _owned_message(store, run.id, "parent").endswith(f"owned by process {child.pid}")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        store.acquire_lease(run.id, "parent", os.getpid())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@linux_only
def test_a_killed_holder_not_yet_reaped_is_dead(store: RunStore, path: Path) -> None:
    run = new_run(store)
    child = start_child(path, HOLD, run.id, "child")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        store.acquire_lease(run.id, "parent", os.getpid())  # the zombie still answers signal 0
    finally:
        child.kill()
        child.wait()


@linux_only
def test_a_reused_pid_is_not_mistaken_for_the_holder(store: RunStore, path: Path) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "a", os.getpid())
    with sqlite3.connect(path) as raw:  # the recorded holder started at another time: not us
        raw.execute("UPDATE leases SET pid_start = pid_start - 1 WHERE run_id = ?", (run.id,))
    assert store.lease_owner(run.id) is None
    store.acquire_lease(run.id, "b", os.getpid())
    assert store.lease_owner(run.id) == (os.getpid(), "b")


def test_a_stale_heartbeat_is_reclaimed_even_from_a_live_pid(store: RunStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "a", os.getpid())
    _owned_message(store, run.id, "b", stale_after=0.2)
    time.sleep(0.3)
    assert store.lease_owner(run.id, stale_after=0.2) is None
    store.acquire_lease(run.id, "b", os.getpid(), stale_after=0.2)
    assert store.lease_owner(run.id) == (os.getpid(), "b")


def test_renewing_keeps_the_lease_fresh(store: RunStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "a", os.getpid())
    time.sleep(0.3)
    store.renew_lease(run.id, "a")
    _owned_message(store, run.id, "b", stale_after=0.2)


def test_renewing_a_lease_taken_over_or_released_is_refused(store: RunStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "a", os.getpid())
    time.sleep(0.15)
    store.acquire_lease(run.id, "b", os.getpid(), stale_after=0.1)
    with pytest.raises(WorkflowError) as raised:
        store.renew_lease(run.id, "a")
    assert (raised.value.code, raised.value.message) == (
        "RUN_OWNED",
        f"Workflow run {run.id} is already owned by process {os.getpid()}",
    )
    store.release_lease(run.id, "b")
    with pytest.raises(WorkflowError) as raised:
        store.renew_lease(run.id, "a")
    assert (raised.value.code, raised.value.message) == (
        "RUN_OWNED",
        f"Workflow run {run.id} ownership lease was lost",
    )


def test_only_the_owner_releases_a_lease(store: RunStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.id, "a", os.getpid())
    assert store.release_lease(run.id, "b") is False
    assert store.lease_owner(run.id) == (os.getpid(), "a")
    assert store.release_lease(run.id, "a") is True
    assert store.lease_owner(run.id) is None
    store.acquire_lease(run.id, "b", os.getpid())
    assert store.lease_owner(run.id) == (os.getpid(), "b")


def test_exactly_one_of_several_racing_processes_acquires(store: RunStore, tmp_path: Path) -> None:
    run = new_run(store)
    path = tmp_path / "runs.db"
    done = tmp_path / "done"
    code = """
        try:
            store.acquire_lease(sys.argv[2], f"token-{os.getpid()}", os.getpid())
            print("acquired", flush=True)
        except WorkflowError as error:
            print(error.code, flush=True)
        while not os.path.exists(sys.argv[3]):  # stay alive: a dead winner could be reclaimed
            time.sleep(0.01)
    """
    children = [start_child(path, code, run.id, str(done)) for _ in range(6)]
    try:
        results = []
        for child in children:
            assert child.stdout is not None
            results.append((child.stdout.readline().strip(), child.pid))
        assert sorted(result for result, _ in results) == ["RUN_OWNED"] * 5 + ["acquired"]
        (winner,) = [pid for result, pid in results if result == "acquired"]
        assert store.lease_owner(run.id) == (winner, f"token-{winner}")
    finally:
        done.touch()
        for child in children:
            child.wait(timeout=60)


def test_leases_of_an_unknown_run_are_refused(store: RunStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.acquire_lease("nope", "a", os.getpid()),
        lambda: store.renew_lease("nope", "a"),
        lambda: store.lease_owner("nope"),
    ]
    for call in calls:
        with pytest.raises(WorkflowError) as raised:
            call()
        assert (raised.value.code, raised.value.message) == (
            "RESUME_INCOMPATIBLE",
            "Unknown workflow run: nope",
        )
