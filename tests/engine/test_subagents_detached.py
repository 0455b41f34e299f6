"""pi-subagents run controls beyond one child (SUBAGENTS_SPEC A.4, C): `usageBudget` refuses new
children once the run's usage reaches it (running ones finish), `async: true` detaches a
`runs.run` child behind a running receipt, and `maxSubagentSpawnsPerSession` caps the spawns of
a run (piflow's session). Everything through `piflow run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from piflow.engine.environment import store_path
from piflow.engine.store import RunStore

EXHAUSTED = "Usage budget exhausted: tokens 1200/1000 used; running children finish, no new child starts."

BUDGETED = """// piflow: pi-subagents {"usageBudget": {"tokens": 1000}}
const slow = runs.run("slow", {agent: "worker", task: "t"});
await runs.run("costly", {agent: "worker", task: "t"});
const out = {};
try { await runs.run("late", {agent: "worker", task: "t"}); } catch (error) { out.late = error.message; }
const [batch] = await runs.all([{key: "batch", agent: "worker", task: "t"}]);
out.batch = [batch.ok, batch.error];
out.slow = (await slow).ok;
try { await runs.run("bg", {agent: "worker", task: "t", async: true}); } catch (error) { out.bg = error.message; }
return out;
"""


def _piflow(project: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "piflow", *args, "--json"], cwd=project, env={**os.environ},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert done.returncode in (0, 1), done.stderr
    reply: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return reply


def _project(project: Path, script: str, responses: list[dict[str, Any]]) -> None:
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    (project / "w.js").write_text(script)
    (project / "f.json").write_text(json.dumps({"responses": responses}))


def _states(project: Path, run_id: str) -> dict[str, str]:
    with RunStore.open(store_path(str(project))) as store:
        return {a.label or "": a.state for a in store.agents(run_id)}


def test_a_spent_usage_budget_refuses_new_children_and_lets_running_ones_finish(project: Path) -> None:
    _project(project, BUDGETED, [{"match": {"key": "costly"}, "tokens": {"input": 900, "output": 300}},
                                 {"match": {"key": "slow"}, "latencyMs": 3000, "tokens": {"input": 0, "output": 0}}])
    reply = _piflow(project, "run", "w.js", "--fixtures", "f.json")
    assert reply["state"] == "completed", reply["error"]
    assert reply["result"] == {
        "late": f"Run 'late' failed: {EXHAUSTED}",
        "batch": [False, EXHAUSTED],  # collected in runs.all, as any failed child
        "slow": True,  # started before the budget was reached: it finished
        "bg": "Run 'bg' failed: workflow usageBudget does not support async runs.run launches.",
    }
    assert _states(project, reply["runId"]) == {"slow": "completed", "costly": "completed"}  # nothing else ran


DETACHED = """// piflow: pi-subagents
const receipt = await runs.run("bg", {agent: "worker", task: "background work", async: true});
const during = (await runs.status("bg")).state;
const refused = await runs.run("nope", {agent: "no-such-agent", task: "t", async: true});
await runs.run("fg", {agent: "worker", task: "t"});
const nope = await runs.status("nope");
let batch;
try { await runs.all([{key: "z", agent: "worker", task: "t", async: true}]); } catch (error) { batch = error.message; }
return {receipt, during, refused: refused.state, nope: [nope.ok, nope.error.split(".")[0]], batch};
"""


def test_an_async_child_returns_a_running_receipt_and_the_run_waits_for_it(project: Path) -> None:
    _project(project, DETACHED, [{"match": {"key": "bg"}, "latencyMs": 2500}])
    reply = _piflow(project, "run", "w.js", "--fixtures", "f.json")
    assert reply["state"] == "completed", reply["error"]
    assert reply["result"] == {
        "receipt": {"key": "bg", "ok": False, "state": "running", "output": "", "agent": "worker", "async": True},
        "during": "running",
        "refused": "running",  # the receipt comes first; the refusal is the child's result
        "nope": [False, "Unknown agent 'no-such-agent'"],
        "batch": "runs.all item 0 async: true is supported on runs.run only; launch a detached child with "
                 "runs.run(key, { async: true, ... }).",
    }
    # the script returned while bg was still running; the run completed only after bg did
    assert _states(project, reply["runId"]) == {"bg": "completed", "fg": "completed"}


def test_the_session_spawn_limit_caps_a_run_with_its_own_message(project: Path) -> None:
    settings = project.parent / "home" / ".pi" / "agent" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"subagents": {"maxSubagentSpawnsPerSession": 2}}))
    _project(project, """// piflow: pi-subagents
await runs.run("one", {agent: "worker", task: "t"});
try {
  await runs.all([{key: "two", agent: "worker", task: "t"}, {key: "three", agent: "worker", task: "t"}]);
} catch (error) { return error.message; }
""", [])
    reply = _piflow(project, "run", "w.js", "--fixtures", "f.json")
    assert reply["result"] == (
        "Subagent spawn limit reached for this session (1/2 used; this admission group needs 2). Raise "
        "subagents.maxSubagentSpawnsPerSession in pi's settings.json or launch fewer children.")
    assert _states(project, reply["runId"]) == {"one": "completed"}  # no child of the group started
