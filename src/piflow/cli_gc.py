"""`piflow delete` and `piflow gc`: remove runs with their worktrees and branches, so nothing piles up
in the store or in the user's repository. A run with a live owner is never removed."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Any, Final

from piflow.cli_errors import UsageError
from piflow.cli_runs import existing_store, resolve_run, state_in_words
from piflow.engine.environment import project_root
from piflow.engine.lifecycle import IRREVERSIBLE, RESUMABLE
from piflow.engine.store import RunRecord, RunStore
from piflow.engine.views import observed_run
from piflow.engine.worktrees import RemovedWorktrees, delete_run
from piflow.errors import WorkflowError

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
DEFAULT_AGE: Final = "7d"


def duration(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s`, `2w` (or a sum such as `1d12h`) in seconds."""
    parts = _DURATION.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 7d, 12h, 90m or 1d12h")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def _describe(run: RunRecord) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.updated_at))
    return f"{run.id[:8]}  {run.workflow_name}  {run.state}  (last change {when})"


def _confirm(question: str, yes: bool) -> bool:
    """True when `--yes` was given or the user answers y in a terminal; without a terminal, a
    usage error: removing runs is never done by a script that forgot to say so."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError("this removes runs for good: confirm in a terminal or pass --yes")
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _removed(run: RunRecord, removed: RemovedWorktrees) -> str:
    lines = [f"Deleted run {run.id[:8]} ({run.workflow_name})"]
    for branch, tip in removed.branches:
        lines.append(f"  deleted branch {branch} (was {tip[:12]})")
    for branch, path in removed.kept:
        lines.append(f"  kept branch {branch}: it is checked out at {path}")
    return "\n".join(lines)


def _remove(store: RunStore, run: RunRecord) -> bool:
    """Delete one run and say what happened; False (and why on stderr) when it could not be."""
    try:
        removed = delete_run(store, run.id)
    except WorkflowError as exc:
        if exc.code == "RUN_OWNED":
            print(f"piflow: run {run.id[:8]} is running; stop it first (`piflow stop {run.id[:8]}`)", file=sys.stderr)
        else:
            print(f"piflow: run {run.id[:8]} was not deleted: {exc.code}: {exc.message}", file=sys.stderr)
        return False
    print(_removed(run, removed))
    return True


def _delete(args: argparse.Namespace) -> int:
    cwd = project_root(os.getcwd())
    with existing_store(cwd) as store:
        run_id = resolve_run(store, args.run, cwd)
        with store.consistent_read():
            record = store.get_run(run_id)
            if record is None:
                raise UsageError(f"no run {args.run} in the project {cwd}")
            run = observed_run(store, record)
        if run.state not in IRREVERSIBLE | RESUMABLE:
            print(f"piflow: run {run_id[:8]} is {state_in_words(run.state, run_id)}; stop it first "
                  f"(`piflow stop {run_id[:8]}`)", file=sys.stderr)
            return 1
        branches = len(store.worktrees(run_id))
        question = (f"Delete run {_describe(run)}, its {branches} worktree(s) and their branches?"
                    if branches else f"Delete run {_describe(run)}?")
        if not _confirm(question, args.yes):
            print("Nothing was deleted.")
            return 1
        return 0 if _remove(store, run) else 1


def _gc(args: argparse.Namespace) -> int:
    cwd = project_root(os.getcwd())
    states = IRREVERSIBLE | (RESUMABLE if args.include_resumable else frozenset())
    cutoff = time.time() - args.older_than
    with existing_store(cwd) as store:
        with store.consistent_read():
            runs = [run for record in store.list_runs()
                    if (run := observed_run(store, record)).state in states and run.updated_at <= cutoff]
        if not runs:
            print("No runs to remove.")
            return 0
        listing = "\n".join(f"  {_describe(run)}" for run in runs)
        if args.dry_run:
            print(f"Would remove {len(runs)} run(s):\n{listing}")
            return 0
        if not _confirm(f"Remove {len(runs)} run(s) with their worktrees and branches?\n{listing}\n",
                        args.yes):
            print("Nothing was removed.")
            return 1
        failed = [run for run in runs if not _remove(store, run)]
    return 1 if failed else 0


def register(commands: Any) -> None:
    """Add `delete` and `gc` to the `piflow` argument parser's subcommands."""
    delete = commands.add_parser("delete", help="delete a run with its worktrees and branches")
    delete.add_argument("run", help="a run id or a prefix of 8+ characters")
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(handler=_delete)

    gc = commands.add_parser("gc", help="remove old finished runs with their worktrees and branches")
    gc.add_argument("--older-than", type=duration, default=duration(DEFAULT_AGE), metavar="DURATION",
                    help=f"only runs whose last change is older than this, e.g. 30d, 12h, 0s (default {DEFAULT_AGE})")
    gc.add_argument("--include-resumable", action="store_true",
                    help="also remove interrupted, paused and budget-exhausted runs (they could be resumed)")
    gc.add_argument("--dry-run", action="store_true", help="list what would be removed and remove nothing")
    gc.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    gc.set_defaults(handler=_gc)
