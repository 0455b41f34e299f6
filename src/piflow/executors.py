"""The executor seam: where a project's runs execute, and the run commands for the Temporal one.

`embedded` (the default) is the engine in owner processes on this machine (`cli_owning`); `temporal`
sends runs to a Temporal cluster (`engine/temporal`). `executor_for` is the one answer to "which
executor", from `--executor`, else `[piflow] executor` in piflow.toml; the run commands call it first
and hand a Temporal project to `TemporalExecutor`, whose methods mirror theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Protocol

from piflow.config.project import load_project_config
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.engine import LaunchRequest
    from piflow.engine.temporal.client import TemporalRuns

EXECUTORS = ("embedded", "temporal")
_FOLLOW_SECONDS = 0.5


class Executor(Protocol):
    """What `piflow run/runs/show/approve/reject/pause/stop/resume/budget` need of an executor."""

    def run(self, request: LaunchRequest, args: argparse.Namespace) -> int: ...
    def runs(self, args: argparse.Namespace) -> int: ...
    def show(self, args: argparse.Namespace) -> int: ...
    def control(self, args: argparse.Namespace, action: str) -> int: ...
    def budget(self, args: argparse.Namespace) -> int: ...


def executor_for(cwd: str, args: argparse.Namespace) -> Executor | None:
    """The project's executor when it is not the embedded one (which the callers are themselves)."""
    name = getattr(args, "executor", None) or load_project_config(cwd).executor
    if name == "embedded":
        return None
    if name != "temporal":
        raise WorkflowError("CONFIG_ERROR", f"Unknown executor {name!r}: use embedded or temporal")
    return TemporalExecutor(cwd)


class TemporalExecutor:
    """The run commands against the project's Temporal cluster (`[temporal]` in piflow.toml)."""

    def __init__(self, cwd: str) -> None:
        from piflow.engine.temporal.settings import TemporalSettings

        self.cwd = cwd
        self.settings = TemporalSettings.for_project(cwd)

    def _runs(self) -> TemporalRuns:
        from piflow.engine.temporal.client import TemporalRuns

        return TemporalRuns(self.settings, self.cwd)

    def run(self, request: LaunchRequest, args: argparse.Namespace) -> int:
        import anyio  # (not at the top: `piflow run` starts its worker before it loads anyio)
        return _exit_now(int(anyio.run(self._run, request, args)))

    async def _run(self, request: LaunchRequest, args: argparse.Namespace) -> int:
        from piflow.cli_follow import finish_view
        from piflow.cli_runs import write_on

        async with self._runs() as runs:
            run_id = await runs.launch(request)
            write_on(sys.stdout, run_id + "\n")
            if getattr(args, "detach", False):
                return 0
            view = await self._follow(runs, run_id, quiet=args.json, answers=args.answers)
        return finish_view(view, as_json=args.json, out=sys.stdout)

    async def _follow(self, runs: TemporalRuns, run_id: str, *, quiet: bool, answers: dict[str, bool]) -> Any:
        """Print each agent's and checkpoint's changes until the run ends; answer `--answer`ed checkpoints."""
        import anyio

        from piflow.engine.lifecycle import ENDED

        shown: dict[str, str] = {}
        asked: set[str] = set()
        while True:
            view = await runs.view(run_id)
            for agent in view.agents:
                if shown.get(agent.journal_path or agent.id) != agent.state and not quiet:
                    print(f"  {agent.label}: {agent.state}", flush=True)
                shown[agent.journal_path or agent.id] = agent.state
            for checkpoint in view.checkpoints:
                if checkpoint.name in answers and checkpoint.name not in asked:
                    await runs.respond(run_id, checkpoint.name, answers[checkpoint.name])
                elif checkpoint.name not in asked and not quiet:
                    print(f"Checkpoint {checkpoint.name}: {checkpoint.prompt}\n  answer with: piflow approve "
                          f"{run_id[:8]} {checkpoint.name} (or piflow reject)", flush=True)
                asked.add(checkpoint.name)
            if view.state in ENDED:
                return view
            await anyio.sleep(_FOLLOW_SECONDS)

    def runs(self, args: argparse.Namespace) -> int:
        import anyio  # (not at the top: `piflow run` starts its worker before it loads anyio)
        return _exit_now(int(anyio.run(self._list, args)))

    async def _list(self, args: argparse.Namespace) -> int:
        from piflow.engine.views import attention_key
        from piflow.view_wire import summary_json

        async with self._runs() as runs:
            summaries = sorted(await runs.summaries(), key=lambda s: attention_key(s.state, s.updated_at))
        if args.json:
            print(json.dumps([summary_json(s) for s in summaries], indent=2))
            return 0
        if not summaries:
            print(f"No workflow runs of the project {self.cwd} on the Temporal cluster {self.settings.address}.")
        for s in summaries:
            print(f"{s.run_id[:8]}  {s.workflow_name:<20} {s.state:<16}")
        return 0

    def show(self, args: argparse.Namespace) -> int:
        import anyio  # (not at the top: `piflow run` starts its worker before it loads anyio)
        return _exit_now(int(anyio.run(self._show, args)))

    async def _show(self, args: argparse.Namespace) -> int:
        from piflow.cli_runs import format_run
        from piflow.view_wire import run_json

        async with self._runs() as runs:
            view = await runs.view(await runs.resolve(args.run), details=True)
        print(json.dumps(run_json(view), indent=2, ensure_ascii=False) if args.json else format_run(view))
        return 0

    def control(self, args: argparse.Namespace, action: str) -> int:
        import anyio  # (not at the top: `piflow run` starts its worker before it loads anyio)
        return _exit_now(int(anyio.run(self._control, args, action)))

    async def _control(self, args: argparse.Namespace, action: str) -> int:
        from piflow.view_wire import outcome_json

        async with self._runs() as runs:
            run_id = await runs.resolve(args.run)
            if action in ("approve", "reject"):
                accepted = await runs.respond(run_id, args.name, action == "approve")
                print("Checkpoint response accepted." if accepted else "Checkpoint is not awaiting a response.")
                return 0 if accepted else 1
            if action == "resume":  # a paused run, or an exhausted one with --budget (spec H)
                patch = json.loads(args.budget) if getattr(args, "budget", None) is not None else None
                reply = await runs.resume(run_id, patch)
                print(reply.message if reply.proposal_id is not None else f"{run_id}: {reply.state}")
                return 0
            if action == "pause":
                print(await runs.pause(run_id))
            else:
                print(json.dumps(outcome_json(await runs.stop(run_id))))
        return 0

    def budget(self, args: argparse.Namespace) -> int:
        """`piflow budget approve|reject RUN PROPOSAL`: an approved budget lets the run go on on the workers."""
        import anyio  # (not at the top: `piflow run` starts its worker before it loads anyio)
        return _exit_now(int(anyio.run(self._budget, args)))

    async def _budget(self, args: argparse.Namespace) -> int:
        from piflow.view_wire import outcome_json

        async with self._runs() as runs:
            reply = await runs.decide(await runs.resolve(args.run), args.proposal, args.decision == "approve")
        print(json.dumps(outcome_json(reply)))
        return 0 if reply.reason in ("approved", "rejected") else 1


def _exit_now(code: int) -> int:
    """End the command without interpreter teardown: the Temporal SDK's Rust threads can abort a
    finalizing interpreter (sdk-python issue 300, "PyGILState_Release … finalizing"), which would
    turn a finished command into a crash. Everything the command wrote is flushed first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def add_executor_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", choices=EXECUTORS,
                        help="where runs execute (default: [piflow] executor in piflow.toml, else embedded)")
