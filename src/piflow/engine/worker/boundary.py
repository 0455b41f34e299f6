"""What may cross from a worker into the host: every message is checked here before the engine sees it.

A script controls the values it passes (prompts, options, checkpoint contexts, phase names, log
lines, function inputs, its result) and, by tampering with built-in prototypes, even the shape of
the JSON the prelude writes. Nothing it sends may raise inside the host, so a call is admitted only
when its message has the documented shape (`client.py`), its values are nested at most `MAX_DEPTH`
levels (deeper values overflow Python's recursion in the JSON, schema and storage code the host runs
on them) and its strings are well-formed Unicode (a lone surrogate cannot be stored or printed).
A rejected call fails in the script with the spec's code, where a `try` can catch it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeGuard

from piflow.errors import WorkflowError

MAX_DEPTH: Final = 128
"""Deepest nesting of objects and arrays in a value a script sends (a whole message counts one more)."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_PREFIX: Final = re.compile(rb'\{"t":"(call|done)"(?:,"id":(\d+),"op":"(\w+)")?')

TOO_DEEP: Final = f"must be nested at most {MAX_DEPTH} levels deep"
BAD_UNICODE: Final = "must be well-formed Unicode (it contains a lone surrogate)"


def value_problem(value: Any, depth_limit: int = MAX_DEPTH) -> str | None:
    """What `value` (decoded JSON) must be to enter the host (`TOO_DEEP`, `BAD_UNICODE`), or None when it is."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return BAD_UNICODE
        elif isinstance(item, dict):
            if depth >= depth_limit:
                return TOO_DEEP
            for key, member in item.items():
                if not key.isascii() and _SURROGATE.search(key):
                    return BAD_UNICODE
                pending.append((member, depth + 1))
        elif isinstance(item, list):
            if depth >= depth_limit:
                return TOO_DEEP
            pending.extend((member, depth + 1) for member in item)
    return None


def well_formed(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD: for messages that must reach the user anyway."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


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

_Check = Callable[[Mapping[str, Any]], bool]


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _placement(identity: Any) -> TypeGuard[dict[str, Any]]:
    return (
        isinstance(identity, dict)
        and _is_names(identity.get("path"))
        and _is_count(identity.get("occurrence"))
        and (identity.get("worktreeOwner") is None or _is_str(identity.get("worktreeOwner")))
    )


def _agent_identity(message: Mapping[str, Any]) -> bool:
    identity = message.get("identity")
    return _placement(identity) and _is_str(identity.get("callSite"))


def _conversation(message: Mapping[str, Any]) -> bool:
    convo = message.get("conversation")
    return (
        _placement(convo)
        and _is_str(convo.get("callSite"))
        and _is_str(convo.get("name"))
        and _is_count(message.get("turn"))
    )


def _checkpoint_label(message: Mapping[str, Any]) -> bool:
    label = message.get("label")
    return label is None or _is_str(label)


def _function(message: Mapping[str, Any]) -> bool:
    return _is_str(message.get("name")) and _placement(message.get("identity"))


_SHAPES: Final[dict[str, tuple[_Check, dict[str, str], str]]] = {
    # op: (shape of the fixed fields, fields carrying script values and their names, what the script called)
    "agent": (_agent_identity, {"prompt": "prompt", "options": "options"}, "agent"),
    "turn": (_conversation, {"prompt": "prompt", "options": "options"}, "conversation.run"),
    "checkpoint": (_checkpoint_label, {"value": "input"}, "checkpoint"),
    "phase": (lambda message: True, {"name": "name"}, "phase"),
    "log": (lambda message: True, {"message": "message"}, "log"),
    "function": (_function, {"input": "input"}, "function"),
}


def call_problem(message: Mapping[str, Any]) -> WorkflowError | None:
    """The error a call fails with in the script, or None when the host may serve it."""
    op = str(message.get("op"))
    entry = _SHAPES.get(op)
    if entry is None:
        return WorkflowError("INTERNAL_ERROR", f"Unknown workflow worker call: {well_formed(op)}")
    shape, fields, _ = entry
    if not shape(message):
        return WorkflowError(
            "INVALID_METADATA",
            f"The {op} call reached the host malformed; was a built-in prototype such as "
            "Array.prototype or Object.prototype changed?",
        )
    for field, name in fields.items():
        problem = value_problem(message.get(field))
        if problem is not None:
            function = message.get("name") if op == "function" else None
            return rejection(op, problem, name, function if isinstance(function, str) else None)
    return None


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
