"""The worker process from the host's side: heartbeats, cancellation, exits, the 10 MiB boundary, throughput."""

from __future__ import annotations

import math
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_worker_host import Host, failure, run

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.environment import LaunchEnvironment, load_environment
from piflow.engine.store import RunStore
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


# -- spawned early -------------------------------------------------------------------------------------


def worker_children() -> set[int]:
    """The pids of this process's worker children that still exist (zombies included)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if parent == str(os.getpid()) and b"piflow.engine.worker" in command:
            found.add(int(entry.name))
    return found


async def test_a_worker_spawned_early_runs_the_script_it_is_handed_later(tmp_path: Path) -> None:
    program = "import sys\nsys.stdin.readline()\nprint('Traceback: boom', file=sys.stderr)\nsys.exit(3)\n"
    early = tmp_path / "runs" / ".starting.log"
    worker = WorkerProcess(python=fake_python(tmp_path, program), log=early)
    await worker.spawn()
    final = tmp_path / "runs" / "run-1" / "worker.log"
    worker.move_log(final)
    await worker.start(body="return 1")
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(Host())
    assert caught.value.message == f"Workflow child exited with code 3: Traceback: boom (worker log: {final})"
    assert not early.exists()


async def test_the_worker_starts_before_the_launch_is_prepared(store: RunStore, project: Path) -> None:
    workers_while_preparing: list[int] = []

    def environment(cwd: str) -> LaunchEnvironment:
        workers_while_preparing.append(len(worker_children()))
        return load_environment(cwd)

    async with Engine(store, environment=environment) as engine:
        run_id = await engine.launch(LaunchRequest(script='return await agent("hi")', cwd=str(project)))
        record = await engine.wait(run_id)
    assert (record.state, record.result) == ("completed", "[scripted] hi")
    assert workers_while_preparing[0] == 1
    runs = store.location.parent / "runs"
    assert (runs / run_id / "worker.log").is_file()
    assert not list(runs.glob(".starting-*"))


async def test_a_failed_launch_leaves_no_worker_behind(engine: Engine, project: Path) -> None:
    before = worker_children()
    with pytest.raises(WorkflowError) as caught:
        await engine.launch(LaunchRequest(script="const x = ;\nreturn x;\n", cwd=str(project)))
    assert caught.value.code == "INVALID_SYNTAX"
    assert worker_children() - before == set()
    assert not list((engine.store.location.parent / "runs").glob(".starting-*"))


async def test_a_refused_cold_resume_leaves_no_worker_behind(store: RunStore, project: Path) -> None:
    script = 'await checkpoint({name: "ship", prompt: "Ship?", context: null});\nreturn 1;\n'
    async with Engine(store) as engine:
        run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project)))
        with anyio.fail_after(60):
            while not store.awaiting_checkpoints(run_id):
                await anyio.sleep(0.01)
    # The engine shut down with the run awaiting its answer: it is interrupted, resumable.
    store.replace_snapshot(run_id, {**store.snapshot(run_id), "identityVersion": 2})
    async with Engine(store) as engine:
        before = worker_children()
        with pytest.raises(WorkflowError) as caught:
            await engine.resume(run_id)
        assert worker_children() - before == set()
    assert (caught.value.code, caught.value.message) == (
        "RESUME_INCOMPATIBLE", "Workflow launch snapshot identity version is incompatible"
    )
