"""`piflow run`, `resume` and `budget`: the arguments' checks, then the run's owner (this process,
or a detached one it starts).

An owner starts its run's worker before it has an event loop or imports the engine
(`engine/owner.py`), so the worker's interpreter, imports and compile overlap the owner's own
start-up. This module therefore imports only what comes before the spawn: the checks, the
executor's choice and the store's location. anyio, the engine and what the owner does
(`cli_owning`) are imported once the worker is starting.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

from piflow.cli_errors import UsageError
from piflow.engine.environment import project_root, store_path
from piflow.engine.owner import EarlyWorker, lower_own_priority, start_owner
from piflow.errors import WorkflowError
from piflow.executors import add_executor_option, executor_for


def json_arg(text: str | None, what: str) -> Any:
    """A JSON option's value; one that could not cross into a script (too deep, lone surrogates) is
    refused here, before any run exists."""
    if text is None:
        return None
    from piflow.engine.worker.boundary import TOO_DEEP, value_problem

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        raise WorkflowError("INVALID_METADATA", f"--{what} is not valid JSON: {exc.msg} at {where}") from None
    except RecursionError:  # deeper than Python's decoder goes, far deeper than a script may see
        raise UsageError(f"--{what} {TOO_DEEP}") from None
    problem = value_problem(value)
    if problem is not None:
        raise UsageError(f"--{what} {problem}")
    return value


def checkpoint_answers(pairs: list[str] | None) -> dict[str, bool]:
    """`--answer ship=approve` pairs: checkpoints a non-interactive run answers by itself."""
    answers: dict[str, bool] = {}
    for pair in pairs or []:
        name, _, verdict = pair.partition("=")
        if not name or verdict not in ("approve", "reject"):
            raise UsageError(f"--answer takes NAME=approve or NAME=reject, not {pair!r}")
        answers[name] = verdict == "approve"
    return answers


def read_script(name: str) -> str:
    """A script's text; a missing or unreadable file is a usage error, invalid UTF-8 a syntax error
    at its first bad byte (as `piflow check` reports it)."""
    from piflow.analysis.script_file import read_script_file, unreadable_script
    from piflow.config.files import FileRefused

    try:
        return read_script_file(name).launch_text()
    except (OSError, FileRefused) as exc:
        raise UsageError(unreadable_script(name, exc)) from None


def script_project(args: argparse.Namespace) -> str:
    """The project a run belongs to: its script's, else the current directory's."""
    script = getattr(args, "script", None)
    return project_root(str(Path(script).resolve().parent) if script else os.getcwd())


def _detach(argv: list[str]) -> int:
    """Start an owner process for the run and return as soon as it reports the run id."""
    reply = start_owner(argv)
    if "error" in reply:
        code = reply["error"].get("code")
        print(f"piflow: {code + ': ' if code else ''}{reply['error']['message']}", file=sys.stderr)
        return 2
    print(reply.get("message") or reply["runId"])
    return 0


def start(args: argparse.Namespace, action: str) -> int:
    """`piflow run`, `resume` or `budget` (`action`): check the arguments, then hand the run to its
    executor, to a detached owner process, or own it here."""
    # Bad flags and missing files are refused here, before any run exists (or an owner starts).
    args.answers = checkpoint_answers(args.answer)
    for what in ("args", "budget"):
        json_arg(getattr(args, what, None), what)
    args.script_text = sys.stdin.read() if getattr(args, "script_stdin", False) else None
    if getattr(args, "script", None) and args.script_text is None:
        args.script_text = read_script(args.script)  # read once: the launch runs what was checked
    if not args.owner_process and (executor := executor_for(script_project(args), args)) is not None:
        if action == "budget":
            return executor.budget(args)
        if action == "run":
            from piflow.cli_owning import launch_request

            return executor.run(launch_request(args), args)
        return executor.control(args, "resume")
    if getattr(args, "detach", False) and not args.owner_process:
        return _detach([arg for arg in args.argv if arg != "--detach"])
    if args.owner_process:
        lower_own_priority()  # first: the worker inherits it
    # Own the run: start its worker first (a launch always needs one, a resume of a stored run most
    # likely), then import anyio and the engine while it starts, and launch or resume.
    store = store_path(script_project(args))
    spawn = action == "run" or (action == "resume" and store.exists())  # a budget answer may run nothing
    args.early_worker = EarlyWorker(store) if spawn else None
    try:
        from piflow.collector import collector_paused

        with collector_paused():
            import anyio

            from piflow import cli_owning

            # What start-up made lives as long as the process: the run's collections skip it (a
            # 10,000-agent resume's took ~40 ms more CPU scanning it over and over). Frozen before
            # the collector is back, or its first pass would traverse all of it once anyway.
            gc.freeze()
        try:
            return int(anyio.run(cli_owning.owning, cli_owning.OWNER_ACTIONS[action], args))
        except (WorkflowError, UsageError) as exc:
            if not args.owner_process:
                raise
            error = exc.to_json() if isinstance(exc, WorkflowError) else {"message": str(exc)}
            sys.stdout.write(json.dumps({"error": error}) + "\n")
            sys.stdout.flush()
            return 2
    finally:
        if args.early_worker is not None:
            args.early_worker.discard()


def register(commands: Any) -> None:
    """Add `run`, `resume` and `budget` to the `piflow` argument parser's subcommands."""
    run = commands.add_parser("run", help="run a workflow script with live progress")
    run.add_argument("script", nargs="?", help="a workflow script (or use --workflow)")
    run.add_argument("--workflow", help="run a workflow an installed extension registered, by name")
    run.add_argument("--name")
    run.add_argument("--args", help="JSON value passed to the script as `args`")
    run.add_argument("--budget", help='JSON budget, e.g. {"tokens":{"soft":1000,"hard":2000}}')
    run.add_argument("--concurrency", type=int)
    run.add_argument("--backend")
    run.add_argument("--fixtures", help="scripted backend fixture file (JSON or YAML)")
    run.add_argument("--detach", action="store_true", help="start the run in the background and print its id")
    run.add_argument("--json", action="store_true", help="print the final state and result as JSON")
    run.add_argument("--answer", action="append", metavar="NAME=approve|reject",
                     help="answer a checkpoint by label without asking (repeatable)")
    add_executor_option(run)
    run.add_argument("--owner-process", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("--script-stdin", action="store_true", help=argparse.SUPPRESS)  # an editor's unsaved text
    run.set_defaults(handler=lambda a: start(a, "run"))

    resume = commands.add_parser("resume", help="resume an interrupted, paused or budget-exhausted run")
    resume.add_argument("run")
    resume.add_argument("--budget", help="JSON budget patch")
    resume.add_argument("--detach", action="store_true")
    resume.add_argument("--json", action="store_true")
    resume.add_argument("--answer", action="append", metavar="NAME=approve|reject")
    resume.add_argument("--owner-process", action="store_true", help=argparse.SUPPRESS)
    add_executor_option(resume)
    resume.set_defaults(handler=lambda a: start(a, "resume"))

    budget = commands.add_parser("budget", help="answer a budget adjustment proposal")
    budget.add_argument("decision", choices=("approve", "reject"))
    budget.add_argument("run")
    budget.add_argument("proposal")
    budget.add_argument("--detach", action="store_true", help="resume an approved run in the background")
    budget.add_argument("--owner-process", action="store_true", help=argparse.SUPPRESS)
    budget.set_defaults(handler=lambda a: start(a, "budget"), json=False, answer=None)
