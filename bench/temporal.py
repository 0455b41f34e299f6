"""Temporal executor scale-out: a `parallel` fan-out of N agents with simulated latency on 1, 2, 4 workers.

Each `piflow worker` runs at most `--max-agents` attempts at once (a stand-in for a machine's
capacity), so wall time shows how the run spreads over workers; the run's concurrency is 16 (the
spec's ceiling). Prints wall time, agents/s, and the overhead per agent against the ideal
(N × latency / agents running at once), next to the embedded engine on the same work. Run:
`.venv/bin/python bench/temporal.py [--agents 1000] [--latency 1.0] [--workers 1,2,4] [--max-agents 4]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.lifecycle import ENDED
from piflow.engine.store import RunStore
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from temporal_cluster import DevServer, Workers

CONCURRENCY = 16


def fan_out(n: int) -> str:
    tasks = ",\n".join(f"  t{i}: () => agent('task {i}')" for i in range(n))
    return f'const r = await parallel("fan", {{\n{tasks}\n}});\nreturn Object.keys(r).length;\n'


def request(project: Path, n: int) -> LaunchRequest:
    return LaunchRequest(script=fan_out(n), cwd=str(project), concurrency=CONCURRENCY, backend="scripted",
                         fixtures=str(project / "fixtures.json"))


async def on_temporal(settings: TemporalSettings, project: Path, n: int) -> float:
    async with TemporalRuns(settings, str(project)) as runs:
        started = time.perf_counter()
        run_id = await runs.launch(request(project, n))
        while (snapshot := await runs.snapshot(run_id)).state not in ENDED:
            await anyio.sleep(0.5)
        assert snapshot.result == n, snapshot.error
        return time.perf_counter() - started


async def embedded(root: Path, project: Path, n: int) -> float:
    with RunStore.open(root / "embedded.db") as store:
        async with Engine(store) as engine:
            started = time.perf_counter()
            run_id = await engine.launch(request(project, n))
            record = await engine.wait(run_id)
            assert record.result == n, record.error
            return time.perf_counter() - started


def report(label: str, n: int, wall: float, latency: float, at_once: int) -> None:
    ideal = n * latency / at_once
    print(f"{label:<24} {wall:8.1f} s  {n / wall:7.1f} agents/s  ideal {ideal:6.1f} s  "
          f"overhead {1000 * (wall - ideal) / n:6.1f} ms/agent", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds each agent takes")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--max-agents", type=int, default=4, help="attempts one worker runs at once")
    args = parser.parse_args()
    n = args.agents
    with tempfile.TemporaryDirectory(prefix="piflow-bench-temporal-") as scratch:
        root = Path(scratch)
        project = root / "project"
        project.mkdir()
        (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": args.latency * 1000}}))
        print(f"{n} agents, {args.latency:g} s each, run concurrency {CONCURRENCY}, "
              f"{args.max_agents} attempts per worker")
        report("embedded", n, anyio.run(embedded, root, project, n), args.latency, CONCURRENCY)
        server = DevServer(root)
        server.start()
        try:
            for count in (int(c) for c in args.workers.split(",")):
                pool = Workers(server, root, f"bench-{count}")
                try:
                    pool.start(count, max_agents=args.max_agents)
                    settings = TemporalSettings(address=server.address, task_queue=pool.task_queue)
                    wall = anyio.run(on_temporal, settings, project, n)
                    report(f"temporal, {count} worker{'s' if count > 1 else ''}", n, wall, args.latency,
                           min(CONCURRENCY, count * args.max_agents))
                finally:
                    pool.stop_all()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
