"""Following a run on a terminal: its progress as a redrawn card or a line per change, the
checkpoints a run's owner answers or asks about, the end of `piflow run` (result or error), and
`piflow show RUN --follow` (another process's run, through the change feed).

Separate from `cli_runs` because it needs anyio: listing and showing runs do not.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

import anyio

from piflow.cli_runs import format_run, state_in_words, write_on
from piflow.engine import events
from piflow.engine.feed import FEED_INTERVAL, ChangeFeed
from piflow.engine.lifecycle import AGENT_SETTLED, ENDED, CheckpointState, RunState
from piflow.engine.progress import format_progress
from piflow.engine.store import RunStore
from piflow.engine.subagents.progress import event_line
from piflow.engine.views import RunView, run_view
from piflow.errors import WorkflowError
from piflow.view_wire import run_json

if TYPE_CHECKING:
    from piflow.engine.engine import Engine


class ProgressPrinter:
    """Follows one run on a terminal: a redrawn card on a TTY, one line per change otherwise."""

    def __init__(self, store: RunStore, run_id: str, out: TextIO, interactive: bool) -> None:
        self.store = store
        self.run_id = run_id
        self.out = out
        self.interactive = interactive
        self._drawn_lines = 0
        self.dirty = True

    def on_event(self, event: events.Event) -> None:
        if event.run_id != self.run_id:
            return
        self.dirty = True
        if self.interactive:
            return
        payload = event.payload
        subagents_line = event_line(event.type, payload)
        if subagents_line is not None:
            self._line(subagents_line)
        elif event.type == events.RUN_STATE_CHANGED:
            self._line(f"state: {payload['previousState']} -> {payload['state']}")
        elif event.type == events.PHASE_CHANGED:
            self._line(f"phase: {payload['phase']}")
        elif event.type == events.AGENT_STATE_CHANGED and payload["state"] in AGENT_SETTLED:
            self._line(f"agent {payload['displayLabel']}: {payload['state']}")
        elif event.type == events.CHECKPOINT_STATE_CHANGED and payload["state"] == CheckpointState.AWAITING:
            self._line(
                f"checkpoint {payload['name']} awaits an answer: piflow approve|reject {self.run_id[:8]} "
                f"{payload['name']}"
            )
        elif event.type == events.RUN_LOG:
            self._line(f"log: {payload['message']}")

    def _line(self, text: str) -> None:
        write_on(self.out, text + "\n")

    def redraw(self) -> None:
        if not (self.interactive and self.dirty):
            return
        self.dirty = False
        card = format_progress(run_view(self.store, self.run_id))
        erase = f"\x1b[{self._drawn_lines}F\x1b[J" if self._drawn_lines else ""
        write_on(self.out, erase + card + "\n")
        self._drawn_lines = card.count("\n") + 1


def _answer_known(engine: Engine, run_id: str, answers: dict[str, bool]) -> None:
    for checkpoint in engine.store.awaiting_checkpoints(run_id):
        if checkpoint.label in answers:
            engine.respond(run_id, name=checkpoint.label, approved=answers[checkpoint.label])


async def _ask_checkpoints(engine: Engine, run_id: str, asked: set[str]) -> None:
    for checkpoint in engine.store.awaiting_checkpoints(run_id):
        if checkpoint.label in asked:
            continue
        asked.add(checkpoint.label)
        question = (
            f"\nCheckpoint {checkpoint.label}: {checkpoint.prompt}\n"
            f"Context: {json.dumps(checkpoint.context)}\nApprove? [y/N] "
        )
        answer = await anyio.to_thread.run_sync(input, question, abandon_on_cancel=True)
        engine.respond(run_id, name=checkpoint.label, approved=answer.strip().lower() in ("y", "yes"))


async def follow(
    engine: Engine, run_id: str, *, out: TextIO, quiet: bool, answers: dict[str, bool] | None = None
) -> None:
    """Show a run's progress until it ends; answer known checkpoints; on a TTY, ask the others."""
    interactive = out.isatty() and sys.stdin.isatty() and not quiet
    printer = ProgressPrinter(engine.store, run_id, out, interactive)
    unsubscribe = engine.bus.subscribe(printer.on_event) if not quiet else (lambda: None)
    asked: set[str] = set()
    try:
        async with anyio.create_task_group() as tasks:
            async def watch() -> None:
                while True:
                    printer.redraw()
                    if answers:
                        _answer_known(engine, run_id, answers)
                    if interactive:
                        tasks.start_soon(_ask_checkpoints, engine, run_id, asked)
                    await anyio.sleep(0.1)

            tasks.start_soon(watch)
            await engine.wait(run_id)
            tasks.cancel_scope.cancel()
        printer.dirty = True
        printer.redraw()
    finally:
        unsubscribe()


def finish_view(view: RunView, *, as_json: bool, out: TextIO) -> int:
    """The end of `piflow run`: the result or error (JSON with --json); the exit code by state."""
    run_id = view.run_id
    if as_json:
        shown = run_json(view)
        out.write(json.dumps({k: shown.get(k) for k in ("runId", "state", "result", "error")}) + "\n")
    else:
        if not out.isatty():
            out.write(format_progress(view) + "\n")
        if view.has_result:
            out.write(f"Result: {json.dumps(view.result, ensure_ascii=False)}\n")
            for worktree in view.worktrees:
                out.write(f"Worktree: {worktree.branch} ({worktree.path})\n")
        elif view.error:
            out.write(f"{view.state}: {WorkflowError.from_json(view.error).headline()}\n")
        else:
            out.write(state_in_words(view.state, run_id) + "\n")
    return 0 if view.state == RunState.COMPLETED else 1


def follow_events(path: Path, run_id: str) -> int:
    """`piflow show RUN --follow` (see `_follow_events`); its exit code."""
    return int(anyio.run(_follow_events, path, run_id))


_LIVENESS_SECONDS: Final = 1.0
"""How often `show --follow` checks, without news, that the run's owner is still alive."""


async def _follow_events(path: Path, run_id: str) -> int:
    """`piflow show RUN --follow`: the run's events from its start, a line each, as they are
    committed (through the change feed), until the run ends or its owner dies; then the run."""
    feed = ChangeFeed(path, after_seq=0)
    printer = ProgressPrinter(feed.store, run_id, sys.stdout, interactive=False)
    checked = 0.0
    try:
        while True:
            if feed.changed() or time.monotonic() - checked > _LIVENESS_SECONDS:
                checked = time.monotonic()
                record = feed.store.get_run(run_id)
                over = record is None or record.state in ENDED or feed.store.lease_owner(run_id) is None
                while batch := feed.read(run_id):  # after the check: a run that ended has all its events in
                    for event in batch:
                        printer.on_event(events.Event(event.seq, event.run_id, event.type, event.payload))
                if over:
                    break
            await anyio.sleep(FEED_INTERVAL)
        write_on(sys.stdout, format_run(run_view(feed.store, run_id, details=True)) + "\n")
    finally:
        feed.close()
    return 0
