"""The worker's JSON-lines protocol: limits, timings, the typed calls and the encodings both ends share.

host → worker: `start` (once), then `settle` batches. worker → host: `hb` heartbeats, `call`
messages (ids increase in script call order) and one final `done`. The shapes of each message are
documented in `client.py`, the host's side of the pipe; `boundary.py` turns a call message into one
of the typed calls below, which is all the engine ever sees of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from piflow.errors import ERROR_CODES, WorkflowError

RPC_LIMIT_BYTES: Final = 10 * 1024 * 1024
"""Largest message, in UTF-8 bytes of its JSON, either way (spec A.1)."""
HEARTBEAT_INTERVAL: Final = 1.0
HEARTBEAT_TIMEOUT: Final = 5.0
DEFAULT_HEAP_LIMIT: Final = 512 * 1024 * 1024
"""QuickJS heap of a worker. The reference gives its worker 128 MiB of V8 heap; QuickJS needs about
3 KiB per pending agent task of a `parallel`, so this holds fan-outs of well over 100k agents."""
DEFAULT_MEMORY_LIMIT: Final = 1024 * 1024 * 1024
"""Address-space cap of a worker process: the heap plus Python, thread stacks, allocator arenas
and a few 10 MiB messages in flight."""

OVERSIZED: Final = "RPC value exceeds the 10 MB JSON boundary"
NOT_JSON: Final = "RPC values must be JSON-compatible"

HEARTBEAT_LINE: Final = b'{"t":"hb"}\n'
CALL_PREFIX: Final = '{"t":"call","id":'
DONE_PREFIX: Final = '{"t":"done",'


SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""A lone surrogate: text containing one is not well-formed Unicode."""


def well_formed(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD: for messages that must reach the user anyway."""
    return text if text.isascii() else SURROGATE.sub("\ufffd", text)


# -- calls (worker → host) --------------------------------------------------------------------
# Values the script passed (prompts, options, inputs, names) stay `Any`: the boundary has checked
# they can cross; what they must be is the engine's rule, with the spec's error when they are not.


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a call sits in the script: its parallel/pipeline scope path, its occurrence there, and
    the `withWorktree` scope it runs in (None: the launch cwd)."""

    path: tuple[str, ...]
    occurrence: int
    worktree_owner: str | None = None


@dataclass(frozen=True, slots=True)
class AgentCall:
    """`agent(prompt, options)`; `call_site` is `start:end` of the call in the launched body."""

    op: ClassVar[str] = "agent"
    id: int
    prompt: Any
    options: Any
    call_site: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class TurnCall:
    """Turn `turn` of `conversation(name).run(prompt, options)`; the conversation is placed like an agent."""

    op: ClassVar[str] = "turn"
    id: int
    prompt: Any
    options: Any
    conversation: str
    call_site: str
    placement: Placement
    turn: int


@dataclass(frozen=True, slots=True)
class CheckpointCall:
    """`checkpoint(value)`; `label` is None when the worker found `value` invalid (spec A.9)."""

    op: ClassVar[str] = "checkpoint"
    id: int
    value: Any
    label: str | None


@dataclass(frozen=True, slots=True)
class PhaseCall:
    op: ClassVar[str] = "phase"
    id: int
    name: Any


@dataclass(frozen=True, slots=True)
class LogCall:
    op: ClassVar[str] = "log"
    id: int
    message: Any


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A call of the extension function `name` (spec L.3)."""

    op: ClassVar[str] = "function"
    id: int
    name: str
    input: Any
    placement: Placement


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

WorkerCall = AgentCall | TurnCall | CheckpointCall | PhaseCall | LogCall | FunctionCall | SubagentsCall
"""A primitive call the script made, as admitted at the boundary."""


@dataclass(frozen=True, slots=True)
class Settled:
    """The answer to call `id`: its value, or the error it fails with in the script."""

    id: int
    value: Any = None
    error: WorkflowError | None = None

    def to_json(self) -> dict[str, Any]:
        """`{"id":N,"ok":true,"value":V}` or `{"id":N,"ok":false,"error":{code,message,failedAt?,authored}}`."""
        if self.error is None:
            return {"id": self.id, "ok": True, "value": self.value}
        return {"id": self.id, "ok": False, "error": error_json(self.error)}


def encode(message: Any) -> bytes:
    """One protocol line: compact JSON, no NaN/Infinity, newline-terminated."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode() + b"\n"


def error_json(error: WorkflowError) -> dict[str, Any]:
    """The wire form of a failure: `{code, message, failedAt?, authored}`."""
    return error.to_json() | {"authored": error.authored}


def error_from_json(data: Any) -> WorkflowError:
    """A failure the worker reported; codes outside the spec's list become authored INTERNAL_ERROR (spec C)."""
    if not isinstance(data, dict):
        return WorkflowError("INTERNAL_ERROR", "Workflow worker reported a malformed error")
    code = data.get("code")
    message = data.get("message")
    failed_at = data.get("failedAt")
    text = well_formed(message) if isinstance(message, str) else ""
    where = well_formed(failed_at) if isinstance(failed_at, str) else None
    if code not in ERROR_CODES:
        return WorkflowError("INTERNAL_ERROR", text, failed_at=where, authored=True)
    return WorkflowError(str(code), text, failed_at=where, authored=data.get("authored") is True)
