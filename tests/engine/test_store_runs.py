"""Run store: location, runs, agents, attempts and worktrees."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store_support import new_run

from piflow.engine.store import (
    AgentRecord,
    AttemptRecord,
    DecisionRecord,
    RunRecord,
    RunStore,
    WorktreeRecord,
    default_store_path,
)
from piflow.errors import WorkflowError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runs.db"


@pytest.fixture
def store(path: Path) -> Iterator[RunStore]:
    with RunStore.open(path) as opened:
        yield opened


def _agent(run_id: str, n: int, **fields: object) -> AgentRecord:
    values: dict[str, object] = {
        "id": f"{run_id}:{n}",
        "run_id": run_id,
        "n": n,
        "name": f"agent-{n}",
        "model": "openai/gpt-5:low",
        "state": "queued",
    }
    values.update(fields)
    return AgentRecord(**values)  # type: ignore[arg-type]


# -- location ------------------------------------------------------------------------------------
def test_default_store_path_is_keyed_by_project_under_xdg_state_home(tmp_path: Path) -> None:
    project = tmp_path / "my project!"
    project.mkdir()
    resolved = project.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    path = default_store_path(project, {"XDG_STATE_HOME": "/xdg/state", "HOME": "/home/u"})
    assert path == Path(f"/xdg/state/piflow/projects/my_project_-{digest}/runs.db")


def test_default_store_path_falls_back_to_local_state_and_names_the_root_directory_root() -> None:
    path = default_store_path("/", {"HOME": "/home/u", "XDG_STATE_HOME": "relative/ignored"})
    assert path.parent.name.startswith("root-")
    assert path.parent.parent == Path("/home/u/.local/state/piflow/projects")


def test_store_directories_are_0700_and_files_0600(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runs.db"
    with RunStore.open(path) as store:
        new_run(store)
        for directory in (tmp_path / "a", tmp_path / "a" / "b"):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
            assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600


def test_store_uses_wal_normal_sync_and_foreign_keys(store: RunStore, path: Path) -> None:
    connection = store._connection  # the per-connection settings are only visible from inside
    assert connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert connection.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# -- runs ----------------------------------------------------------------------------------------
def test_created_run_reads_back_with_every_field(store: RunStore) -> None:
    record = RunRecord(
        id="0f6c1f7e-9a4b-4c39-8d0e-3f3f7b6d1a11",
        workflow_name="review",
        cwd="/p",
        state="running",
        concurrency=8,
        backend="openai",
        script_path="/p/review.workflow.js",
        phase="audit",
        error={"code": "AGENT_FAILED", "message": "x"},
        budget={"tokens": {"soft": 100, "hard": 200}},
        budget_version=2,
        usage={"tokens": 5, "costUsd": 0.25, "durationMs": 10, "agentLaunches": 1},
        created_at=1700000000.5,
        updated_at=1700000001.5,
        result={"ok": ["é", "\ud800"]},
        has_result=True,
        warnings=["Model alias mappings changed on resume: rev: a/b -> c/d"],
    )
    store.create_run(record, "// meta\nreturn 1", {"identityVersion": 3})
    assert store.get_run(record.id) == record
    assert store.run_script(record.id) == "// meta\nreturn 1"
    assert store.snapshot(record.id) == {"identityVersion": 3}


def test_creating_a_run_twice_is_a_duplicate(store: RunStore) -> None:
    run = new_run(store)
    with pytest.raises(WorkflowError) as raised:
        new_run(store, run.id)
    assert (raised.value.code, raised.value.message) == (
        "DUPLICATE_NAME",
        f"Workflow run already exists: {run.id}",
    )


def test_unknown_run_reads_as_none_and_its_script_is_unknown(store: RunStore) -> None:
    assert store.get_run("nope") is None
    with pytest.raises(WorkflowError) as raised:
        store.run_script("nope")
    assert (raised.value.code, raised.value.message) == ("RESUME_INCOMPATIBLE", "Unknown workflow run: nope")


def test_list_runs_is_newest_first_and_filters_by_cwd_and_script(store: RunStore) -> None:
    old = new_run(store, cwd="/a", script_path="/a/x.workflow.js", created_at=1.0)
    mid = new_run(store, cwd="/b", script_path="/b/y.workflow.js", created_at=2.0)
    new = new_run(store, cwd="/a", script_path="/a/z.workflow.js", created_at=3.0)
    assert [run.id for run in store.list_runs()] == [new.id, mid.id, old.id]
    assert [run.id for run in store.list_runs(cwd="/a")] == [new.id, old.id]
    assert [run.id for run in store.list_runs(script_path="/b/y.workflow.js")] == [mid.id]
    assert store.list_runs(cwd="/a", script_path="/b/y.workflow.js") == []


def test_resolve_run_id_accepts_the_exact_id_and_a_unique_prefix_of_8(store: RunStore) -> None:
    run = new_run(store, "abcdef01-0000-4000-8000-000000000000")
    new_run(store, "abcdef02-0000-4000-8000-000000000000")
    assert store.resolve_run_id(run.id) == run.id
    assert store.resolve_run_id("abcdef01") == run.id


def test_resolve_run_id_refuses_an_ambiguous_prefix(store: RunStore) -> None:
    new_run(store, "abcdef01-0000-4000-8000-000000000000")
    new_run(store, "abcdef01-1111-4000-8000-000000000000")
    with pytest.raises(WorkflowError) as raised:
        store.resolve_run_id("abcdef01")
    assert raised.value.code == "RESUME_INCOMPATIBLE"
    assert raised.value.message == (
        "Ambiguous workflow run id prefix abcdef01: matches "
        "abcdef01-0000-4000-8000-000000000000, abcdef01-1111-4000-8000-000000000000"
    )


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("ffffffff", "Unknown workflow run: ffffffff"),
        ("abcdef0", "Unknown workflow run: abcdef0 (a run id prefix needs at least 8 characters)"),
    ],
)
def test_resolve_run_id_refuses_unknown_and_short_prefixes(
    store: RunStore, prefix: str, message: str
) -> None:
    new_run(store, "abcdef01-0000-4000-8000-000000000000")
    with pytest.raises(WorkflowError) as raised:
        store.resolve_run_id(prefix)
    assert (raised.value.code, raised.value.message) == ("RESUME_INCOMPATIBLE", message)


def test_update_run_changes_the_given_fields_and_stamps_updated_at(store: RunStore) -> None:
    run = new_run(store, created_at=1.0, updated_at=1.0)
    before = time.time()
    store.update_run(run.id, state="budget_exhausted", phase="fix", budget_version=3, warnings=["w"])
    updated = store.get_run(run.id)
    assert updated is not None
    assert (updated.state, updated.phase, updated.budget_version, updated.warnings) == (
        "budget_exhausted",
        "fix",
        3,
        ["w"],
    )
    assert updated.updated_at >= before
    assert updated.workflow_name == run.workflow_name


def test_a_null_result_is_still_a_result(store: RunStore) -> None:
    run = new_run(store)
    assert "result" not in run.to_json()
    store.update_run(run.id, state="completed", result=None)
    updated = store.get_run(run.id)
    assert updated is not None and updated.has_result
    assert updated.to_json()["result"] is None
    assert "hasResult" not in updated.to_json()


def test_run_to_json_is_camel_case(store: RunStore) -> None:
    data = new_run(store, script_path="/p/a.workflow.js").to_json()
    assert {"workflowName", "scriptPath", "budgetVersion", "createdAt", "updatedAt"} <= data.keys()


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        ({"cwd": "/elsewhere"}, "INTERNAL_ERROR", "Run fields cannot be updated: cwd"),
        ({"state": "sleeping"}, "INTERNAL_ERROR", "Invalid run state: 'sleeping'"),
        ({"usage": {"costUsd": float("nan")}}, "INTERNAL_ERROR", None),
    ],
)
def test_update_run_refuses_misuse(
    store: RunStore, fields: dict[str, object], code: str, message: str | None
) -> None:
    run = new_run(store)
    with pytest.raises(WorkflowError) as raised:
        store.update_run(run.id, **fields)
    assert raised.value.code == code
    if message is not None:
        assert raised.value.message == message
    assert store.get_run(run.id) == run


def test_update_unknown_run_is_unknown(store: RunStore) -> None:
    with pytest.raises(WorkflowError) as raised:
        store.update_run("nope", state="paused")
    assert (raised.value.code, raised.value.message) == ("RESUME_INCOMPATIBLE", "Unknown workflow run: nope")


def test_replace_snapshot(store: RunStore) -> None:
    run = new_run(store)
    store.replace_snapshot(run.id, {"identityVersion": 3, "modelAliases": {"rev": "a/b"}})
    assert store.snapshot(run.id) == {"identityVersion": 3, "modelAliases": {"rev": "a/b"}}
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.replace_snapshot("nope", {})


def test_delete_run_removes_everything_of_the_run_and_nothing_else(store: RunStore, path: Path) -> None:
    run, other = new_run(store), new_run(store)
    for target in (run, other):
        store.put_agent(_agent(target.id, 1))
        store.put_attempt(AttemptRecord(f"{target.id}:1", 1, 1.0))
        store.journal_put(target.id, "agent/a", 1)
        store.await_checkpoint(target.id, "ok", "Proceed?", None)
        store.put_decision(DecisionRecord(target.id, "p1", "budget", {"budgetVersion": 1}))
        store.append_event(target.id, "workflow:run-started", {})
        store.put_worktree(WorktreeRecord(target.id, "w", "/wt", "b", "c0ffee", "/wt"))
        store.acquire_lease(target.id, "token", os.getpid())
    store.delete_run(run.id)

    def rows(target: RunRecord) -> dict[str, int]:
        tables = (
            "launches",
            "journal",
            "agents",
            "checkpoints",
            "decisions",
            "events",
            "worktrees",
            "leases",
        )
        with sqlite3.connect(path) as raw:
            counts = {
                table: raw.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", (target.id,)).fetchone()[
                    0
                ]
                for table in tables
            }
            attempts = raw.execute("SELECT count(*) FROM attempts WHERE agent_id = ?", (f"{target.id}:1",))
            counts["attempts"] = attempts.fetchone()[0]
        return counts

    assert set(rows(run).values()) == {0}
    assert set(rows(other).values()) == {1}
    assert store.get_run(run.id) is None
    with pytest.raises(WorkflowError, match="Unknown workflow run"):
        store.delete_run(run.id)


# -- agents and attempts -------------------------------------------------------------------------
def test_agent_numbers_continue_after_the_highest_stored(store: RunStore) -> None:
    run = new_run(store)
    assert store.next_agent_number(run.id) == 1
    store.put_agent(_agent(run.id, 1))
    store.put_agent(_agent(run.id, 7))
    assert store.next_agent_number(run.id) == 8
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.next_agent_number("nope")


def test_agents_round_trip_in_number_order(store: RunStore) -> None:
    run = new_run(store)
    second = _agent(
        run.id,
        2,
        label="scout",
        role="reviewer",
        requested_model="rev",
        tools=["read", "grep"],
        structural_path=["review", "api"],
        journal_path="agent/review/api/callsite%3A1%3A2/occurrence%3A1",
        parent_id=f"{run.id}:1",
        parent_breadcrumb="outer > inner",
        worktree_owner="wt",
        error={"code": "AGENT_FAILED", "message": "boom"},
    )
    first = _agent(run.id, 1)
    store.put_agent(second)
    store.put_agent(first)
    assert store.agents(run.id) == [first, second]


def test_put_agent_replaces_an_agent_with_the_same_id(store: RunStore) -> None:
    run = new_run(store)
    store.put_agent(_agent(run.id, 1))
    replacement = _agent(run.id, 1, state="cancelled", attempts=2)
    store.put_agent(replacement)
    assert store.agents(run.id) == [replacement]


def test_update_agent_changes_fields_and_accepts_an_explicit_updated_at(store: RunStore) -> None:
    run = new_run(store)
    store.put_agent(_agent(run.id, 1))
    store.update_agent(f"{run.id}:1", state="completed", tokens_input=10, cost_usd=0.5, updated_at=42.0)
    (agent,) = store.agents(run.id)
    assert (agent.state, agent.tokens_input, agent.cost_usd, agent.updated_at) == ("completed", 10, 0.5, 42.0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_id": "other"}, "Agent fields cannot be updated: run_id"),
        ({"state": "done"}, "Invalid agent state: 'done'"),
    ],
)
def test_update_agent_refuses_misuse(store: RunStore, fields: dict[str, object], message: str) -> None:
    run = new_run(store)
    store.put_agent(_agent(run.id, 1))
    with pytest.raises(WorkflowError) as raised:
        store.update_agent(f"{run.id}:1", **fields)
    assert (raised.value.code, raised.value.message) == ("INTERNAL_ERROR", message)


def test_agents_of_an_unknown_run_or_an_unknown_agent_are_refused(store: RunStore) -> None:
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.put_agent(_agent("nope", 1))
    with pytest.raises(WorkflowError, match="Unknown workflow run: nope"):
        store.agents("nope")
    with pytest.raises(WorkflowError, match="Unknown workflow agent: nope:1"):
        store.update_agent("nope:1", state="running")
    with pytest.raises(WorkflowError, match="Unknown workflow agent: nope:1"):
        store.put_attempt(AttemptRecord("nope:1", 1, 1.0))


def test_attempts_are_written_at_start_and_replaced_at_end(store: RunStore) -> None:
    run = new_run(store)
    store.put_agent(_agent(run.id, 1))
    agent_id = f"{run.id}:1"
    assert store.attempts(agent_id) == []
    store.put_attempt(AttemptRecord(agent_id, 2, 5.0))
    store.put_attempt(AttemptRecord(agent_id, 1, 1.0))
    timeout = {"code": "AGENT_TIMEOUT", "message": "Agent attempt timed out"}
    ended = AttemptRecord(agent_id, 1, 1.0, 2.0, timeout, 3, 4, 5, 6, 0.5, "/t/1.jsonl", "s1")
    store.put_attempt(ended)
    assert store.attempts(agent_id) == [ended, AttemptRecord(agent_id, 2, 5.0)]


# -- worktrees -----------------------------------------------------------------------------------
def test_worktrees_are_replaced_by_owner_and_listed_in_creation_order(store: RunStore) -> None:
    run = new_run(store)
    first = WorktreeRecord(run.id, "b", "/wt/b", "branch-b", "c0ffee", "/wt/b/sub")
    second = WorktreeRecord(run.id, "a", "/wt/a", "branch-a", "c0ffee", "/wt/a")
    store.put_worktree(first)
    store.put_worktree(second)
    ready = WorktreeRecord(run.id, "b", "/wt/b", "branch-b", "c0ffee", "/wt/b/sub", state="ready")
    store.put_worktree(ready)
    assert store.worktrees(run.id) == [ready, second]
    with pytest.raises(WorkflowError) as raised:
        WorktreeRecord(run.id, "c", "/wt/c", "b", "c", "/wt/c", state="gone")
    assert raised.value.message == "Invalid worktree state: 'gone'"
