"""Child agents (spec J.5) on the scripted backend: spawn, wait, steer, scoping, budgets, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import LaunchFn
from engine_support import finished, wait_for, write_fixtures

from held import HOLD_MS
from piflow.engine.engine import Engine
from piflow.engine.environment import store_path
from piflow.engine.store import RunStore

LEAD = 'return await agent("lead the work", {label: "lead", tools: ["read", "agent"]});'


def _fixtures(project: Path, *rules: dict[str, Any]) -> str:
    return write_fixtures(project, {"responses": list(rules)})


def _by_label(store: RunStore, run_id: str) -> dict[str, Any]:
    return {agent.label: agent for agent in store.agents(run_id)}


async def test_a_parent_spawns_children_and_returns_their_results(
    launch: LaunchFn, engine: Engine, store: RunStore, project: Path
) -> None:
    fixtures = _fixtures(
        project,
        {"match": {"label": "lead"}, "spawn": [{"prompt": "look at a", "label": "a"},
                                               {"prompt": "look at b", "label": "b", "thinking": "low"}]},
        {"match": {"label": "a"}, "text": "found A"},
        {"match": {"label": "b"}, "json": {"found": "B"}},
    )
    run_id = await launch(LEAD, fixtures=fixtures, concurrency=1)
    record = await finished(engine, run_id)
    assert record.state == "completed", record.error
    agents = _by_label(store, run_id)
    ids = [agents["a"].id, agents["b"].id]
    assert record.result == [{"id": ids[0], "ok": True, "value": "found A"},
                             {"id": ids[1], "ok": True, "value": {"found": "B"}}]
    assert agents["a"].parent_id == agents["b"].parent_id == agents["lead"].id
    assert agents["lead"].parent_id is None
    assert agents["a"].tools == ["read", "agent"]  # a child inherits its parent's tools


async def test_a_waiting_parent_is_waiting_for_child_and_frees_its_permit(
    launch: LaunchFn, engine: Engine, store: RunStore, project: Path
) -> None:
    # With concurrency 1 the child can only run because its waiting parent gave its permit back.
    fixtures = _fixtures(project, {"match": {"label": "lead"}, "spawn": [{"prompt": "slow", "label": "slow"}]},
                         {"match": {"label": "slow"}, "latencyMs": 400, "text": "done"})
    run_id = await launch(LEAD, fixtures=fixtures, concurrency=1)
    await wait_for(lambda: _by_label(store, run_id).get("slow") is not None
                   and _by_label(store, run_id)["slow"].state == "running")
    assert _by_label(store, run_id)["lead"].state == "waiting_for_child"
    record = await finished(engine, run_id)
    assert record.state == "completed", record.error
    states = [e.payload["state"] for e in store.events(run_id)
              if e.type == "workflow:agent-state-changed" and e.payload.get("displayLabel") == "lead"]
    assert states == ["queued", "running", "waiting_for_child", "running", "completed"]
    child_events = [e.payload for e in store.events(run_id)
                    if e.type == "workflow:agent-state-changed" and e.payload.get("displayLabel") == "slow"]
    assert child_events[0]["parentId"] == _by_label(store, run_id)["lead"].id


async def test_steering_reaches_the_child_through_the_backend(
    launch: LaunchFn, engine: Engine, store: RunStore, project: Path
) -> None:
    fixtures = _fixtures(project, {"match": {"label": "lead"}, "spawn": [{"prompt": "p", "label": "kid"}],
                                   "steer": "focus on tests"},
                         {"match": {"label": "kid"}, "latencyMs": 300})
    run_id = await launch(LEAD, fixtures=fixtures)
    backend = engine.active[run_id].backend
    assert (await finished(engine, run_id)).state == "completed"
    kid = _by_label(store, run_id)["kid"]
    assert backend.steered == [(kid.id, "focus on tests", "steer")]


async def test_a_failed_child_is_a_result_not_a_failure_of_the_parent(
    launch: LaunchFn, engine: Engine, project: Path
) -> None:
    fixtures = _fixtures(project, {"match": {"label": "lead"}, "spawn": [{"prompt": "p", "label": "kid"}]},
                         {"match": {"label": "kid"}, "fail": {"code": "AGENT_FAILED", "message": "no luck"}})
    record = await finished(engine, await launch(LEAD, fixtures=fixtures))
    assert record.state == "completed", record.error
    assert record.result[0]["ok"] is False
    assert record.result[0]["error"] == {"code": "AGENT_FAILED", "message": "no luck"}


async def test_invalid_child_parameters_fail_with_the_spec_message(
    launch: LaunchFn, engine: Engine, project: Path
) -> None:
    fixtures = _fixtures(project, {"match": {"label": "lead"}, "spawn": [{"prompt": "p", "label": " "}]})
    record = await finished(engine, await launch(LEAD, fixtures=fixtures))
    assert record.state == "failed"
    assert record.error is not None and record.error["code"] == "INVALID_METADATA"
    assert record.error["message"] == "Invalid child agent parameters"


async def test_a_child_cannot_escalate_its_parents_tools(launch: LaunchFn, engine: Engine, project: Path) -> None:
    fixtures = _fixtures(project, {"match": {"label": "lead"},
                                   "spawn": [{"prompt": "p", "label": "kid", "tools": ["bash"]}]})
    record = await finished(engine, await launch(LEAD, fixtures=fixtures))
    assert record.error == {"code": "UNKNOWN_TOOL", "message": "Child tool escalates parent boundary: bash"}


async def test_an_agent_without_the_agent_tool_cannot_spawn(launch: LaunchFn, engine: Engine, project: Path) -> None:
    fixtures = _fixtures(project, {"match": {"label": "lead"}, "spawn": [{"prompt": "p", "label": "kid"}]})
    script = 'return await agent("lead", {label: "lead", tools: ["read"]});'
    record = await finished(engine, await launch(script, fixtures=fixtures))
    assert record.state == "failed"
    assert record.error is not None and 'the "agent" tool' in record.error["message"]


async def test_children_count_against_the_launch_budget(
    launch: LaunchFn, engine: Engine, store: RunStore, project: Path
) -> None:
    fixtures = _fixtures(project, {"match": {"label": "lead"}, "spawn": [{"prompt": "p", "label": "one"},
                                                                      {"prompt": "p", "label": "two"}]})
    run_id = await launch(LEAD, fixtures=fixtures, budget={"agentLaunches": {"hard": 2}})
    record = await finished(engine, run_id)
    assert record.state == "budget_exhausted"  # the second child's BUDGET_EXHAUSTED is rethrown to the parent
    assert record.usage["agentLaunches"] == 2
    agents = _by_label(store, run_id)
    assert agents["one"].state == "completed" and agents["two"].state == "failed"
    assert agents["lead"].error is not None and agents["lead"].error["code"] == "BUDGET_EXHAUSTED"


def _piflow(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "piflow", *args], cwd=project, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_resumed_parent_reruns_no_completed_child(project: Path) -> None:
    (project / "lead.workflow.js").write_text(LEAD)
    rules = [{"match": {"label": "lead"}, "spawn": [{"prompt": "quick", "label": "quick"},
                                                    {"prompt": "slow", "label": "slow"}]},
             {"match": {"label": "quick"}, "text": "quick done"},
             {"match": {"label": "slow"}, "latencyMs": HOLD_MS, "text": "slow done"}]
    # `slow` runs until the kill (a fixed 1.5 s could end unseen on a loaded machine); the resume reads
    # the fixtures again, where it answers at once
    (project / "fixtures.json").write_text(json.dumps({"responses": rules}))
    with RunStore.open(store_path(str(project))) as store:
        first = _piflow(project, "run", "lead.workflow.js", "--fixtures", "fixtures.json", "--json")
        deadline = time.monotonic() + 60
        run_id = None
        while time.monotonic() < deadline:  # kill -9 once `quick` is journaled and `slow` is running
            runs = store.list_runs()
            if runs:
                run_id = runs[0].id
                agents = {a.label: a for a in store.agents(run_id)}
                if agents.get("quick") and agents["quick"].state == "completed" and agents.get("slow") \
                        and agents["slow"].state == "running":
                    break
            assert first.poll() is None, first.communicate()
            time.sleep(0.02)
        else:
            first.kill()
            raise AssertionError("the children never ran")
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert run_id is not None
        del rules[-1]["latencyMs"]
        (project / "fixtures.json").write_text(json.dumps({"responses": rules}))
        resumed = _piflow(project, "resume", run_id[:8], "--json")
        _out, err = resumed.communicate(timeout=90)
        assert resumed.returncode == 0, err
        record = store.get_run(run_id)
        assert record is not None and record.state == "completed", record
        by_path = Counter(a.journal_path for a in store.agents(run_id) if a.label == "quick")
        assert list(by_path.values()) == [1], "the completed child ran again"
        attempts = sum(len(store.attempts(a.id)) for a in store.agents(run_id) if a.label == "quick")
        assert attempts == 1
        assert [r["value"] for r in record.result] == ["quick done", "slow done"]
        assert len([a for a in store.agents(run_id) if a.label == "lead"]) == 2  # the parent itself re-ran

    # `piflow show` draws the ownership tree: children indented under their parent, `parentId` in JSON.
    shown = subprocess.run([sys.executable, "-m", "piflow", "show", run_id[:8]], cwd=project, capture_output=True,
                           text=True, check=True).stdout
    tree = [line.split(":")[0] for line in shown.splitlines() if line.lstrip().startswith("#")]
    # the killed attempt of lead (#1) keeps its children; its re-run (#4) restarted only `slow`
    assert tree == ["  #1 lead", "    #2 quick", "    #3 slow", "  #4 lead", "    #5 slow"], shown
    as_json = json.loads(subprocess.run([sys.executable, "-m", "piflow", "show", run_id[:8], "--json"], cwd=project,
                                        capture_output=True, text=True, check=True).stdout)
    parents = {agent["label"]: agent["parentId"] for agent in as_json["agentList"]}
    lead_id = next(a["id"] for a in as_json["agentList"] if a["label"] == "lead" and a["state"] == "completed")
    assert parents["slow"] == lead_id and parents["lead"] is None
