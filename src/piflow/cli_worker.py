"""`piflow worker`: serve a Temporal task queue (the run workflow, its steps and agent attempts)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from piflow.engine.environment import project_root
from piflow.errors import WorkflowError


def _worker(args: argparse.Namespace) -> int:
    from piflow.engine.temporal.settings import TemporalSettings
    from piflow.engine.temporal.worker import serve

    root = project_root(os.getcwd())
    flag = os.path.abspath(os.path.expanduser(args.worktrees)) if args.worktrees else None
    settings = TemporalSettings.for_project(root, address=args.address, namespace=args.namespace,
                                            task_queue=args.task_queue, worktrees=flag)
    if settings.worktrees is not None:  # piflow.toml's path is relative to the project root
        clone = Path(root, os.path.expanduser(settings.worktrees)).resolve()
        if not clone.is_dir():
            raise WorkflowError("CONFIG_ERROR", f"[temporal] worktrees (or --worktrees) names {clone}, which is not "
                                "a directory: point it at this worker's clone of the repository")
        settings = replace(settings, worktrees=str(clone))

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
    worker.add_argument("--worktrees", help="this worker's clone of the repository (the project directory in it), "
                        "where withWorktree agents run and whose origin gets their branches (default: [temporal] "
                        "worktrees, else the run's directory)")
    worker.add_argument("--max-agents", type=int, default=16, help="agent attempts this worker runs at once")
    worker.set_defaults(handler=_worker)
