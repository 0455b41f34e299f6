"""What `piflow run`, `resume` and `budget` do in their run's owner process once its worker is
starting (`cli_owner` checks the arguments and spawns the worker first): launch, resume or answer
through the engine, own the run to its end (signals end it cleanly), and report how it ended.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Final, TextIO

import anyio

from piflow.cli_errors import UsageError
from piflow.cli_follow import finish_view, follow
from piflow.cli_owner import json_arg
from piflow.cli_runs import existing_store, resolve_run, store_failure_text, write_on
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.environment import load_environment, project_root, store_path
from piflow.engine.lifecycle import RunState
from piflow.engine.store import RunStore, StoreError
from piflow.engine.views import run_view
from piflow.errors import WorkflowError
from piflow.view_wire import outcome_json


def open_store(cwd: str) -> RunStore:
    return RunStore.open(store_path(cwd))


def _finish(engine: Engine, run_id: str, *, as_json: bool, out: TextIO) -> int:
    # The JSON end shows no agents: counted, not read (a 10,000-agent run's would take ~0.2 s).
    return finish_view(run_view(engine.store, run_id, with_agents=not as_json), as_json=as_json, out=out)


def _owner_started(reply: dict[str, Any]) -> None:
    """Tell the detaching parent the id (and state), then stop writing to its pipe."""
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


async def _drive(engine: Engine, run_id: str, args: argparse.Namespace) -> int:
    """Own a started run to its end: quietly for `--detach`, else with progress and answers."""
    args.owned = run_id
    try:
        if args.owner_process:
            _owner_started({"runId": run_id, "state": RunState.RUNNING})
            await engine.wait(run_id)
            return 0
        write_on(sys.stdout, run_id + "\n")
        await follow(engine, run_id, out=sys.stdout, quiet=args.json, answers=args.answers)
    except StoreError as exc:  # a full disk: the run stopped at its last committed step
        print(store_failure_text(exc, run_id), file=sys.stderr)
        return 1
    return _finish(engine, run_id, as_json=args.json, out=sys.stdout)


_INTERRUPTIONS: Final = (signal.SIGINT, signal.SIGTERM)


async def owning(action: Any, args: argparse.Namespace) -> int:
    """Run `action` (launch or resume, then drive) as the owner of its run: SIGINT or SIGTERM end it
    cleanly, like a closed session: the run is recorded `interrupted`, its worker and agents are
    killed, its lease is released, and the exit code is 128 + the signal."""
    args.owned = None
    received: list[int] = []
    results: list[int] = []
    refused: list[WorkflowError | UsageError] = []
    with anyio.open_signal_receiver(*_INTERRUPTIONS) as signals:  # open until the engine has shut down
        async with anyio.create_task_group() as tasks:
            async def watch() -> None:
                async for signum in signals:
                    received.append(signum)
                    tasks.cancel_scope.cancel()
                    return

            tasks.start_soon(watch)
            try:
                results.append(await action(args))
            except (WorkflowError, UsageError) as exc:  # raised as itself, not in an exception group
                refused.append(exc)
            tasks.cancel_scope.cancel()
    if refused:
        raise refused[0]
    if not received:
        return results[0]
    name = signal.Signals(received[0]).name
    if args.owned is None:
        print(f"\npiflow: interrupted ({name}) before the run started", file=sys.stderr)
    else:
        print(f"\npiflow: interrupted ({name}): run {args.owned[:8]} is interrupted, nothing it completed is lost; "
              f"continue it with `piflow resume {args.owned[:8]}`", file=sys.stderr)
    return 128 + received[0]


async def _run(args: argparse.Namespace) -> int:
    request = launch_request(args)
    with open_store(request.cwd) as store:
        async with Engine(store, early_worker=args.early_worker) as engine:
            run_id = await engine.launch(request)
            return await _drive(engine, run_id, args)


def launch_request(args: argparse.Namespace) -> LaunchRequest:
    if (args.script is None) == (args.workflow is None):
        raise WorkflowError("INVALID_METADATA", "Provide either a script or --workflow NAME, not both")
    script_path = Path(args.script).resolve() if args.script else None
    script = args.script_text or ""  # read (or taken from stdin) and checked by `cli_owner.start`
    cwd = project_root(str(script_path.parent) if script_path else os.getcwd())
    if args.backend is None and not load_environment(cwd).backend_configured and not args.json:
        print("piflow: no backend configured, agents answer from the scripted backend "
              "(set [piflow] backend in piflow.toml or pass --backend)", file=sys.stderr)
    return LaunchRequest(
        script=script,
        cwd=cwd,
        script_path=str(script_path) if script_path else None,
        workflow=args.workflow,
        name=args.name,
        args=json_arg(args.args, "args"),
        budget=json_arg(args.budget, "budget"),
        concurrency=args.concurrency,
        backend=args.backend,
        fixtures=str(Path(args.fixtures).resolve()) if args.fixtures else None,
    )


async def _resume(args: argparse.Namespace) -> int:
    cwd = project_root(os.getcwd())
    with existing_store(cwd) as store:
        run_id = resolve_run(store, args.run, cwd)
        async with Engine(store, early_worker=args.early_worker) as engine:
            reply = await engine.resume(run_id, json_arg(args.budget, "budget"))
            run_id = reply.run_id or run_id
            if args.owner_process and (reply.proposal_id is not None or run_id not in engine.active):
                _owner_started(outcome_json(reply))  # answered without this process owning the run
                return 0
            if reply.proposal_id is not None:
                print(reply.message)
                return 0
            if run_id not in engine.active:
                print(f"{run_id}: {reply.state} (owned by another piflow process)")
                return 0
            return await _drive(engine, run_id, args)


async def _budget(args: argparse.Namespace) -> int:
    cwd = project_root(os.getcwd())
    with existing_store(cwd) as store:
        run_id = resolve_run(store, args.run, cwd)
        async with Engine(store) as engine:
            reply = engine.respond(run_id, proposal_id=args.proposal, approved=args.decision == "approve")
            if args.owner_process and reply.state != RunState.RUNNING:
                _owner_started(outcome_json(replace(reply, run_id=run_id)))
                return 0
            if not args.owner_process:
                print(json.dumps(outcome_json(reply)))
            if reply.state != RunState.RUNNING:
                return 0 if reply.reason == "rejected" else 1
            with anyio.fail_after(10):
                while run_id not in engine.active:
                    await anyio.sleep(0.01)
            if args.owner_process:
                _owner_started(outcome_json(replace(reply, run_id=run_id)))
                await engine.wait(run_id)
                return 0
            await follow(engine, run_id, out=sys.stdout, quiet=False)
            return _finish(engine, run_id, as_json=False, out=sys.stdout)


OWNER_ACTIONS: Final = {"run": _run, "resume": _resume, "budget": _budget}
"""What `piflow run`, `resume` and `budget` do in the run's owner process (`cli_owner.start`)."""
