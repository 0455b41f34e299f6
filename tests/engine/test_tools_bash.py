"""The `bash` tool: runs in the workspace, reports failures with their output, and a timeout kills
the whole process group."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio

from piflow.engine.tools import ToolResult, ToolRuntime


async def bash(root: Path, command: str, timeout_ms: int | None = None, **extra: object) -> ToolResult:
    runtime = ToolRuntime.for_names(("bash",), str(root), timeout_ms)
    return await runtime.call("bash", json.dumps({"command": command, **extra}))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_command_runs_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("")

    result = await bash(tmp_path, "pwd; ls; echo oops >&2")

    assert result == ToolResult(f"{tmp_path.resolve()}\nmarker\noops", False)


async def test_a_failing_command_is_an_error_with_its_output_and_exit_code(tmp_path: Path) -> None:
    result = await bash(tmp_path, "echo partial; exit 3")

    assert result == ToolResult("partial\n\nCommand exited with code 3", True)


async def test_the_tool_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    command = "sleep 60 & echo $! > child.pid; sleep 60"
    started = time.monotonic()

    with anyio.fail_after(30):
        result = await bash(tmp_path, command, timeout_ms=1000)

    assert time.monotonic() - started < 20
    assert result == ToolResult("Tool 'bash' exceeded its timeout of 1000ms.", True)
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the command's background child outlived the timeout"


async def test_the_models_own_timeout_in_seconds_applies_when_shorter(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        result = await bash(tmp_path, "echo started; sleep 60", timeout_ms=600_000, timeout=1)

    assert result == ToolResult("started\n\nCommand timed out after 1 seconds", True)


async def test_cancelling_the_attempt_kills_the_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(bash, tmp_path, "sleep 60 & echo $! > child.pid.new; mv child.pid.new child.pid; sleep 60")
            while not pid_file.exists():  # cancelled once the command runs (a fixed 1.5 s could come first)
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()

    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


async def test_long_output_keeps_its_end_with_a_notice(tmp_path: Path) -> None:
    result = await bash(tmp_path, "seq 1 5000")

    lines = result.text.split("\n")
    assert lines[0] == "3001"
    assert lines[1999] == "5000"
    assert lines[-1] == "[Showing lines 3001-5000 of 5000.]"
