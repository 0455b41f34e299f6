"""The calls only pi-subagents scripts make (SUBAGENTS_SPEC A.4-A.8), typed as the boundary admits them.

A module of their own, imported on such a script's first call (`boundary.py`, `engine/calls.py`): a
pi-extensible-workflows run, every `piflow run` and `resume` of a `*.workflow.js`, never creates
their classes (each dataclass costs a start-up ~0.6 ms). The rest of the protocol is `protocol.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ChildItem:
    """One child a pi-subagents script launches: its workflow key and params as the worker checked them."""

    key: str
    params: Any


@dataclass(frozen=True, slots=True)
class ChildrenCall:
    """`runs.run(key, params)` (one item, `batch` False) or `runs.all(items)` (SUBAGENTS_SPEC A.4, A.5)."""

    op: ClassVar[str] = "children"
    id: int
    items: tuple[ChildItem, ...]
    batch: bool


@dataclass(frozen=True, slots=True)
class SteerCall:
    """`runs.steer(key, message, options)` (SUBAGENTS_SPEC A.8)."""

    op: ClassVar[str] = "steer"
    id: int
    key: str
    message: str
    options: Any


@dataclass(frozen=True, slots=True)
class StatusCall:
    """`runs.status(keyOrRunId)`."""

    op: ClassVar[str] = "status"
    id: int
    target: str


@dataclass(frozen=True, slots=True)
class EmitCall:
    """`emit(value)`; `console.<level>(...)` is an EmitCall with `level` set and the line as `value`."""

    op: ClassVar[str] = "emit"
    id: int
    value: Any
    level: str | None = None


@dataclass(frozen=True, slots=True)
class StateCall:
    """`state.get(key)` (`value` None) or `state.set(key, value)`."""

    op: ClassVar[str] = "state"
    id: int
    action: str
    key: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class HostCall:
    """`runs.host(key, params)` (SUBAGENTS_SPEC A.7): the host validates `key` and `params`."""

    op: ClassVar[str] = "host"
    id: int
    key: Any
    params: Any


@dataclass(frozen=True, slots=True)
class LanesCall:
    """`runs.lanes(lanes)` (SUBAGENTS_SPEC A.6), as the worker validated and normalised it (`lanes.py`)."""

    op: ClassVar[str] = "lanes"
    id: int
    lanes: Any


SubagentsCall = ChildrenCall | SteerCall | StatusCall | EmitCall | StateCall | HostCall | LanesCall
"""A call only pi-subagents scripts make."""
