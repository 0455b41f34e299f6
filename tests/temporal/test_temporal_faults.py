"""Faults on a real cluster with three `piflow worker`s: a killed worker, a killed workflow host, an outage."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from piflow.engine.engine import LaunchRequest
from piflow.engine.lifecycle import ENDED
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from piflow.engine.temporal.wire import RunSnapshot
from temporal_cluster import Workers

AGENTS = 9
FLEET = "return await parallel(\"fleet\", {" + ", ".join(
    f'a{i}: () => agent("task {i}", {{ label: "a{i}" }})' for i in range(AGENTS)) + "});"
EXPECTED = {f"a{i}": f"[scripted] task {i}" for i in range(AGENTS)}


def fleet_project(tmp_path: Path, latency_ms: int) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": latency_ms}}))
    return project


async def launch_fleet(runs: TemporalRuns, project: Path) -> str:
    return await runs.launch(LaunchRequest(script=FLEET, cwd=str(project), concurrency=AGENTS, backend="scripted",
                                           fixtures=str(project / "fixtures.json")))


async def until(runs: TemporalRuns, run_id: str, predicate: Any, timeout: float) -> RunSnapshot:
    with anyio.fail_after(timeout):
        while True:
            try:
                snapshot = await runs.snapshot(run_id)
                if predicate(snapshot):
                    return snapshot
            except Exception:  # the cluster or every worker may be away for a while: that is the test
                pass
            await anyio.sleep(0.25)


def running_agents(snapshot: RunSnapshot) -> int:
    return sum(1 for a in snapshot.agents if a.get("state") == "running")


async def activity_counts(runs: TemporalRuns, run_id: str) -> tuple[Counter[str], Counter[str]]:
    """How often each agent attempt's activity was scheduled and completed, from the run's history."""
    history = await runs.client.get_workflow_handle("piflow-" + run_id).fetch_history()
    scheduled: Counter[str] = Counter()
    completed: Counter[str] = Counter()
    ids: dict[int, str] = {}
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            ids[event.event_id] = event.activity_task_scheduled_event_attributes.activity_id
            scheduled[ids[event.event_id]] += 1
        elif event.HasField("activity_task_completed_event_attributes"):
            completed[ids[event.activity_task_completed_event_attributes.scheduled_event_id]] += 1
    return scheduled, completed


async def workflow_host(runs: TemporalRuns, run_id: str) -> int:
    """The pid of the worker that completed the run's latest workflow task (identity `pid@host`)."""
    history = await runs.client.get_workflow_handle("piflow-" + run_id).fetch_history()
    identities = [e.workflow_task_completed_event_attributes.identity for e in history.events
                  if e.HasField("workflow_task_completed_event_attributes")]
    return int(identities[-1].split("@")[0])


def assert_each_agent_ran_once(scheduled: Counter[str], completed: Counter[str]) -> None:
    assert len(scheduled) == AGENTS and set(scheduled.values()) == {1}, scheduled
    assert completed == scheduled, "every journaled agent completed exactly once"


async def test_a_killed_worker_s_agents_complete_on_the_others(tmp_path: Path, workers: Workers) -> None:
    pool = workers.start(3, max_agents=3)
    project = fleet_project(tmp_path, latency_ms=4000)
    settings = TemporalSettings(address=workers.server.address, task_queue=workers.task_queue)
    async with TemporalRuns(settings, str(project)) as runs:
        run_id = await launch_fleet(runs, project)
        await until(runs, run_id, lambda s: running_agents(s) == AGENTS, 60)
        await anyio.sleep(1)  # every worker now holds attempts in flight
        host = await workflow_host(runs, run_id)
        victim = next(p for p in pool if p.pid != host)
        workers.kill(victim)
        final = await until(runs, run_id, lambda s: s.state in ENDED, 120)
        assert (final.state, final.result) == ("completed", EXPECTED), (final.error, final.agents)
        assert_each_agent_ran_once(*await activity_counts(runs, run_id))


async def test_killing_the_workflow_s_host_replays_it_on_another_worker(tmp_path: Path, workers: Workers) -> None:
    pool = workers.start(3, max_agents=3)
    project = fleet_project(tmp_path, latency_ms=3000)
    settings = TemporalSettings(address=workers.server.address, task_queue=workers.task_queue)
    async with TemporalRuns(settings, str(project)) as runs:
        run_id = await launch_fleet(runs, project)
        await until(runs, run_id, lambda s: running_agents(s) == AGENTS, 60)
        host = await workflow_host(runs, run_id)
        workers.kill(next(p for p in pool if p.pid == host))
        final = await until(runs, run_id, lambda s: s.state in ENDED, 120)
        assert (final.state, final.result) == ("completed", EXPECTED), (final.error, final.agents)
        assert await workflow_host(runs, run_id) != host, "another worker finished the workflow by replay"
        assert_each_agent_ran_once(*await activity_counts(runs, run_id))


async def test_a_cluster_outage_mid_run_delays_the_run_but_it_completes(tmp_path: Path, workers: Workers) -> None:
    workers.start(3, max_agents=3)
    project = fleet_project(tmp_path, latency_ms=3000)
    settings = TemporalSettings(address=workers.server.address, task_queue=workers.task_queue)
    async with TemporalRuns(settings, str(project)) as runs:
        run_id = await launch_fleet(runs, project)
        await until(runs, run_id, lambda s: running_agents(s) == AGENTS, 60)
        workers.server.stop()
        await anyio.sleep(2)
        workers.server.start()
        final = await until(runs, run_id, lambda s: s.state in ENDED, 180)
        assert (final.state, final.result) == ("completed", EXPECTED), (final.error, final.agents)
    assert all(p.poll() is None for p in workers.processes), "workers rode out the outage"
