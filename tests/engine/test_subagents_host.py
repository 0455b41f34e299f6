"""`runs.host` (spec A.7): validation messages, real commands, timeouts, bounds and the log file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import LaunchFn
from engine_support import finished

from held import HOLD_MS
from piflow.engine.engine import Engine
from piflow.engine.environment import store_path
from piflow.engine.journal import host_path
from piflow.engine.store import RunRecord, RunStore
from piflow.engine.subagents.host import HostStep, execute, host_step
from piflow.errors import WorkflowError

CI = {"kind": "command", "command": "true", "timeoutMs": 120000}
H = "runs.host('ci') "


def _running(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"  # a killed orphan may stay a zombie until init reaps it


def _alive(pid: int) -> bool:
    """Whether `pid` still runs 10 s later (a signal is delivered asynchronously; margins for a loaded machine)."""
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _running(pid)


def _message(key: Any, params: Any) -> str:
    with pytest.raises(WorkflowError) as caught:
        host_step(key, params)
    assert caught.value.code == "INVALID_METADATA"
    return caught.value.message


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({**CI, "cwd": "/repo/wt"}, H + "params have unsupported fields: cwd. The host step does not accept"),
        ({**CI, "shell": "bash"}, H + "params have unsupported fields: shell."),
        ({**CI, "kind": "http"}, H + "kind must be 'command'."),
        ({**CI, "command": "  "}, H + "command must be a non-empty string of at most 16384 bytes without NUL."),
        ({**CI, "command": "a\x00b"}, H + "command must be a non-empty"),
        ({**CI, "command": "x" * 16385}, H + "command must be a non-empty"),
        ({k: v for k, v in CI.items() if k != "timeoutMs"}, H + "timeoutMs must be an integer from 1 to 86400000."),
        ({**CI, "timeoutMs": 0}, H + "timeoutMs must be an integer from 1 to 86400000."),
        ({**CI, "timeoutMs": 1.5}, H + "timeoutMs must be an integer"),
        ({**CI, "timeoutMs": 86400001}, H + "timeoutMs must be an integer"),
        ({**CI, "output": "../ci.log"},
         H + "output must be a bounded relative path without traversal or control characters."),
        ({**CI, "output": "/tmp/ci.log"}, H + "output must be a bounded relative path"),
        ({**CI, "output": "logs/a\nb"}, H + "output must be a bounded relative path"),
        ({**CI, "role": "deploy"}, H + "role must be 'ci' or 'gate'."),
        ({**CI, "provider": "a\nb"}, H + "provider must be a non-empty single-line string of at most 64 bytes."),
        ([], H + "params must be an object."),
    ],
)
def test_invalid_params_fail_with_the_spec_message(params: Any, message: str) -> None:
    assert _message("ci", params).startswith(message)


def test_an_invalid_key_fails_before_the_params_are_read() -> None:
    assert _message("-ci", {}) == (
        "runs.host key must be 1-128 characters using letters, numbers, '.', '_' or '-', "
        "and start with a letter or number."
    )


def test_valid_params_become_a_step() -> None:
    params = {**CI, "command": " npm test ", "output": "reports/ci.log", "role": "gate", "provider": "local"}
    step = host_step("ci", params)
    assert step == HostStep("ci", "npm test", 120000, "reports/ci.log", "gate", "local")


async def _run(tmp_path: Path, command: str, timeout_ms: int = 30000, **params: Any) -> dict[str, Any]:
    step = host_step("ci", {"kind": "command", "command": command, "timeoutMs": timeout_ms, **params})
    return await execute(step, tmp_path, tmp_path / "state" / "ci.log")


async def test_a_passing_command_runs_in_the_workflow_cwd(tmp_path: Path) -> None:
    result = await _run(tmp_path, "pwd; echo oops >&2")
    assert result["ok"] is True and result["state"] == "passed" and result["exitCode"] == 0
    assert result["stdout"] == f"{tmp_path.resolve()}\n" and result["stderr"] == "oops\n"
    assert "error" not in result
    assert Path(result["outputPath"]) == tmp_path / "state" / "ci.log"
    assert sorted(Path(result["outputPath"]).read_text().splitlines()) == sorted([str(tmp_path.resolve()), "oops"])
    assert isinstance(result["durationMs"], int)


async def test_a_failing_command_reports_its_exit_code(tmp_path: Path) -> None:
    result = await _run(tmp_path, "echo broken; exit 3")
    assert (result["ok"], result["state"], result["exitCode"]) == (False, "failed", 3)
    assert result["error"] == "Command exited with code 3."
    assert result["stdout"] == "broken\n"


async def test_a_timed_out_command_and_everything_it_started_are_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    started = time.monotonic()
    result = await _run(tmp_path, f"sleep 60 & echo $! > {pid_file}; wait", timeout_ms=300)
    assert time.monotonic() - started < 20  # 60 s if the group were not killed; margins for a loaded machine
    assert (result["ok"], result["state"], result["exitCode"]) == (False, "timed-out", None)
    assert result["error"] == "Command timed out after 300ms."
    assert not _alive(int(pid_file.read_text()))


async def test_a_command_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    result = await _run(tmp_path, "trap '' TERM; while true; do sleep 0.05; done", timeout_ms=200)
    assert result["state"] == "timed-out"


async def test_background_jobs_left_behind_do_not_hold_the_step_open(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await _run(tmp_path, "sleep 60 & echo done")
    assert result["state"] == "passed" and result["stdout"] == "done\n"
    assert time.monotonic() - started < 20


async def test_a_cancelled_step_kills_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    with anyio.move_on_after(1.0):
        await _run(tmp_path, f"sleep 60 & echo $! > {pid_file}; wait")
    assert not _alive(int(pid_file.read_text()))


async def test_previews_keep_4_kib_and_the_log_keeps_1_mib(tmp_path: Path) -> None:
    # 2 MiB on stdout: the preview is cut to 4 KiB with "...", the log to exactly 1 MiB.
    result = await _run(tmp_path, "head -c 2097152 /dev/zero | tr '\\0' a")
    assert len(result["stdout"].encode()) == 4096 and result["stdout"].endswith("...")
    assert Path(result["outputPath"]).stat().st_size == 1024 * 1024


async def test_a_preview_is_cut_at_a_character_boundary(tmp_path: Path) -> None:
    result = await _run(tmp_path, "i=0; while [ $i -lt 2100 ]; do printf 'é'; i=$((i+1)); done")
    preview = result["stdout"]
    assert preview.endswith("...") and "\ufffd" not in preview and len(preview.encode()) <= 4096


async def test_output_is_written_relative_to_the_workflow_cwd(tmp_path: Path) -> None:
    result = await _run(tmp_path, "echo report", output="reports/ci.log")
    assert result["outputPath"] == str(tmp_path.resolve() / "reports" / "ci.log")
    assert (tmp_path / "reports" / "ci.log").read_text() == "report\n"


async def test_output_through_a_symbolic_link_out_of_the_cwd_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "logs").symlink_to(outside)
    step = host_step("ci", {**CI, "output": "logs/ci.log"})
    with pytest.raises(WorkflowError, match=r"runs.host\('ci'\) output resolves outside the workflow cwd."):
        await execute(step, cwd, tmp_path / "default.log")
    assert not (outside / "ci.log").exists()


# -- runs.host in a script --------------------------------------------------------------------

PRAGMA = "// piflow: pi-subagents\n"


async def _script_run(engine: Engine, launch: LaunchFn, script: str, **fields: Any) -> RunRecord:
    run_id = await launch(PRAGMA + script, backend="scripted", **fields)
    return await finished(engine, run_id, timeout=60)


async def test_a_script_gets_the_host_steps_result(engine: Engine, launch: LaunchFn, project: Path) -> None:
    record = await _script_run(engine, launch, """
const ci = await runs.host("ci", {kind: "command", command: "pwd && echo ok", timeoutMs: 60000, role: "ci"});
return {ok: ci.ok, state: ci.state, exitCode: ci.exitCode, stdout: ci.stdout, key: ci.key, log: ci.outputPath};
""")
    assert record.state == "completed", record.error
    result = record.result
    assert result["stdout"] == f"{project.resolve()}\nok\n"
    assert {k: result[k] for k in ("ok", "state", "exitCode", "key")} == {"ok": True, "state": "passed",
                                                                         "exitCode": 0, "key": "ci"}
    assert Path(result["log"]).read_text() == f"{project.resolve()}\nok\n"


async def test_a_failing_host_step_rejects_where_the_script_can_catch_it(engine: Engine, launch: LaunchFn) -> None:
    record = await _script_run(engine, launch, """
try { await runs.host("ci", {kind: "command", command: "exit 3", timeoutMs: 60000}); }
catch (error) { return error.message; }
""")
    assert record.result == "Host command 'ci' failed: Command exited with code 3."


async def test_invalid_dynamic_host_params_reject_with_the_spec_message(engine: Engine, launch: LaunchFn) -> None:
    record = await _script_run(engine, launch, """
const params = JSON.parse('{"kind": "command", "command": "npm test", "timeoutMs": 1000, "cwd": "/repo/wt"}');
try { await runs.host("ci", params); }
catch (error) { return error.message; }
""")
    assert record.result.startswith("runs.host('ci') params have unsupported fields: cwd.")


async def test_host_keys_share_the_childrens_namespace(engine: Engine, launch: LaunchFn) -> None:
    record = await _script_run(engine, launch, """
await runs.run("ci", {agent: "worker", task: "prepare"});
try { await runs.host("ci", {kind: "command", command: "true", timeoutMs: 60000}); }
catch (error) { return error.message; }
""")
    assert record.result == "Workflow key 'ci' is already in use."


async def test_a_script_runs_at_most_32_host_steps(engine: Engine, launch: LaunchFn) -> None:
    record = await _script_run(engine, launch, """
for (let i = 0; i < 32; i += 1) await runs.host("step-" + i, {kind: "command", command: "true", timeoutMs: 60000});
try { await runs.host("step-32", {kind: "command", command: "true", timeoutMs: 60000}); }
catch (error) { return error.message; }
""")
    assert record.result == "workflowScript supports at most 32 runs.host calls."


async def test_an_unawaited_host_step_fails_the_run(engine: Engine, launch: LaunchFn) -> None:
    record = await _script_run(engine, launch, """runs.host("ci", {kind: "command", command: "true", timeoutMs: 60000});
return 1;""")
    assert record.state == "failed"
    assert record.error is not None
    assert "unawaited runs.host call(s): 'ci'" in record.error["message"]


# -- durability: a completed host step never runs again ----------------------------------------

DURABLE = PRAGMA + """
await runs.host("first", {kind: "command", command: "echo first >> ran.txt", timeoutMs: 60000});
const mid = await runs.run("mid", {agent: "worker", task: "between the steps"});
await runs.host("second", {kind: "command", command: "echo second >> ran.txt", timeoutMs: 60000});
const last = await runs.run("last", {agent: "worker", task: "after the steps"});
return [mid.ok, last.ok];
"""


def _owner(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "piflow", *args], cwd=project, env={**os.environ},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(project: Path) -> list[str]:
    path = project / "ran.txt"
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("kill_after", [["first"], ["first", "second"]])
def test_kill_and_resume_runs_no_completed_host_step_twice(kill_after: list[str], project: Path) -> None:
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    (project / "durable.workflow.js").write_text(DURABLE)
    # The child after the kill point answers only on resume, so the kill lands while the run still works.
    held = {"first": "mid", "second": "last"}[kill_after[-1]]
    (project / "fixtures.json").write_text(json.dumps({"responses": [{"match": {"key": held}, "latencyMs": HOLD_MS}]}))
    with RunStore.open(store_path(str(project))) as store:
        first = _owner(project, "run", "durable.workflow.js", "--fixtures", "fixtures.json", "--json")
        deadline = time.monotonic() + 60
        while _lines(project) != kill_after or not _journaled(store, kill_after[-1]):
            if first.poll() is not None or time.monotonic() > deadline:
                first.kill()
                pytest.fail(f"the run never reached its kill point: {first.communicate()[1]}")
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait()
        run_id = store.list_runs()[0].id
        (project / "fixtures.json").write_text(json.dumps({"responses": []}))  # read by the resume
        resumed = _owner(project, "resume", run_id[:8], "--json")
        _out, err = resumed.communicate(timeout=90)
        assert resumed.returncode == 0, err
        record = store.get_run(run_id)
        assert record is not None and record.state == "completed", record and record.error
        assert record.result == [True, True]
    assert _lines(project) == ["first", "second"], "a completed host step ran again"


def _journaled(store: RunStore, key: str) -> bool:
    runs = store.list_runs()
    return bool(runs) and store.operation(runs[0].id, host_path(key)) is not None
