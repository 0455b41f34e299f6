"""`piflow worker`: serve a Temporal task queue (the run workflow, its steps and agent attempts)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio

from piflow.engine.environment import project_root


def _worker(args: argparse.Namespace) -> int:
    from piflow.engine.temporal.settings import TemporalSettings
    from piflow.engine.temporal.worker import serve

    settings = TemporalSettings.for_project(project_root(os.getcwd()), address=args.address,
                                            namespace=args.namespace, task_queue=args.task_queue)

    def ready() -> None:
        print(f"piflow worker: serving task queue {settings.task_queue} on {settings.address} "
              f"(namespace {settings.namespace}, {args.max_agents} agents at once)", flush=True)

    try:
        anyio.run(lambda: serve(settings, max_agents=args.max_agents, ready=ready))
    except KeyboardInterrupt:
        print("piflow worker: stopped", file=sys.stderr)
    return 0


def register(commands: Any) -> None:
    worker = commands.add_parser("worker", help="serve runs of a Temporal cluster (executor = \"temporal\")")
    worker.add_argument("--address", help="host:port of the cluster (default: [temporal] address, else localhost:7233)")
    worker.add_argument("--namespace", help="namespace (default: [temporal] namespace, else default)")
    worker.add_argument("--task-queue", help="task queue (default: [temporal] task_queue, else piflow)")
    worker.add_argument("--max-agents", type=int, default=16, help="agent attempts this worker runs at once")
    worker.set_defaults(handler=_worker)
