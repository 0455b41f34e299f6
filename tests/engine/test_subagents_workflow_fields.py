"""pi-subagents workflow fields on the pragma line (SUBAGENTS_SPEC A.1): `timeoutMs`/`maxRuntimeMs`
bound the whole run, and bad fields are refused at launch and marked in the editor alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from piflow.analysis import Capabilities, analyze
from piflow.analysis.dialects import subagents
from piflow.engine.environment import store_path
from piflow.engine.store import RunStore

TIMED = """// piflow: pi-subagents {"timeoutMs": 3000, "maxRuntimeMs": 3000}
await runs.run("quick", {agent: "worker", task: "t"});
await runs.run("slow", {agent: "worker", task: "t"});
return "done";
"""


def _piflow(project: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, env={**os.environ},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def _project(project: Path, script: str, slow_ms: int) -> None:
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    (project / "w.js").write_text(script)
    (project / "f.json").write_text(json.dumps({"responses": [{"match": {"key": "slow"}, "latencyMs": slow_ms}]}))


def test_the_timeout_cancels_the_running_child_and_fails_the_run(project: Path) -> None:
    _project(project, TIMED, slow_ms=600_000)
    started = time.monotonic()
    done = _piflow(project, "run", "w.js", "--fixtures", "f.json", "--json")
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    reply = json.loads(done.stdout.splitlines()[-1])
    assert reply["state"] == "failed"
    assert reply["error"]["message"] == "Workflow script timed out after 3000ms."
    assert 3 <= elapsed < 90  # the 600 s child did not hold the run open
    with RunStore.open(store_path(str(project))) as store:
        states = {a.label: a.state for a in store.agents(reply["runId"])}
    assert states == {"quick": "completed", "slow": "cancelled"}


def test_a_run_inside_its_timeout_completes(project: Path) -> None:
    _project(project, TIMED.replace("3000", "120000"), slow_ms=200)
    done = _piflow(project, "run", "w.js", "--fixtures", "f.json", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["result"] == "done"


BAD_FIELDS = [
    ('{"timeoutMs": 1500, "maxRuntimeMs": 900}',
     "timeoutMs and maxRuntimeMs are aliases; they must agree (got 1500 and 900). (line 1, column 25)"),
    ('{"maxRuntimeMs": -5}', "maxRuntimeMs must be a positive integer. (line 1, column 25)"),
    ('{"timeoutMs": 15', "The pi-subagents pragma's workflow fields must be one JSON object: Expecting ',' "
                         "delimiter (column 41). (line 1, column 25)"),
    ('{"timeout": 15}', "Unknown workflow field 'timeout' after the pi-subagents pragma. Known fields: defaults, "
                        "maxRuntimeMs, timeoutMs, usageBudget. (line 1, column 25)"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "message"), BAD_FIELDS)
def test_bad_workflow_fields_refuse_the_launch_with_their_place(project: Path, fields: str, message: str) -> None:
    _project(project, f"// piflow: pi-subagents {fields}\nreturn 1;\n", slow_ms=0)
    done = _piflow(project, "run", "w.js")
    assert done.returncode == 2
    assert f"INVALID_METADATA: {message}" in done.stderr
    with RunStore.open(store_path(str(project))) as store:
        assert store.list_runs() == []  # nothing launched


@pytest.mark.parametrize(("fields", "message"), BAD_FIELDS)
def test_the_editor_marks_the_same_fields_with_the_same_message(fields: str, message: str) -> None:
    script = f"// piflow: pi-subagents {fields}\nreturn 1;\n"
    findings = [f for f in analyze(script, Capabilities(), subagents.NAME) if f.rule == "workflow-fields"]
    assert [f.message for f in findings] == [message.removesuffix(" (line 1, column 25)")]
    assert (findings[0].range.start.line, findings[0].range.start.character) == (0, 24)
    assert findings[0].range.end.character == len(f"// piflow: pi-subagents {fields}")


DEFAULTS = """// piflow: pi-subagents {"defaults": {"outputMode": "file-only", "toolBudget": {"hard": 1}}}
const out = {};
out.plain = (await runs.run("plain", {agent: "worker", task: "t"})).output.startsWith("Output saved to: ");
out.own = (await runs.run("own", {agent: "worker", task: "t", outputMode: "inline"})).output;
try { await runs.run("greedy", {agent: "worker", task: "t"}); } catch (error) { out.greedy = error.message; }
const [item] = await runs.all([{key: "item", agent: "worker", task: "t", toolBudget: {hard: 5}}]);
out.item = item.ok;
const board = await runs.lanes([{key: "lane", stages: [{key: "s", agent: "worker", task: "t"}]}]);
out.stage = board[0].stages[0].state;
return out;
"""


def test_defaults_apply_to_every_child_and_a_childs_own_fields_win(project: Path) -> None:
    _project(project, DEFAULTS, slow_ms=0)
    (project / "f.json").write_text(json.dumps({"responses": [{"match": {"key": "greedy"}, "toolCalls": 3},
                                                              {"match": {"key": "item"}, "toolCalls": 3},
                                                              {"match": {"key": "lane.s"}, "toolCalls": 3}]}))
    done = _piflow(project, "run", "w.js", "--fixtures", "f.json", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["result"] == {
        "plain": True,  # outputMode from the defaults
        "own": "[scripted] t",  # the child's own outputMode wins
        "greedy": "Run 'greedy' failed: Tool budget hard limit reached after 1 tool calls (hard 1). The child was "
                  "stopped before calling scripted; raise toolBudget.hard or narrow the task.",
        "item": True,  # its own toolBudget (hard 5) wins over the default's hard 1
        "stage": "failed",  # lane stages get the defaults too
    }


BAD_DEFAULTS = """// piflow: pi-subagents {"defaults": {"worktree": "yes", "gate": "npm test"}}
const out = [];
try { runs.run("a", {agent: "worker", task: "t"}); } catch (error) { out.push(error.message); }
try { runs.all([{key: "b", agent: "worker", task: "t"}]); } catch (error) { out.push(error.message); }
try { runs.run("c", {agent: "worker", task: "t", worktree: false, acceptance: {}}); }
catch (error) { out.push(error.message); }
try { runs.run("d", {resume: "x", task: "again", worktree: false}); } catch (error) { out.push(error.message); }
return out;
"""


def test_a_bad_default_fails_each_child_with_the_childs_own_message(project: Path) -> None:
    _project(project, BAD_DEFAULTS, slow_ms=0)
    done = _piflow(project, "run", "w.js", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["result"] == [
        "runs.run worktree must be true or false.",
        "runs.all item 0 worktree must be true or false.",
        "runs.run gate cannot be combined with acceptance; use one gate command or acceptance.verify.",
        "runs.run gate is not supported with retained resume.",  # a resumed child takes the default gate
    ]


@pytest.mark.parametrize("field", ["agent", "task", "resume", "async"])
def test_a_default_that_names_one_child_is_refused_at_launch_and_in_the_editor(project: Path, field: str) -> None:
    script = f'// piflow: pi-subagents {{"defaults": {{"{field}": "x"}}}}\nreturn 1;\n'
    message = f"defaults.{field} is not a workflow default: set it on each runs.run / runs.all item."
    _project(project, script, slow_ms=0)
    done = _piflow(project, "run", "w.js")
    assert done.returncode == 2 and f"INVALID_METADATA: {message} (line 1, column 25)" in done.stderr
    findings = [f for f in analyze(script, Capabilities(), subagents.NAME) if f.rule == "workflow-fields"]
    assert [f.message for f in findings] == [message]
