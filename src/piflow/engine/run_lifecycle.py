"""The cooperative pause of one live run (spec F.1): its transitions between `lifecycle`'s states,
and the waits that hold new work while the run is pausing, paused or awaiting input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import anyio

from piflow.engine.lifecycle import IRREVERSIBLE, RESUMABLE, RunState
from piflow.errors import WorkflowError

_BLOCKING: Final = frozenset({RunState.PAUSING, RunState.PAUSED, RunState.AWAITING_INPUT})

Transition = Callable[[RunState, RunState, str | None], None]
"""Called as (previous, state, reason) after every transition, before waiters wake."""


class RunLifecycle:
    """The state of one run plus the count of operations inside it.

    Every agent call, phase and log `enter()`s: new work blocks while the run is pausing,
    paused or awaiting input, so a pause lets running agents finish and starts nothing new.
    """

    def __init__(self, state: RunState, on_transition: Transition) -> None:
        self.state = state
        self.active = 0
        self._on_transition = on_transition
        self._changed = anyio.Event()

    def _set(self, state: RunState, reason: str | None) -> None:
        previous = self.state
        self.state = state
        self._on_transition(previous, state, reason)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_change(self) -> None:
        await self._changed.wait()

    async def _wait_unblocked(self) -> None:
        while self.state in _BLOCKING:
            await self._changed.wait()

    async def enter(self) -> None:
        await self._wait_unblocked()
        if self.state != RunState.RUNNING:
            raise WorkflowError("CANCELLED", f"Run is {self.state}")
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        if self.state == RunState.PAUSING and self.active <= 0:
            self._set(RunState.PAUSED, "pause")

    def pause(self) -> None:
        if self.state != RunState.RUNNING:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot pause {self.state} run")
        self._set(RunState.PAUSING, "pause")
        if self.active <= 0:
            self._set(RunState.PAUSED, "pause")

    def resume(self) -> None:
        if self.state not in RESUMABLE:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot resume {self.state} run")
        self._set(RunState.RUNNING, "resume")

    async def enter_awaiting_input(self) -> None:
        while self.state in (RunState.PAUSING, RunState.PAUSED):
            await self._changed.wait()
        if self.state == RunState.AWAITING_INPUT:
            return
        if self.state != RunState.RUNNING:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot await input for {self.state} run")
        self.await_input()

    def await_input(self) -> None:
        """A running run now awaits input, at once: in the caller's write batch, with what it awaits."""
        self._set(RunState.AWAITING_INPUT, "awaiting_input")

    def resolve_awaiting_input(self) -> None:
        if self.state == RunState.AWAITING_INPUT:
            self._set(RunState.RUNNING, "checkpoint_resolved")

    def terminal(self, state: RunState, reason: str | None = None) -> None:
        if self.state in IRREVERSIBLE:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"{self.state} runs are terminal")
        self._set(state, reason or state)

    async def provider_pause(self) -> None:
        """A provider rate limit: pause the run, then block until somebody resumes it."""
        self.leave()
        if self.state == RunState.RUNNING:
            self.pause()
        await self.enter()
