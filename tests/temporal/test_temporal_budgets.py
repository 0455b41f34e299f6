"""Budgets and pauses of runs on a real Temporal dev server, as the embedded engine has them (spec H,
F.1): an exhausted run waits on the cluster for a raised budget, `durationMs` is the run's running
time on the workflow's clock, and a pause is `pausing` until the running agents finish."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
from temporal_support import temporal_project, until_state

from isolation import isolated_environment
from piflow.engine.lifecycle import ENDED
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from temporal_cluster import Workers

THREE = """
const one = await agent("one", { label: "one" });
const two = await agent("two", { label: "two" });
const three = await agent("three", { label: "three" });
return [one, two, three];
"""
ASK_FIRST = """
await checkpoint({ name: "go", prompt: "Go?", context: {} });
""" + THREE
FAN_OUT = """
const both = await parallel("scan", { a: () => agent("a", { label: "a" }), b: () => agent("b", { label: "b" }) });
const last = await agent("last", { label: "last" });
return [both, last];
"""


def make_project(root: Path, workers: Workers, scripts: dict[str, str], latency_ms: int = 0) -> Path:
    project = temporal_project(root, workers, scripts)
    (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": latency_ms}}))
    return project


def piflow(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`piflow` as a teammate on another machine (its own home and run store)."""
    root = project.parent / "teammate"
    env = isolated_environment(root, root / "home", root / "agent")
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)


def launch(project: Path, script: str, budget: dict[str, object] | None = None) -> str:
    extra = ["--budget", json.dumps(budget)] if budget is not None else []
    done = piflow(project, "run", script, "--fixtures", "fixtures.json", "--detach", *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def client(workers: Workers, project: Path) -> TemporalRuns:
    return TemporalRuns(TemporalSettings(address=workers.server.address, task_queue=workers.task_queue), str(project))


async def test_an_exhausted_run_waits_on_the_cluster_and_goes_on_once_a_raised_budget_is_approved(
    tmp_path: Path, workers: Workers
) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers, {"three.workflow.js": THREE})
    run_id = launch(project, "three.workflow.js", {"agentLaunches": {"hard": 2}})
    async with client(workers, project) as runs:
        exhausted = await until_state(runs, run_id, ENDED, 120)
        assert exhausted.state == "budget_exhausted", (exhausted.error, workers.logs())
        assert exhausted.error == {"code": "BUDGET_EXHAUSTED",
                                   "message": "Budget version 1 exhausted: agentLaunches usage=2 hard=2"}
        assert [(a["label"], a["state"]) for a in exhausted.agents][:2] == [("one", "completed"), ("two", "completed")]

        still = piflow(project, "resume", run_id[:8])
        assert still.returncode != 0
        assert "Every exhausted hard budget must be raised above retained usage or removed" in still.stderr

        asked = piflow(project, "resume", run_id[:8], "--budget", '{"agentLaunches": {"hard": 5}}')
        assert asked.returncode == 0, asked.stderr
        found = re.search(r"budget adjustment (\S+) for run " + run_id + " requires approval", asked.stdout)
        assert found is not None, asked.stdout
        proposal = found.group(1)
        shown = json.loads(piflow(project, "show", run_id[:8], "--json").stdout)
        assert (shown["state"], [p["proposalId"] for p in shown["proposals"]]) == ("budget_exhausted", [proposal])

        approved = piflow(project, "budget", "approve", run_id[:8], proposal)
        assert approved.returncode == 0, approved.stderr
        assert json.loads(approved.stdout) == {"runId": run_id, "state": "running", "approved": True,
                                               "reason": "approved"}
        again = piflow(project, "budget", "approve", run_id[:8], proposal)
        assert again.returncode == 1 and json.loads(again.stdout)["reason"] == "proposal_not_pending"

        done = await until_state(runs, run_id, {"completed", "failed", "stopped"}, 120)
    assert (done.state, done.result) == ("completed", ["[scripted] one", "[scripted] two", "[scripted] three"])
    assert done.usage["agentLaunches"] == 3  # the journaled agents did not run again
    assert (done.budget, done.budget_version) == ({"agentLaunches": {"hard": 5}}, 2)
    assert [e["type"] for e in done.budget_events] == ["hard_exhausted", "adjustment_requested", "adjustment_approved"]


async def test_duration_counts_running_time_only_and_a_rejected_raise_leaves_the_run_exhausted(
    tmp_path: Path, workers: Workers
) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers, {"ask.workflow.js": ASK_FIRST}, latency_ms=2500)
    launched_at = time.monotonic()
    run_id = launch(project, "ask.workflow.js", {"durationMs": {"hard": 4000}})
    async with client(workers, project) as runs:
        asked = await until_state(runs, run_id, {"awaiting_input", *ENDED}, 120)
        assert asked.state == "awaiting_input", asked.error
        await anyio.sleep(6)  # waiting for an answer is not running time
        assert await runs.respond(run_id, "go", True)
        exhausted = await until_state(runs, run_id, ENDED, 120)
        wall_ms = (time.monotonic() - launched_at) * 1000
        assert exhausted.state == "budget_exhausted", (exhausted.error, workers.logs())
        assert exhausted.error is not None and exhausted.error["message"].startswith(
            "Budget version 1 exhausted: durationMs usage=")
        assert 4000 <= exhausted.usage["durationMs"] <= wall_ms - 6000
        assert exhausted.agents[-1]["state"] == "failed"  # refused before its turn, not run

        asked = piflow(project, "resume", run_id[:8], "--budget", '{"durationMs": null}')
        proposal = re.search(r"budget adjustment (\S+) for run", asked.stdout)
        assert proposal is not None, (asked.stdout, asked.stderr)
        rejected = piflow(project, "budget", "reject", run_id[:8], proposal.group(1))
        assert json.loads(rejected.stdout) == {"runId": run_id, "state": "budget_exhausted", "approved": False,
                                               "reason": "rejected"}
        assert (await runs.snapshot(run_id)).state == "budget_exhausted"
        assert piflow(project, "stop", run_id[:8]).returncode == 0
        stopped = await until_state(runs, run_id, {"stopped"}, 60)
    assert [e["type"] for e in stopped.budget_events][-2:] == ["adjustment_requested", "adjustment_rejected"]


async def test_a_pause_is_pausing_until_the_running_agents_finish_then_paused(
    tmp_path: Path, workers: Workers
) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers, {"fan.workflow.js": FAN_OUT}, latency_ms=6000)
    run_id = launch(project, "fan.workflow.js")
    async with client(workers, project) as runs:
        with anyio.fail_after(120):
            while [a["state"] for a in (await runs.snapshot(run_id)).agents] != ["running", "running"]:
                await anyio.sleep(0.2)
        paused = piflow(project, "pause", run_id[:8])
        assert paused.returncode == 0, paused.stderr
        pausing = await runs.snapshot(run_id)
        assert pausing.state == "pausing"  # both agents are still at work (6 s each)
        settled = await until_state(runs, run_id, {"paused", *ENDED}, 60)
        assert settled.state == "paused"
        assert sorted((a["label"], a["state"]) for a in settled.agents) == [("a", "completed"), ("b", "completed")]
        await anyio.sleep(3)
        assert [a["label"] for a in (await runs.snapshot(run_id)).agents] == ["a", "b"]  # "last" waits
        assert piflow(project, "resume", run_id[:8]).returncode == 0
        done = await until_state(runs, run_id, ENDED, 120)
    assert (done.state, done.result) == ("completed", [{"a": "[scripted] a", "b": "[scripted] b"}, "[scripted] last"])
