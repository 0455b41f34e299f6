"""The engine core: one operation primitive, group commits that fail alone, abandoned agents, read-only reads."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from engine_support import finished, wait_for, write_fixtures
from test_store_support import new_run

from piflow.engine import events
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.environment import store_path
from piflow.engine.journal import OperationKind
from piflow.engine.operations import Operations
from piflow.engine.store import RunRecord, RunStore
from piflow.errors import WorkflowError


def _new_run(store: RunStore) -> RunRecord:
    return new_run(store)


# -- the operation primitive ------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(OperationKind))
def test_a_recorded_operation_replays_its_value_once_committed(store: RunStore, kind: OperationKind) -> None:
    run = _new_run(store)
    operations = Operations(store, run.id)
    assert operations.check(kind, f"{kind}/x") is None
    with store.batch():
        operations.record(kind, f"{kind}/x", None)
    operations.committed()
    recorded = operations.check(kind, f"{kind}/x")
    assert recorded is not None and recorded.value is None  # a journaled null is a result, not "not yet"
    assert Operations(store, run.id).check(kind, f"{kind}/x") == recorded  # and it is durable


def test_a_rolled_back_operation_did_not_happen(store: RunStore) -> None:
    run = _new_run(store)
    operations = Operations(store, run.id)
    with pytest.raises(RuntimeError), store.batch():
        operations.record(OperationKind.AGENT, "agent/x", 1)
        raise RuntimeError("the effect's transaction failed")
    operations.rolled_back()
    assert operations.check(OperationKind.AGENT, "agent/x") is None
    assert store.journal(run.id) == {}


def test_another_kind_of_outcome_at_a_path_is_resume_incompatible(store: RunStore) -> None:
    run = _new_run(store)
    store.journal_put(run.id, "agent/x", "an agent's text", OperationKind.AGENT)
    operations = Operations(store, run.id)
    with pytest.raises(WorkflowError) as raised:
        operations.check(OperationKind.FUNCTION, "agent/x")
    assert raised.value.code == "RESUME_INCOMPATIBLE"
    assert raised.value.message == "Journal entry agent/x was recorded by a agent operation, not by a function"


def test_recording_a_path_twice_is_duplicate_name(store: RunStore) -> None:
    run = _new_run(store)
    operations = Operations(store, run.id)
    with store.batch():
        operations.record(OperationKind.TURN, "conversation/c/turn%3A1", "hi")
    operations.committed()
    with pytest.raises(WorkflowError) as raised, store.batch():
        operations.record(OperationKind.TURN, "conversation/c/turn%3A1", "again")
    assert raised.value.code == "DUPLICATE_NAME"


def test_a_checkpoint_answered_by_another_process_is_seen_on_refresh(store: RunStore) -> None:
    run = _new_run(store)
    operations = Operations(store, run.id)
    store.await_checkpoint(run.id, "go", "Go?", None)
    with RunStore.open(store.location) as other:
        assert other.answer_checkpoint(run.id, "go", True)
    assert operations.check(OperationKind.CHECKPOINT, "checkpoint/go") is None
    answered = operations.refresh(OperationKind.CHECKPOINT, "checkpoint/go")
    assert answered is not None and answered.value is True


async def test_every_kind_replays_without_running_again(project: Path, store: RunStore) -> None:
    """An interrupted run resumes: agents, turns, functions' peers and answered checkpoints come from the
    journal; only the operation that had not completed runs."""
    script = """
    const a = await agent("first");
    const chat = conversation("chat");
    const t = await chat.run("hello");
    const go = await checkpoint({name: "go", prompt: "Go?", context: null});
    const b = await agent("second");
    return {a, t, go, b};
    """
    slow_second = {"match": {"prompt": "second"}, "text": "late", "latencyMs": 60000}
    fixtures = write_fixtures(project, {"responses": [slow_second]})
    async with Engine(store) as first:
        run_id = await first.launch(LaunchRequest(script=script, cwd=str(project), fixtures=fixtures))
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
        first.respond(run_id, name="go", approved=True)
        await wait_for(lambda: any(a.state == "running" for a in store.agents(run_id)[2:]))
    kinds = sorted(kind or "" for kind, _ in store.operations(run_id).values())
    assert kinds == ["agent", "checkpoint", "turn"]
    write_fixtures(project, {})
    async with Engine(store) as second:
        await second.resume(run_id)
        record = await finished(second, run_id)
    assert record.state == "completed", record.error
    assert record.result == {"a": "[scripted] first", "t": "[scripted] hello", "go": "approved",
                             "b": "[scripted] second"}
    paths = [a.journal_path for a in store.agents(run_id)]
    assert len(paths) == 4 and len(set(paths)) == 3 and paths[2] == paths[3]  # only "second" ran again
    assert len(store.checkpoints(run_id)) == 1


# -- group commits ----------------------------------------------------------------------------

async def test_a_failed_group_commit_fails_its_operation_and_later_commits_succeed(
    engine: Engine, launch: Any, project: Path, store: RunStore
) -> None:
    """The first agent's result cannot be journaled (its path was taken meanwhile): that agent fails,
    and the agents after it complete and are journaled, as if the failure never happened."""
    script = """
    let first;
    try { first = await agent("first"); } catch (error) { first = error.code; }
    const rest = await parallel("rest", {x: () => agent("x"), y: () => agent("y")});
    return {first, rest};
    """
    slow_first = {"match": {"prompt": "first"}, "text": "one", "latencyMs": 1500}
    fixtures = write_fixtures(project, {"responses": [slow_first]})
    run_id = await launch(script, fixtures=fixtures)
    agent = await wait_for(lambda: next(iter(store.agents(run_id)), None))
    with RunStore.open(store.location) as other:  # another writer takes the agent's journal path
        other.journal_put(run_id, agent.journal_path, "taken")
    record = await finished(engine, run_id)
    assert record.state == "completed", record.error
    assert record.result == {"first": "DUPLICATE_NAME", "rest": {"x": "[scripted] x", "y": "[scripted] y"}}
    assert [a.state for a in store.agents(run_id)] == ["failed", "completed", "completed"]
    assert len(store.journal(run_id)) == 3


# -- agents a dead owner left behind, and reads that never write --------------------------------

def _piflow(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _killed_mid_agent(project: Path) -> tuple[RunStore, str]:
    """A `piflow run` SIGKILLed while its only agent runs: the store says running, agent running."""
    (project / "slow.workflow.js").write_text('return await agent("slow");\n')
    write_fixtures(project, {"defaults": {"latencyMs": 60000}})
    owner = subprocess.Popen([sys.executable, "-m", "piflow", "run", "slow.workflow.js", "--fixtures",
                              "fixtures.json"], cwd=project, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = RunStore.open(store_path(str(project)))
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runs = store.list_runs()
            if runs and [a.state for a in store.agents(runs[0].id)] == ["running"]:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the agent never started")
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    return store, runs[0].id


def test_show_and_runs_report_a_dead_owner_s_run_interrupted_without_writing(project: Path) -> None:
    store, run_id = _killed_mid_agent(project)
    with store:
        watcher = sqlite3.connect(store.location)
        version = watcher.execute("PRAGMA data_version").fetchone()[0]
        mtime = os.stat(store.location).st_mtime_ns
        shown = _piflow(project, "show", run_id[:8], "--json")
        listed = _piflow(project, "runs", "--json")
        assert shown.returncode == 0 and listed.returncode == 0, shown.stderr + listed.stderr
        assert json.loads(shown.stdout)["state"] == "interrupted"
        assert [run["state"] for run in json.loads(listed.stdout)] == ["interrupted"]
        assert watcher.execute("PRAGMA data_version").fetchone()[0] == version, "a read command wrote to the store"
        assert os.stat(store.location).st_mtime_ns == mtime
        record = store.get_run(run_id)
        assert record is not None and record.state == "running"  # recording it is the next owner's job
        watcher.close()


def test_stopping_a_dead_owner_s_run_cancels_its_abandoned_agent(project: Path) -> None:
    store, run_id = _killed_mid_agent(project)
    with store:
        stopped = _piflow(project, "stop", run_id[:8])
        assert json.loads(stopped.stdout) == {"runId": run_id, "state": "stopped", "stopped": True}
        shown = json.loads(_piflow(project, "show", run_id[:8], "--json").stdout)
        assert shown["state"] == "stopped"
        assert [(a["state"], a["error"]["code"]) for a in shown["agentList"]] == [("cancelled", "CANCELLED")]
        assert "cannot be resumed" in _piflow(project, "show", run_id[:8]).stdout


async def test_resuming_a_dead_owner_s_run_cancels_its_abandoned_agent(project: Path) -> None:
    store, run_id = _killed_mid_agent(project)
    write_fixtures(project, {})
    with store:
        async with Engine(store) as engine:
            await engine.resume(run_id)
            record = await finished(engine, run_id)
        assert record.state == "completed", record.error
        assert [a.state for a in store.agents(run_id)] == ["cancelled", "completed"]
        cancelled = [e.payload for e in store.events(run_id)
                     if e.type == events.AGENT_STATE_CHANGED and e.payload["state"] == "cancelled"]
        assert [(p["agentId"], p["previousState"]) for p in cancelled] == [(f"{run_id}:1", "running")]
