"""Worker throughput: a `parallel` fan-out of N agents answered at once by an in-process host.

Measures the worker alone (spawn, instrumentation, QuickJS, the JSON-lines pipe and batched
settling), without scheduler, journal or store. Prints, per N, the time to the first call and the
end-to-end agents/s for a script whose tasks are built in a loop and for one that spells every task
out (a long script to instrument). Run: `.venv/bin/python bench/worker.py [N ...]` (default 1000
10000 50000).
"""

from __future__ import annotations

import sys
import time

import anyio

from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.protocol import AgentCall

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

    def answer(call: AgentCall) -> str:
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


async def main(sizes: list[int]) -> None:
    print(f"{'agents':>8} {'script':>8} {'first call':>11} {'total':>8} {'agents/s':>10}")
    for n in sizes:
        for name, body in (("loop", LOOP_SCRIPT), ("literal", literal_script(n))):
            first, total = await measure(body, n)
            print(f"{n:>8} {name:>8} {first:>10.2f}s {total:>7.2f}s {n / total:>10.0f}")


if __name__ == "__main__":
    anyio.run(main, [int(arg) for arg in sys.argv[1:]] or [1000, 10000, 50000])
