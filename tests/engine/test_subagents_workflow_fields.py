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


@pytest.mark.parametrize(("fields", "message"), [
    ('{"usageBudget": {"tokens": 1000}}', "usageBudget is not enforced by piflow yet"),
    ('{"defaults": {"model": "scripted/default"}}', "Workflow defaults are not applied by piflow yet"),
])  # fmt: skip
def test_fields_piflow_does_not_apply_yet_are_refused_not_ignored(project: Path, fields: str, message: str) -> None:
    _project(project, f"// piflow: pi-subagents {fields}\nreturn 1;\n", slow_ms=0)
    done = _piflow(project, "run", "w.js")
    assert done.returncode == 2 and message in done.stderr
