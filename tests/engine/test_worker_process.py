"""The worker process from the host's side: heartbeats, cancellation, exits, the 10 MiB boundary, throughput."""

from __future__ import annotations

import math
import stat
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_worker_host import Host, failure, run

from piflow.engine.worker.client import WorkerProcess, unresponsive_message
from piflow.engine.worker.protocol import HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, Settled
from piflow.errors import WorkflowError

MIB = 1024 * 1024


def fake_python(tmp_path: Path, program: str) -> str:
    """An interpreter stand-in that runs `program` (Python) instead of the worker module."""
    script = tmp_path / "fake_worker.py"
    script.write_text(program)
    launcher = tmp_path / "python"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    launcher.chmod(launcher.stat().st_mode | stat.S_IEXEC)
    return str(launcher)


async def outcome(worker: WorkerProcess) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        await worker.wait_done()
    return caught.value


# -- liveness ---------------------------------------------------------------------------------------


async def test_busy_loop_misses_the_heartbeat() -> None:
    worker = WorkerProcess(heartbeat_timeout=1.0)
    await worker.start(body="while (true) {}")
    started = time.monotonic()
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert (caught.value.code, caught.value.message) == (
        "WORKER_UNRESPONSIVE",
        "Workflow worker missed its one-second heartbeat",
    )
    assert time.monotonic() - started < 4


def test_the_unresponsive_message_names_the_timeout_in_force() -> None:
    assert unresponsive_message(HEARTBEAT_TIMEOUT) == "Workflow worker missed its five-second heartbeat"
    assert unresponsive_message(2.5) == "Workflow worker missed its 2.5-second heartbeat"
    assert unresponsive_message(30) == "Workflow worker missed its 30-second heartbeat"


async def test_idle_worker_waiting_for_the_host_keeps_beating() -> None:
    # Beats come every HEARTBEAT_INTERVAL (1 s); the timeout is three of them, so a loaded machine
    # may delay a beat by two seconds, and the host waits well past the timeout: without beats
    # the worker would be declared unresponsive.
    timeout = 3 * HEARTBEAT_INTERVAL
    worker = WorkerProcess(heartbeat_timeout=timeout)
    await worker.start(body="return await agent('slow')")
    async for call in worker.calls():
        await anyio.sleep(timeout + 1.5)
        await worker.settle([Settled(call.id, "late")])
    assert await worker.wait_done() == "late"
    await worker.kill()


async def test_kill_cancels_a_busy_loop_at_once() -> None:
    worker = WorkerProcess()
    await worker.start(body="while (true) {}")

    async def serve() -> None:
        with pytest.raises(WorkflowError):
            await worker.serve(Host())

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(serve)
        await anyio.sleep(0.5)
        started = time.monotonic()
        await worker.kill()
        error = await outcome(worker)
        assert time.monotonic() - started < 1
    assert (error.code, error.message) == ("CANCELLED", "Workflow cancelled")


async def test_cancelling_the_serving_task_kills_the_worker() -> None:
    worker = WorkerProcess()
    await worker.start(body="while (true) {}")
    with anyio.move_on_after(0.5):
        await worker.serve(Host())
    error = await outcome(worker)
    assert error.code == "CANCELLED"


async def test_kill_after_done_keeps_the_result() -> None:
    worker = WorkerProcess()
    await worker.start(body="return 7")
    assert await worker.serve(Host()) == 7
    await worker.kill()
    assert await worker.wait_done() == 7


# -- abnormal workers ---------------------------------------------------------------------------------


async def test_abnormal_exit(tmp_path: Path) -> None:
    worker = WorkerProcess(python=fake_python(tmp_path, "import sys\nsys.stdin.readline()\nsys.exit(3)\n"))
    await worker.start(body="return 1")
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert (caught.value.code, caught.value.message) == ("INTERNAL_ERROR", "Workflow child exited with code 3")


async def test_exit_without_done_is_abnormal_even_with_code_zero(tmp_path: Path) -> None:
    worker = WorkerProcess(python=fake_python(tmp_path, 'print(\'{"t":"hb"}\', flush=True)\n'))
    await worker.start(body="return 1")
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert caught.value.message == "Workflow child exited with code 0"


async def test_oversized_worker_message(tmp_path: Path) -> None:
    program = (
        "import sys\n"
        'sys.stdout.write(\'{"t":"hb","x":"\' + \'x\' * (10 * 1024 * 1024) + \'"}\\n\')\n'
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    worker = WorkerProcess(python=fake_python(tmp_path, program))
    await worker.start(body="return 1")
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert (caught.value.code, caught.value.message) == (
        "RPC_LIMIT_EXCEEDED",
        "RPC value exceeds the 10 MB JSON boundary",
    )


async def test_malformed_worker_message(tmp_path: Path) -> None:
    worker = WorkerProcess(
        python=fake_python(tmp_path, "print('not json', flush=True)\nimport sys\nsys.stdin.read()\n")
    )
    await worker.start(body="return 1")
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert (caught.value.code, caught.value.message) == ("INTERNAL_ERROR", "Malformed workflow worker message")


# -- memory ------------------------------------------------------------------------------------------

RUNAWAY = "const hoard = []; while (true) hoard.push('x'.repeat(1e6) + hoard.length);"


async def test_heap_limit_stops_a_runaway_allocation() -> None:
    worker = WorkerProcess(heap_limit=64 * MIB)
    await worker.start(body=RUNAWAY)
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert (caught.value.code, caught.value.message) == ("INTERNAL_ERROR", "out of memory")


async def test_address_space_limit_stops_a_runaway_allocation() -> None:
    worker = WorkerProcess(heap_limit=4096 * MIB, memory_limit=400 * MIB)
    await worker.start(body=RUNAWAY)
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert (caught.value.code, caught.value.message) == ("INTERNAL_ERROR", "out of memory")


async def test_script_can_catch_running_out_of_heap() -> None:
    worker = WorkerProcess(heap_limit=64 * MIB)
    await worker.start(body=f"try {{ {RUNAWAY} }} catch (e) {{ return e.message; }}")
    assert await worker.serve(Host()) == "out of memory"


# -- the 10 MiB boundary ---------------------------------------------------------------------------------


async def test_oversized_call_throws_in_the_script() -> None:
    body = "try { agent('x'.repeat(10 * 1024 * 1024)); } catch (e) { return [e.code, e.message]; }"
    assert await run(body) == ["RPC_LIMIT_EXCEEDED", "RPC value exceeds the 10 MB JSON boundary"]


async def test_oversized_answer_fails_that_call() -> None:
    host = Host(agent=lambda call: "x" * (10 * MIB))
    body = "try { await agent('big'); } catch (e) { return [e.code, e.message]; }"
    assert await run(body, host) == ["RPC_LIMIT_EXCEEDED", "RPC value exceeds the 10 MB JSON boundary"]


@pytest.mark.parametrize("value", [math.nan, {1, 2}, object()])
async def test_non_json_answer_fails_that_call(value: Any) -> None:
    host = Host(agent=lambda call: value)
    body = "try { await agent('odd'); } catch (e) { return [e.code, e.message]; }"
    assert await run(body, host) == ["RPC_LIMIT_EXCEEDED", "RPC values must be JSON-compatible"]


async def test_answers_beyond_10_mib_in_total_are_split_across_messages() -> None:
    host = Host(agent=lambda call: "y" * (4 * MIB))
    body = "const all = await Promise.all([agent('1'), agent('2'), agent('3')]); return all.map((v) => v.length)"
    assert await run(body, host) == [4 * MIB] * 3


async def test_oversized_args_are_refused_before_starting() -> None:
    worker = WorkerProcess()
    with pytest.raises(WorkflowError) as caught:
        await worker.start(body="return 1", args="z" * (10 * MIB))
    assert (caught.value.code, caught.value.message) == (
        "RPC_LIMIT_EXCEEDED",
        "RPC value exceeds the 10 MB JSON boundary",
    )


async def test_non_json_args_are_refused() -> None:
    worker = WorkerProcess()
    with pytest.raises(WorkflowError) as caught:
        await worker.start(body="return 1", args={"when": object()})
    assert caught.value.message == "RPC values must be JSON-compatible"


# -- throughput --------------------------------------------------------------------------------------------


async def test_ten_thousand_agent_fan_out_flows_through() -> None:
    body = """
    const tasks = Object.fromEntries(Array.from({length: 10000}, (_, i) => ['t' + i, () => agent('p' + i)]));
    return Object.keys(await parallel('batch', tasks)).length;
    """
    host = Host()
    started = time.monotonic()
    assert await run(body, host) == 10000
    elapsed = time.monotonic() - started
    assert len(host.calls) == 10000
    assert 10000 / elapsed > 1000, f"{10000 / elapsed:.0f} agents/s"


async def test_failure_reported_alongside_new_calls_starts_no_work() -> None:
    error = await failure("phase('late'); throw new Error('stop')")
    assert error.message == "stop"
