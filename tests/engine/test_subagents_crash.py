"""Durability of pi-subagents scripts: SIGKILL the owning `piflow run` at many points, resume, compare.

Children are journaled under their workflow keys; a resumed run must give the uninterrupted result
and no completed child may run again (each child's journal path has one completed agent record
and one backend attempt), emits are not repeated and mission state survives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from held import HOLD_MS
from piflow.engine.environment import store_path
from piflow.engine.store import RunStore
from piflow.engine.subagents.calls import SUBAGENT_EMIT

SCRIPT = """// piflow: pi-subagents
const reviews = await runs.all(Array.from({length: 10}, (_, i) => ({key: `review-${i}`, agent: "reviewer",
  task: `review part ${i}`})));
emit({reviewed: reviews.length});
let note = "start";
for (let i = 0; i < 6; i += 1) {
  const step = await runs.run(`step-${i}`, {agent: "worker", task: `step ${i} after ${note.length}`});
  note = step.output;
  await state.set("last", i);
}
const [a, b] = await runs.all([{key: "final-a", agent: "worker", task: "final a"},
                               {key: "final-b", agent: "worker", task: "final b"}]);
console.log("done", a.key, b.key);
return {reviews: reviews.map((r) => r.ok).filter(Boolean).length, note, last: await state.get("last"),
        finals: [a.output, b.output]};
"""
CHILDREN = 18
KILL_POINTS = 12
EXPECTED = {
    "reviews": 10,
    "note": "[scripted] step 5 after 26",
    "last": 5,
    "finals": ["[scripted] final a", "[scripted] final b"],
}


def _piflow(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "piflow", *args], cwd=project, env={**os.environ},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _completed(store: RunStore, run_id: str) -> int:
    return sum(1 for a in store.agents(run_id) if a.state == "completed")


def _wait(process: subprocess.Popen[str], store: RunStore, kill_after: int | None) -> str:
    deadline = time.monotonic() + 90
    run_id: str | None = None
    while process.poll() is None and time.monotonic() < deadline:
        runs = store.list_runs()
        run_id = runs[0].id if runs else None
        if run_id is not None and kill_after is not None and _completed(store, run_id) >= kill_after:
            process.send_signal(signal.SIGKILL)
            process.wait()
            break
        time.sleep(0.005)
    if process.poll() is None:
        process.kill()
        pytest.fail("the run did not finish in time")
    runs = store.list_runs()
    if not runs:
        pytest.fail(f"piflow exited {process.returncode} before starting a run: {process.communicate()[1]}")
    return runs[0].id


@pytest.mark.parametrize("point", range(KILL_POINTS))
def test_kill_and_resume_runs_no_completed_child_twice(point: int, project: Path) -> None:
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    (project / "fleet.workflow.js").write_text(SCRIPT)
    # The last child answers only on resume, so even the last kill point lands while the run still works.
    held_last = {"match": {"label": "final-b"}, "latencyMs": HOLD_MS}
    (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": 40}, "responses": [held_last]}))
    kill_after = round(point * (CHILDREN - 1) / (KILL_POINTS - 1))
    with RunStore.open(store_path(str(project))) as store:
        first = _piflow(project, "run", "fleet.workflow.js", "--fixtures", "fixtures.json", "--json")
        run_id = _wait(first, store, kill_after)
        record = store.get_run(run_id)
        assert record is not None and record.state != "completed", "the kill landed after the run had finished"
        (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": 40}}))  # read by the resume
        resumed = _piflow(project, "resume", run_id[:8], "--json")
        _wait(resumed, store, None)
        _out, err = resumed.communicate()
        assert resumed.returncode == 0, err
        record = store.get_run(run_id)
        assert record is not None
        assert record.state == "completed", record.error
        assert record.result == EXPECTED
        agents = store.agents(run_id)
        completed = Counter(a.journal_path for a in agents if a.state == "completed")
        assert len(completed) == CHILDREN and max(completed.values()) == 1, "a completed child ran again"
        attempts = Counter(a.journal_path for a in agents for attempt in store.attempts(a.id)
                           if attempt.error is None)
        assert max(attempts.values()) == 1, "a backend answered one child twice"
        emits = [e for e in store.events(run_id) if e.type == SUBAGENT_EMIT]
        assert [e.payload["value"] for e in emits] == [{"reviewed": 10}], "an emit was repeated or lost"
