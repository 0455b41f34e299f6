"""The worker's JSON-lines protocol: the typed calls and answers, on top of the wire (`wire.py`).

host → worker: `compile` and `start` (once), then `settle` batches. worker → host: `hb` heartbeats,
`call` messages (ids increase in script call order) and one final `done`. The shapes of each message
are documented in `client.py`, the host's side of the pipe; `boundary.py` turns a call message into
one of the typed calls below (those only pi-subagents scripts make: `subagents_protocol.py`), which is
all the engine ever sees of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from piflow.engine.worker.wire import (
    DEFAULT_HEAP_LIMIT,
    DEFAULT_MEMORY_LIMIT,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_LINE,
    HEARTBEAT_TIMEOUT,
    NOT_JSON,
    OVERSIZED,
    RPC_LIMIT_BYTES,
    SETTLE_HEAD,
    SETTLE_TAIL,
    SURROGATE,
    encode,
    error_from_json,
    error_json,
    well_formed,
)
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.worker.subagents_protocol import SubagentsCall

__all__ = [
    "DEFAULT_HEAP_LIMIT", "DEFAULT_MEMORY_LIMIT", "HEARTBEAT_INTERVAL", "HEARTBEAT_LINE", "HEARTBEAT_TIMEOUT",
    "NOT_JSON", "OVERSIZED", "RPC_LIMIT_BYTES", "SETTLE_HEAD", "SETTLE_TAIL", "SURROGATE", "encode",
    "error_from_json", "error_json", "well_formed",
]


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
    """The script's `phase(name)`: the run enters a phase, which its progress shows."""

    op: ClassVar[str] = "phase"
    id: int
    name: Any


@dataclass(frozen=True, slots=True)
class LogCall:
    """The script's `log(message)`: a line of the run's log."""

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


WorkerCall: TypeAlias = "AgentCall | TurnCall | CheckpointCall | PhaseCall | LogCall | FunctionCall | SubagentsCall"
"""A primitive call the script made, as admitted at the boundary. (A forward reference: the
pi-subagents calls are imported on such a script's first call, `subagents_protocol.py`.)"""


@dataclass(frozen=True, slots=True)
class Settled:
    """The answer to call `id`: its value, or the error it fails with in the script.

    `text`, when given, is the value as JSON text (a journaled value, replayed): it crosses to the
    worker as it is, never decoded and encoded again.
    """

    id: int
    value: Any = None
    error: WorkflowError | None = None
    text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """`{"id":N,"ok":true,"value":V}` or `{"id":N,"ok":false,"error":{code,message,failedAt?,authored}}`."""
        if self.error is None:
            return {"id": self.id, "ok": True, "value": self.value if self.text is None else json.loads(self.text)}
        return {"id": self.id, "ok": False, "error": error_json(self.error)}

    def encoded(self) -> bytes:
        """The answer's JSON, as `encode` writes it (without the newline); a value given as text is
        spliced in unless it holds a `\\u` escape of a surrogate, which takes the decoding path so a
        lone surrogate fails the call as it does when the value is fresh."""
        if self.error is None and self.text is not None and "\\ud" not in self.text and "\\uD" not in self.text:
            return b'{"id":%d,"ok":true,"value":%s}' % (self.id, self.text.encode())
        return encode(self.to_json())[:-1]
