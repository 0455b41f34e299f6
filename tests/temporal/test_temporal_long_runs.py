"""Long runs and limits on Temporal: a run's workflow continues as new past its history limit carrying
its journal; a provider rate limit pauses the run as on the embedded engine; a runaway script fails the
run with the spec's error in bounded time. Real dev server and `piflow worker`s."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from temporal_support import machine, openai_project, until_state

from backends.chat_server import Body, ChatServer, Stream, text_stream, usage
from piflow.engine.engine import LaunchRequest
from piflow.engine.lifecycle import ENDED
from piflow.engine.temporal import wire
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from temporal_cluster import DevServer, Workers

SEQUENCE = """
const done = [];
for (let i = 0; i < 8; i++) {
  done.push(await agent(`step ${i}`, {label: `s${i}`}));
  if (i === 4) await checkpoint({name: "half", prompt: "Half way", context: null});
}
return done;
"""


async def test_a_long_run_continues_as_new_and_keeps_its_journal(
    tmp_path: Path, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "HISTORY_LIMIT", 25)  # the launch's RunStart carries it: a few agents per history
    workers.start(2)
    project = tmp_path / "project"
    project.mkdir()
    async with TemporalRuns(TemporalSettings(address=workers.server.address, task_queue=workers.task_queue),
                            str(project)) as runs:
        run_id = await runs.launch(LaunchRequest(script=SEQUENCE, cwd=str(project), backend="scripted"))
        waiting = await until_state(runs, run_id, {"awaiting_input", *ENDED}, 120)
        assert waiting.state == "awaiting_input", (waiting.error, workers.logs())
        assert await runs.respond(run_id, "half", True)
        final = await until_state(runs, run_id, ENDED, 120)
        handle = runs.client.get_workflow_handle("piflow-" + run_id)
        chain = 0
        async for _ in runs.client.list_workflows(f'WorkflowId = "piflow-{run_id}"'):
            chain += 1
        history = await handle.fetch_history()
    assert (final.state, final.result) == ("completed", [f"[scripted] step {i}" for i in range(8)]), final.error
    assert chain >= 3, "the run went on in fresh histories"
    assert len(history.events) < 60, "the last history holds only the last part of the run"
    assert final.usage["agentLaunches"] == 8, "no agent ran twice across the histories"


async def test_a_provider_rate_limit_pauses_the_run_until_it_is_resumed(
    tmp_path: Path, dev_server: DevServer, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = openai_project(tmp_path, monkeypatch, chat)
    chat.script(Body({"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, status=429),
                Stream(text_stream("after the pause", counts=usage(10, 5))))
    task_queue = f"piflow-limits-{os.getpid()}-{tmp_path.name}"
    pool = machine(dev_server, tmp_path / "machine", task_queue, chat)
    try:
        pool.start(1)
        async with TemporalRuns(TemporalSettings(address=dev_server.address, task_queue=task_queue),
                                str(project)) as runs:
            run_id = await runs.launch(LaunchRequest(script='return await agent("q")', cwd=str(project)))
            paused = await until_state(runs, run_id, {"paused", *ENDED}, 120)
            assert paused.state == "paused", (paused.error, pool.logs())
            time.sleep(2)
            assert len(chat.requests) == 1, "a paused run asks the provider nothing (no Temporal retry loop)"
            await runs.control(run_id, "resume")
            final = await until_state(runs, run_id, ENDED, 120)
    finally:
        pool.stop_all()
    assert (final.state, final.result) == ("completed", "after the pause"), final.error
    assert len(chat.requests) == 2


@pytest.mark.parametrize("loop", ["while (true) {}", "for (;;) { await phase('spin') }"])
async def test_a_runaway_script_fails_the_run_within_a_bounded_time(
    tmp_path: Path, workers: Workers, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "STEP_LIMIT", 10.0)  # carried by the launch's RunStart (default 300 s)
    workers.start(1)
    project = tmp_path / "project"
    project.mkdir()
    started = time.monotonic()
    async with TemporalRuns(TemporalSettings(address=workers.server.address, task_queue=workers.task_queue),
                            str(project)) as runs:
        run_id = await runs.launch(LaunchRequest(script=f'await agent("a");\n{loop}', cwd=str(project),
                                                 backend="scripted"))
        final = await until_state(runs, run_id, ENDED, 150)
    assert final.state == "failed", final
    assert final.error is not None and final.error["code"] == "WORKER_UNRESPONSIVE", final.error
    assert time.monotonic() - started < 120, "not the 3 × 30 minutes of a retried step"
