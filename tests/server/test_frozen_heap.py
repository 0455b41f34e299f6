"""The server freezes what survives each quiet second out of the collector's full collections
(typing must not stall behind a walk of every open document); memory held by a cycle among frozen
objects must still come back, or a long session would only ever grow."""

from __future__ import annotations

import gc
import weakref

from piflow.server.base import _FrozenHeap


class Node:
    def __init__(self) -> None:
        self.me = self


def test_a_frozen_cycle_dropped_later_is_freed_once_the_frozen_heap_has_doubled() -> None:
    heap = _FrozenHeap()
    freed: list[bool] = []
    try:
        heap.settle()
        heap.settle()  # the first full sweep: what lives now is the baseline
        cycle = Node()
        weakref.finalize(cycle, freed.append, True)
        heap.settle()
        del cycle
        heap.settle()
        assert not freed  # frozen: a quiet second's collection does not walk it
        _ballast = [[] for _ in range(gc.get_freeze_count() + 1)]  # long-lived objects double the heap
        heap.settle()
        heap.settle()
        assert freed
    finally:
        gc.unfreeze()
