"""Worker throughput and start-up: a `parallel` fan-out of N agents answered at once by an in-process host.

Measures the worker alone (spawn, the instrumentation the host does for it, QuickJS, the JSON-lines
pipe and batched settling), without scheduler, journal or store. Prints first the worker's start: its ready time
(spawn to the first call of a one-agent script, the median of `--ready` runs) with the worker's CPU
time, and the CPU time of its start alone (Python, imports, prelude; the least of as many runs;
`python -X importtime -m piflow.engine.worker </dev/null` names the imports); then, per N, the
time to the first call and the end-to-end agents/s for a script whose tasks are built in a loop and
for one that spells every task out (a long script to instrument).
Run: `.venv/bin/python bench/worker.py [N ...] [--ready RUNS]` (default 1000 10000 50000, 9 runs).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

import anyio

from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.protocol import AgentCall, WorkerCall

LOOP_SCRIPT = """
const tasks = Object.fromEntries(Array.from({length: args.n}, (_, i) => ["t" + i, () => agent("task " + i)]));
const results = await parallel("fan", tasks);
return Object.keys(results).length;
"""


def literal_script(n: int) -> str:
    tasks = ",\n".join(f"  t{i}: () => agent('task {i}')" for i in range(n))
    return f'const results = await parallel("fan", {{\n{tasks}\n}});\nreturn Object.keys(results).length;\n'


async def measure(body: str, n: int) -> tuple[float, float]:
    """(seconds to the first call, seconds end to end) for one run."""
    first: list[float] = []

    def answer(call: WorkerCall) -> str:
        assert isinstance(call, AgentCall), call
        if not first:
            first.append(time.perf_counter())
        return f"done: {call.prompt}"

    started = time.perf_counter()
    worker = WorkerProcess()
    await worker.start(body=body, args={"n": n})
    count = await worker.serve(answer)
    finished = time.perf_counter()
    if count != n:
        raise RuntimeError(f"expected {n} results, got {count}")
    return first[0] - started, finished - started


def _children_cpu() -> float:
    """CPU seconds of the child processes this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def ready(runs: int) -> None:
    """The worker's start: spawn to the first call of a one-agent script, and the worker's CPU time."""
    samples: list[tuple[float, float]] = []
    for _ in range(runs):
        cpu = _children_cpu()
        first, _total = await measure('await agent("hello"); return 1;', 1)
        samples.append((first, _children_cpu() - cpu))
    start_up = []
    for _ in range(runs):
        cpu = _children_cpu()
        # A worker whose stdin is at its end: Python, its imports and the prelude, then it exits.
        subprocess.run([sys.executable, "-m", "piflow.engine.worker"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, check=True)
        start_up.append(_children_cpu() - cpu)
    print(f"worker ready (spawn to first call): {statistics.median(wall for wall, _ in samples):.3f} s, "
          f"worker cpu {statistics.median(cpu for _, cpu in samples):.3f} s; "
          f"its start alone (python, imports, prelude): cpu {min(start_up):.3f} s")


async def main(sizes: list[int], runs: int) -> None:
    await ready(runs)
    print(f"{'agents':>8} {'script':>8} {'first call':>11} {'total':>8} {'agents/s':>10}")
    for n in sizes:
        for name, body in (("loop", LOOP_SCRIPT), ("literal", literal_script(n))):
            first, total = await measure(body, n)
            print(f"{n:>8} {name:>8} {first:>10.2f}s {total:>7.2f}s {n / total:>10.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sizes", type=int, nargs="*", default=[1000, 10000, 50000])
    parser.add_argument("--ready", type=int, default=9, metavar="RUNS", help="runs of the start-up figures")
    options = parser.parse_args()
    anyio.run(main, options.sizes, options.ready)
