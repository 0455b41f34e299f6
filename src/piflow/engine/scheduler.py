"""Fair agent scheduling across runs: per-run concurrency under a process-wide ceiling (spec J.1)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import anyio

from piflow.errors import WorkflowError

SESSION_CEILING = 16


@dataclass
class _RunSlots:
    """One run's share of the permits: its concurrency limit, how many it holds, who waits for one."""

    limit: int
    active: int = 0
    waiters: deque[anyio.Event] = field(default_factory=deque)


class FairScheduler:
    """Grants agent permits round-robin over runs, so one huge fan-out cannot starve another run."""

    def __init__(self, ceiling: int = SESSION_CEILING) -> None:
        if not isinstance(ceiling, int) or not 1 <= ceiling <= 16:
            raise WorkflowError("INVALID_SETTINGS", "Session concurrency must be an integer from 1 to 16")
        self.ceiling = ceiling
        self.active = 0
        self._runs: dict[str, _RunSlots] = {}
        self._order: deque[str] = deque()

    def register(self, run_id: str, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 16:
            raise WorkflowError("INVALID_SETTINGS", "Invalid run concurrency")
        if run_id not in self._runs:
            self._runs[run_id] = _RunSlots(limit)
            self._order.append(run_id)
        else:
            self._runs[run_id].limit = limit

    def unregister(self, run_id: str) -> None:
        slots = self._runs.pop(run_id, None)
        if slots is None:
            return
        self._order.remove(run_id)
        self.active -= slots.active
        self._dispatch()

    async def acquire(self, run_id: str) -> None:
        slots = self._runs[run_id]
        granted = anyio.Event()
        slots.waiters.append(granted)
        self._dispatch()
        try:
            await granted.wait()
        except BaseException:
            if granted.is_set():
                self.release(run_id)
            elif granted in slots.waiters:
                slots.waiters.remove(granted)
            raise

    def release(self, run_id: str) -> None:
        slots = self._runs.get(run_id)
        if slots is None:
            return
        slots.active -= 1
        self.active -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        while self.active < self.ceiling:
            for _ in range(len(self._order)):
                run_id = self._order[0]
                self._order.rotate(-1)
                slots = self._runs[run_id]
                if slots.waiters and slots.active < slots.limit:
                    slots.active += 1
                    self.active += 1
                    slots.waiters.popleft().set()
                    break
            else:
                return
