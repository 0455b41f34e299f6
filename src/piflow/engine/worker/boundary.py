"""What may cross from a worker into the host: every message is checked here before the engine sees it.

A script controls the values it passes (prompts, options, checkpoint contexts, phase names, log
lines, function inputs, its result) and, by tampering with built-in prototypes, even the shape of
the JSON the prelude writes. Nothing it sends may raise inside the host, so a call is admitted only
when its message has the documented shape (`client.py`), its values are nested at most `MAX_DEPTH`
levels (deeper values overflow Python's recursion in the JSON, schema and storage code the host runs
on them) and its strings are well-formed Unicode (a lone surrogate cannot be stored or printed).
A rejected call fails in the script with the spec's code, where a `try` can catch it; an admitted
one enters as a typed call (`protocol.py`), so nothing past this module reads a message's fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeGuard

from piflow.engine.worker.protocol import (
    SURROGATE,
    AgentCall,
    CheckpointCall,
    FunctionCall,
    LogCall,
    PhaseCall,
    Placement,
    TurnCall,
    WorkerCall,
    well_formed,
)
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.worker.subagents_protocol import (
        ChildrenCall,
        EmitCall,
        HostCall,
        LanesCall,
        StateCall,
        StatusCall,
        SteerCall,
    )

MAX_DEPTH: Final = 128
"""Deepest nesting of objects and arrays in a value a script sends (a whole message counts one more)."""

_PREFIX: Final = re.compile(rb'\{"t":"(call|done)"(?:,"id":(\d+),"op":"(\w+)")?')

TOO_DEEP: Final = f"must be nested at most {MAX_DEPTH} levels deep"
BAD_UNICODE: Final = "must be well-formed Unicode (it contains a lone surrogate)"


def value_problem(value: Any, depth_limit: int = MAX_DEPTH) -> str | None:
    """What `value` (decoded JSON) must be to enter the host (`TOO_DEEP`, `BAD_UNICODE`), or None when it is."""
    if isinstance(value, str):  # most prompts: no walk
        return BAD_UNICODE if not value.isascii() and SURROGATE.search(value) else None
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and SURROGATE.search(item):
                return BAD_UNICODE
        elif isinstance(item, dict):
            if depth >= depth_limit:
                return TOO_DEEP
            for key, member in item.items():
                if not key.isascii() and SURROGATE.search(key):
                    return BAD_UNICODE
                pending.append((member, depth + 1))
        elif isinstance(item, list):
            if depth >= depth_limit:
                return TOO_DEEP
            pending.extend((member, depth + 1) for member in item)
    return None


def undecodable(line: bytes | bytearray) -> tuple[str, int | None, str | None]:
    """For a line json could not decode (too deep): its kind (`call`, `done` or ''), call id and op.

    The prelude writes every message with a fixed prefix, so the call it belongs to can still be
    answered, and a script's `try` still sees the failure.
    """
    match = _PREFIX.match(line)
    if match is None:
        return "", None, None
    call_id = match.group(2)
    op = match.group(3)
    return match.group(1).decode(), int(call_id) if call_id else None, op.decode() if op else None


# -- calls ------------------------------------------------------------------------------------


def _is_str(value: Any) -> TypeGuard[str]:
    return isinstance(value, str)


def _is_names(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _placement(identity: Any) -> Placement | None:
    if not isinstance(identity, dict):
        return None
    path, occurrence, owner = identity.get("path"), identity.get("occurrence"), identity.get("worktreeOwner")
    if not (_is_names(path) and _is_count(occurrence) and (owner is None or _is_str(owner))):
        return None
    return Placement(tuple(path), occurrence, owner)


def _site(identity: Any) -> tuple[str, Placement] | None:
    """The call site and placement of an agent's identity or a conversation."""
    placement = _placement(identity)
    call_site = identity.get("callSite") if placement is not None else None
    return (call_site, placement) if placement is not None and _is_str(call_site) else None


def _agent(call_id: int, message: Mapping[str, Any]) -> AgentCall | None:
    site = _site(message.get("identity"))
    if site is None:
        return None
    return AgentCall(call_id, message.get("prompt"), message.get("options"), *site)


def _turn(call_id: int, message: Mapping[str, Any]) -> TurnCall | None:
    convo: Any = message.get("conversation")
    turn = message.get("turn")
    site = _site(convo)
    if site is None or not _is_str(name := convo.get("name")) or not _is_count(turn):
        return None
    return TurnCall(call_id, message.get("prompt"), message.get("options"), name, *site, turn)


def _checkpoint(call_id: int, message: Mapping[str, Any]) -> CheckpointCall | None:
    label = message.get("label")
    return CheckpointCall(call_id, message.get("value"), label) if label is None or _is_str(label) else None


def _function(call_id: int, message: Mapping[str, Any]) -> FunctionCall | None:
    name, placement = message.get("name"), _placement(message.get("identity"))
    if not _is_str(name) or placement is None:
        return None
    return FunctionCall(call_id, name, message.get("input"), placement)


# The pi-subagents calls: their types are imported on such a script's first call (`subagents_protocol.py`).


def _children(call_id: int, message: Mapping[str, Any]) -> ChildrenCall | None:
    from piflow.engine.worker.subagents_protocol import ChildItem, ChildrenCall

    items, batch = message.get("items"), message.get("batch")
    if not isinstance(items, list) or not isinstance(batch, bool):
        return None
    admitted = [ChildItem(item["key"], item.get("params")) for item in items
                if isinstance(item, dict) and _is_str(item.get("key"))]
    return ChildrenCall(call_id, tuple(admitted), batch) if len(admitted) == len(items) else None


def _steer(call_id: int, message: Mapping[str, Any]) -> SteerCall | None:
    from piflow.engine.worker.subagents_protocol import SteerCall

    key, text = message.get("key"), message.get("message")
    return SteerCall(call_id, key, text, message.get("options")) if _is_str(key) and _is_str(text) else None


def _status(call_id: int, message: Mapping[str, Any]) -> StatusCall | None:
    from piflow.engine.worker.subagents_protocol import StatusCall

    target = message.get("target")
    return StatusCall(call_id, target) if _is_str(target) else None


def _emit(call_id: int, message: Mapping[str, Any]) -> EmitCall:
    from piflow.engine.worker.subagents_protocol import EmitCall

    return EmitCall(call_id, message.get("value"))


def _console(call_id: int, message: Mapping[str, Any]) -> EmitCall | None:
    from piflow.engine.worker.subagents_protocol import EmitCall

    level, text = message.get("level"), message.get("text")
    return EmitCall(call_id, text, level) if _is_str(level) and _is_str(text) else None


def _state(call_id: int, message: Mapping[str, Any]) -> StateCall | None:
    from piflow.engine.worker.subagents_protocol import StateCall

    action, key = message.get("action"), message.get("key")
    if action not in ("get", "set") or not _is_str(key):
        return None
    return StateCall(call_id, str(action), key, message.get("value"))


def _host(call_id: int, message: Mapping[str, Any]) -> HostCall:
    from piflow.engine.worker.subagents_protocol import HostCall

    return HostCall(call_id, message.get("key"), message.get("params"))


def _lanes(call_id: int, message: Mapping[str, Any]) -> LanesCall:
    from piflow.engine.worker.subagents_protocol import LanesCall

    return LanesCall(call_id, message.get("lanes"))


_SHAPES: Final[dict[str, tuple[Callable[[int, Mapping[str, Any]], WorkerCall | None], dict[str, str], str]]] = {
    # op: (the typed call, or None when its fixed fields are malformed; fields carrying script
    # values and their names; what the script called)
    "agent": (_agent, {"prompt": "prompt", "options": "options"}, "agent"),
    "turn": (_turn, {"prompt": "prompt", "options": "options"}, "conversation.run"),
    "checkpoint": (_checkpoint, {"value": "input"}, "checkpoint"),
    "phase": (lambda call_id, message: PhaseCall(call_id, message.get("name")), {"name": "name"}, "phase"),
    "log": (lambda call_id, message: LogCall(call_id, message.get("message")), {"message": "message"}, "log"),
    "function": (_function, {"input": "input"}, "function"),
    "children": (_children, {"items": "params"}, "runs.run"),
    "steer": (_steer, {"message": "message", "options": "options"}, "runs.steer"),
    "status": (_status, {"target": "target"}, "runs.status"),
    "emit": (_emit, {"value": "value"}, "emit"),
    "console": (_console, {"text": "text"}, "console"),
    "state": (_state, {"key": "key", "value": "value"}, "state.set"),
    "host": (_host, {"key": "key", "params": "params"}, "runs.host"),
    "lanes": (_lanes, {"lanes": "lanes"}, "runs.lanes"),
}


def admit(call_id: int, message: Mapping[str, Any]) -> WorkerCall | WorkflowError:
    """Call message `call_id` as the typed call the host serves, or the error it fails with in the script."""
    op = str(message.get("op"))
    entry = _SHAPES.get(op)
    if entry is None:
        return WorkflowError("INTERNAL_ERROR", f"Unknown workflow worker call: {well_formed(op)}")
    build, fields, _ = entry
    call = build(call_id, message)
    if call is None:
        return malformed_call(op)
    for field, name in fields.items():
        problem = value_problem(message.get(field))
        if problem is not None:
            return rejection(op, problem, name, call.name if isinstance(call, FunctionCall) else None)
    return call


def malformed_call(op: str) -> WorkflowError:
    """The error of a call whose fixed fields the worker's prelude could not have written."""
    return WorkflowError(
        "INVALID_METADATA",
        f"The {op} call reached the host malformed; was a built-in prototype such as "
        "Array.prototype or Object.prototype changed?",
    )


def rejection(op: str, problem: str, field: str | None = None, function: str | None = None) -> WorkflowError:
    """The error of call `op` whose value `field` (None: some value) cannot cross, as `problem` says."""
    if op == "function":
        return WorkflowError(
            "RESULT_INVALID", f"Invalid input for {well_formed(function or 'a function')}: it {problem}"
        )
    noun = _SHAPES[op][2] if op in _SHAPES else op
    what = f"{noun} {field}" if field else f"A value passed to {noun}"
    return WorkflowError("INVALID_METADATA", f"{what} {problem}")


def result_problem(value: Any) -> WorkflowError | None:
    """The run's failure when the script's result cannot be stored and shown."""
    problem = value_problem(value)
    return None if problem is None else WorkflowError("RESULT_INVALID", f"Workflow result {problem}")
