"""Budget accounting of one run: usage, limits per version, soft/hard events (spec H)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Final

from piflow.analysis.budget import exhausted_message, resume_budget_allowed
from piflow.errors import WorkflowError

DIMENSIONS: Final = ("tokens", "costUsd", "durationMs", "agentLaunches")
BudgetEventSink = Callable[[dict[str, Any]], None]


def empty_usage() -> dict[str, float | int]:
    return {"tokens": 0, "costUsd": 0, "durationMs": 0, "agentLaunches": 0}


def _number(value: float | int) -> float | int:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def soft_instruction(usage: dict[str, Any]) -> str:
    """The guidance an agent gets once a soft limit is crossed (spec H, exact text)."""
    current = json.dumps({d: _number(usage[d]) for d in DIMENSIONS}, separators=(",", ":"))
    return (
        "The workflow budget soft limit has been reached. Finish the requested output now, preserving "
        f"any required output schema. Current usage: {current}. Do not start additional model work "
        "unless it is required to produce the final requested result."
    )


class BudgetTracker:
    """Usage is kept across budget versions; events are de-duplicated per (version, type).

    `durationMs` counts wall time only while the run is running or pausing: the owner calls
    `clock(running)` on every transition.
    """

    def __init__(
        self,
        limits: dict[str, Any] | None,
        version: int = 1,
        usage: dict[str, Any] | None = None,
        events: list[dict[str, Any]] | None = None,
        on_event: BudgetEventSink | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits: dict[str, Any] = dict(limits or {})
        self.version = version
        self.usage: dict[str, Any] = {**empty_usage(), **(usage or {})}
        self.events: list[dict[str, Any]] = list(events or [])
        self._on_event = on_event
        self._now = now
        self._running_since: float | None = None

    # -- clock -----------------------------------------------------------------------------
    def clock(self, running: bool) -> None:
        now = self._now()
        if self._running_since is not None:
            self.usage["durationMs"] += int((now - self._running_since) * 1000)
        self._running_since = now if running else None

    def snapshot_usage(self) -> dict[str, Any]:
        usage = dict(self.usage)
        if self._running_since is not None:
            usage["durationMs"] += int((self._now() - self._running_since) * 1000)
        usage["costUsd"] = _number(round(usage["costUsd"], 10))
        return usage

    # -- events ----------------------------------------------------------------------------
    def _has_event(self, kind: str, version: int | None = None) -> bool:
        version = self.version if version is None else version
        return any(e["type"] == kind and e["budgetVersion"] == version for e in self.events)

    def _emit(self, kind: str, dimensions: list[str], **extra: Any) -> None:
        if kind != "adjustment_requested" and self._has_event(kind):
            return
        event = {
            "type": kind,
            "budgetVersion": self.version,
            "dimensions": dimensions,
            "usage": self.snapshot_usage(),
            "limits": json.loads(json.dumps(self.limits)),
            "at": time.time(),
            **extra,
        }
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)

    def record(self, kind: str, dimensions: list[str] | None = None, **extra: Any) -> None:
        """Record an adjustment event (requested/approved/rejected) of the spec's event list."""
        self._emit(kind, dimensions or [], **extra)

    def evaluate(self) -> None:
        usage = self.snapshot_usage()
        soft = [d for d, lim in self.limits.items() if "soft" in lim and usage[d] >= lim["soft"]]
        over = [d for d, lim in self.limits.items() if "hard" in lim and usage[d] > lim["hard"]]
        if soft:
            self._emit("soft_crossed", soft)
        if over:
            self._emit("hard_overrun", over)

    @property
    def soft_crossed(self) -> bool:
        usage = self.snapshot_usage()
        return any("soft" in lim and usage[d] >= lim["soft"] for d, lim in self.limits.items())

    @property
    def hard_exhausted_now(self) -> bool:
        """True when a hard-exhausted event exists for the current version (spec F.2)."""
        return self._has_event("hard_exhausted")

    # -- checks ----------------------------------------------------------------------------
    def _exhausted(self, dimensions: tuple[str, ...]) -> list[str]:
        usage = self.snapshot_usage()
        return [
            d
            for d in DIMENSIONS
            if d in dimensions and "hard" in self.limits.get(d, {}) and usage[d] >= self.limits[d]["hard"]
        ]

    def _fail(self, dims: list[str]) -> WorkflowError:
        self._emit("hard_exhausted", dims)
        message = exhausted_message(self.version, self.limits, self.snapshot_usage(), dims)
        return WorkflowError("BUDGET_EXHAUSTED", message)

    def check_launch(self) -> None:
        """Dispatch check: no new agent may start once launches reached the hard limit."""
        dims = self._exhausted(("agentLaunches",))
        if dims:
            raise self._fail(dims)

    def start_attempt(self) -> None:
        self.check_launch()
        self.usage["agentLaunches"] += 1
        self.evaluate()

    def check_turn(self) -> None:
        """Before every model turn (and after a non-final one): tokens, cost, time."""
        dims = self._exhausted(("tokens", "costUsd", "durationMs"))
        if dims:
            raise self._fail(dims)

    def add_usage(self, tokens: int, cost_usd: float) -> None:
        self.usage["tokens"] += tokens
        self.usage["costUsd"] += cost_usd
        self.evaluate()

    def can_resume(self) -> bool:
        """Resume is allowed iff every hard limit is above the retained usage."""
        return resume_budget_allowed(self.limits, self.snapshot_usage())

    def set_limits(self, limits: dict[str, Any] | None, version: int) -> None:
        self.limits = dict(limits or {})
        self.version = version

    def state_json(self) -> dict[str, Any]:
        return {
            "budget": self.limits or None,
            "budgetVersion": self.version,
            "usage": self.snapshot_usage(),
            "budgetEvents": self.events,
        }
