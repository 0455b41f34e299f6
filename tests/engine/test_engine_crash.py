"""Durability: SIGKILL the owning `piflow run` process at many points, resume, compare (DESIGN 11)."""

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

import pytest

from held import HOLD_MS
from piflow.engine import events
from piflow.engine.engine import Engine
from piflow.engine.environment import store_path
from piflow.engine.store import RunStore

TASKS = ", ".join(f"t{n}: () => agent('task {n}')" for n in range(24))
SCRIPT = f"""
phase("fan-out");
const fanned = await parallel("batch", {{{TASKS}}});
const go = await checkpoint({{name: "go", prompt: "Continue?", context: {{done: Object.keys(fanned).length}}}});
phase("pipeline");
const piped = await pipeline("pipe", {{x: 1, y: 2, z: 3}}, {{
  first: (v) => agent(`first ${{v}}`),
  second: (v) => agent(`second ${{v}}`),
  third: (v) => agent(`third ${{v}}`),
}});
return {{count: Object.keys(fanned).length, go, piped}};
"""
EXPECTED = {
    "count": 24,
    "go": "approved",
    "piped": {k: f"[scripted] third [scripted] second [scripted] first {v}" for k, v in (("x", 1), ("y", 2), ("z", 3))},
}
KILL_POINTS = 20
AGENTS = 33


def _piflow(project: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "piflow", *args],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _answer_checkpoint(store: RunStore, run_id: str, answered: list[float]) -> None:
    if store.awaiting_checkpoints(run_id) and Engine(store).respond(run_id, name="go", approved=True).accepted:
        answered.append(time.monotonic())


def _completed(store: RunStore, run_id: str) -> int:
    return sum(1 for a in store.agents(run_id) if a.state == "completed")


def _drive(process: subprocess.Popen[str], store: RunStore, run_id: str | None, kill_after: int | None,
           answered: list[float]) -> str:
    """Follow a run until its process ends, or SIGKILL it once `kill_after` agents completed.

    The checkpoint is answered from here, as a second terminal would.
    """
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        if run_id is None:
            runs = store.list_runs()
            run_id = runs[0].id if runs else None
        if run_id is not None:
            _answer_checkpoint(store, run_id, answered)
            if kill_after is not None and _completed(store, run_id) >= kill_after:
                process.send_signal(signal.SIGKILL)
                process.wait()
                break
        time.sleep(0.005)
    if process.poll() is None:
        process.kill()
        pytest.fail("the run did not finish in time")
    if run_id is None:
        runs = store.list_runs()
        if not runs:
            pytest.fail(f"piflow exited {process.returncode} before starting a run: {process.communicate()[1]}")
        run_id = runs[0].id
    return run_id


def _check_no_rerun(store: RunStore, run_id: str, answered_before_kill: bool) -> None:
    completed = Counter(a.journal_path for a in store.agents(run_id) if a.state == "completed")
    assert completed and max(completed.values()) == 1, "an agent whose result was journaled ran again"
    assert set(store.journal(run_id)) >= set(completed)
    awaiting = [e for e in store.events(run_id) if e.type == events.CHECKPOINT_STATE_CHANGED
                and e.payload["state"] == "awaiting"]
    if answered_before_kill:
        assert len(awaiting) == 1, "an answered checkpoint was asked again"


@pytest.mark.parametrize("point", range(KILL_POINTS))
def test_kill_and_resume_gives_the_uninterrupted_result(point: int, project: Path) -> None:
    (project / "crash.workflow.js").write_text(SCRIPT)
    # The run's last agent (z's third stage) answers only on resume, so even the last kill point (32 of
    # 33 agents completed) lands while the run still works, whatever the machine's load.
    held_last = {"match": {"prompt": r"^third .*first 3$"}, "latencyMs": HOLD_MS}
    (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": 60}, "responses": [held_last]}))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    kill_after = round(point * (AGENTS - 1) / (KILL_POINTS - 1))  # spread over the whole run
    answered: list[float] = []
    with RunStore.open(store_path(str(project))) as store:
        first = _piflow(project, env, "run", "crash.workflow.js", "--fixtures", "fixtures.json", "--concurrency", "4",
                        "--json")
        run_id = _drive(first, store, None, kill_after, answered)
        answered_before_kill = bool(answered)
        record = store.get_run(run_id)
        assert record is not None
        assert record.state != "completed", "the kill landed after the run had finished"
        (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": 60}}))  # read by the resume
        resumed = _piflow(project, env, "resume", run_id[:8], "--json")
        _drive(resumed, store, run_id, None, answered)
        _out, err = resumed.communicate()
        assert resumed.returncode == 0, err
        record = store.get_run(run_id)
        assert record is not None
        assert record.state == "completed", record.error
        assert record.result == EXPECTED
        _check_no_rerun(store, run_id, answered_before_kill)


def test_approval_from_another_process_reaches_a_detached_run(project: Path) -> None:
    (project / "gate.workflow.js").write_text(
        'const a = await agent("build"); return [a, await checkpoint({name: "ship", prompt: "Ship?", context: null})]'
    )
    env = {**os.environ}
    started = subprocess.run([sys.executable, "-m", "piflow", "run", "gate.workflow.js", "--detach"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    with RunStore.open(store_path(str(project))) as store:
        deadline = time.monotonic() + 30
        while not store.awaiting_checkpoints(run_id):
            assert time.monotonic() < deadline, "the detached run never reached its checkpoint"
            time.sleep(0.05)
        approve = subprocess.run([sys.executable, "-m", "piflow", "approve", run_id[:8], "ship"], cwd=project,
                                 env=env, capture_output=True, text=True, timeout=60)
        assert approve.returncode == 0, approve.stderr
        assert approve.stdout.strip() == "Checkpoint response accepted."
        answered_at = time.monotonic()
        record: Any = None
        while time.monotonic() < answered_at + 10:
            record = store.get_run(run_id)
            if record is not None and record.state == "completed":
                break
            time.sleep(0.02)
        assert record is not None and record.state == "completed"
        assert record.result == ["[scripted] build", "approved"]
