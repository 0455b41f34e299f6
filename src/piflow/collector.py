"""Holding Python's cyclic garbage collector off around work whose objects it would scan for nothing.

Two cases, one mechanism: a throwaway analysis (`preflight`, `analyze` of a text) allocates a few
hundred thousand small objects that reference counting frees and that form almost no cycles (~70
per 1,000-line preflight), and the collector's passes over them while they live cost 10-20 % of it
(5 ms at 1,000 lines, ~55 ms at 5,000); a command's imports allocate ~50,000 objects that live as
long as the process, and the ~70 collections they would trigger find no garbage (20-35 ms of
`piflow run`). It pays only where the objects are freed, or frozen, before the collector is back:
for a document that stays open (the editor's), pausing merely postpones the same traversal.
Below every layer, so the CLI and the analysis share it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _CollectorPause:
    """Counted, so overlapping analyses (the server's threads) nest: the collector runs again when
    the last one ends, unless it was off before the first began."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._resume:
                    gc.enable()


collector_paused = _CollectorPause()
"""`with collector_paused():` — around a call whose big temporaries are freed when it returns (then
the collector, back on, finds nothing new to traverse)."""
