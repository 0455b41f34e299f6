"""Engine throughput: a `parallel` fan-out of N agents on the scripted backend at zero latency.

Prints, per N: launch validation time, end-to-end agents/s (worker, scheduler, journal and
store included), and for 10,000 agents (every N with `--resume`) the replay time of a cold resume
until the run has completed again, with the CPU time it took (this process and the worker), which
a loaded machine inflates far less than the wall time. Run:
`.venv/bin/python bench/engine.py [N ...] [--resume]` (default 1000 10000 50000).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import anyio

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore


def fan_out_script(n: int) -> str:
    tasks = ",\n".join(f"  t{i}: () => agent('task {i}')" for i in range(n))
    return (
        f'const results = await parallel("fan", {{\n{tasks}\n}});\n'
        'const go = await checkpoint({name: "done", prompt: "Finish?", context: null});\n'
        "return {count: Object.keys(results).length, go};\n"
    )


async def wait_awaiting(store: RunStore, run_id: str) -> None:
    while not store.awaiting_checkpoints(run_id):
        await anyio.sleep(0.005)


async def measure(n: int, root: Path, replay: bool) -> None:
    project = root / f"project-{n}"
    project.mkdir()
    store = RunStore.open(root / f"runs-{n}.db")
    script = fan_out_script(n)
    async with Engine(store) as engine:
        started = time.perf_counter()
        run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project), concurrency=16))
        launched = time.perf_counter()
        await wait_awaiting(store, run_id)
        done = time.perf_counter()
    agents = len(store.agents(run_id))
    assert agents == n, (agents, n)
    rate = n / (done - launched)
    print(f"{n:>6} agents: launch validation {launched - started:6.2f} s | execution {done - launched:6.2f} s "
          f"| {rate:8.0f} agents/s | end to end {n / (done - started):8.0f} agents/s", flush=True)
    if replay:
        async with Engine(store) as engine:
            # Answered while the run is interrupted: the replay must re-run the whole script, return
            # every journaled agent and the stored answer, and complete. The clock stops when the
            # run is observably completed (an interrupted run already shows its awaiting checkpoint).
            engine.respond(run_id, name="done", approved=True)
            began, cpu, workers = time.perf_counter(), time.process_time(), _children_cpu()
            await engine.resume(run_id)
            record = await engine.wait(run_id)
            elapsed = time.perf_counter() - began
            cpu, workers = time.process_time() - cpu, _children_cpu() - workers
            assert record.state == "completed", record.state
            print(f"{n:>6} agents: replay on cold resume to completion {elapsed:6.2f} s "
                  f"(cpu: engine {cpu:.2f} s, worker {workers:.2f} s; "
                  f"no agent re-ran: {len(store.agents(run_id)) == n})", flush=True)
    store.close()


def _children_cpu() -> float:
    """CPU seconds of the worker processes this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def main(sizes: list[int], resume_all: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["HOME"] = str(root / "home")
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        os.environ["XDG_CONFIG_HOME"] = str(root / "config")
        for n in sizes:
            await measure(n, root, replay=resume_all or n == 10_000)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sizes", type=int, nargs="*", default=[1_000, 10_000, 50_000])
    parser.add_argument("--resume", action="store_true", help="time a cold resume at every size")
    options = parser.parse_args()
    anyio.run(main, options.sizes, options.resume)
