"""Run lifecycle: states, transitions and the cooperative pause of one run (spec F.1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import anyio

from piflow.errors import WorkflowError

RUN_STATES: Final = (
    "queued",
    "running",
    "pausing",
    "paused",
    "awaiting_input",
    "completed",
    "failed",
    "stopped",
    "interrupted",
    "budget_exhausted",
)
IRREVERSIBLE: Final = frozenset({"completed", "failed", "stopped"})
RESUMABLE: Final = frozenset({"paused", "interrupted", "budget_exhausted"})
ENDED: Final = IRREVERSIBLE | {"interrupted", "budget_exhausted"}
_BLOCKING: Final = frozenset({"pausing", "paused", "awaiting_input"})

AGENT_STATES: Final = (
    "queued",
    "running",
    "waiting_for_child",
    "paused",
    "retrying",
    "completed",
    "failed",
    "cancelled",
)
AGENT_SETTLED: Final = frozenset({"completed", "failed", "cancelled"})

Transition = Callable[[str, str, str | None], None]
"""Called as (previous, state, reason) after every transition, before waiters wake."""


class RunLifecycle:
    """The state of one run plus the count of operations inside it.

    Every agent call, phase and log `enter()`s: new work blocks while the run is pausing,
    paused or awaiting input, so a pause lets running agents finish and starts nothing new.
    """

    def __init__(self, state: str, on_transition: Transition) -> None:
        self.state = state
        self.active = 0
        self._on_transition = on_transition
        self._changed = anyio.Event()

    def _set(self, state: str, reason: str | None) -> None:
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
        if self.state != "running":
            raise WorkflowError("CANCELLED", f"Run is {self.state}")
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        if self.state == "pausing" and self.active <= 0:
            self._set("paused", "pause")

    def pause(self) -> None:
        if self.state != "running":
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot pause {self.state} run")
        self._set("pausing", "pause")
        if self.active <= 0:
            self._set("paused", "pause")

    def resume(self) -> None:
        if self.state not in RESUMABLE:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot resume {self.state} run")
        self._set("running", "resume")

    async def enter_awaiting_input(self) -> None:
        while self.state in ("pausing", "paused"):
            await self._changed.wait()
        if self.state == "awaiting_input":
            return
        if self.state != "running":
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Cannot await input for {self.state} run")
        self._set("awaiting_input", "awaiting_input")

    def resolve_awaiting_input(self) -> None:
        if self.state == "awaiting_input":
            self._set("running", "checkpoint_resolved")

    def terminal(self, state: str, reason: str | None = None) -> None:
        if self.state in IRREVERSIBLE:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"{self.state} runs are terminal")
        self._set(state, reason or state)

    async def provider_pause(self) -> None:
        """A provider rate limit: pause the run, then block until somebody resumes it."""
        self.leave()
        if self.state == "running":
            self.pause()
        await self.enter()
