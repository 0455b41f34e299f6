"""`checkpoint({name, prompt, context})` input validation (spec A.9).

The host validates what a script passes before it records an awaiting checkpoint, so a bad
call fails the same way in preflight-adjacent tools, the engine and tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from piflow.errors import WorkflowError
from piflow.jsvalues import JSOpaque, js_number_string, js_object_entries, js_trim

__all__ = ["CheckpointInput", "validate_checkpoint"]

MAX_PROMPT_BYTES: Final = 1024
MAX_CONTEXT_BYTES: Final = 4096
_KEYS: Final = frozenset({"name", "prompt", "context"})
_SHAPE_MESSAGE: Final = "checkpoint requires only name, prompt, and JSON context"
_ESCAPES: Final = {'"': 2, "\\": 2, "\b": 2, "\f": 2, "\n": 2, "\r": 2, "\t": 2}


@dataclass(frozen=True)
class CheckpointInput:
    """A validated checkpoint request; `name` is kept as given (labels use the raw name)."""

    name: str
    prompt: str
    context: Any

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "prompt": self.prompt, "context": _plain(self.context)}

    def __getitem__(self, key: str) -> Any:
        """`checked["prompt"]`: the reference returns a plain object, so item access works too."""
        if key not in ("name", "prompt", "context"):
            raise KeyError(key)
        return getattr(self, key)


def _utf8_length(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def _string_json_bytes(text: str) -> int:
    """UTF-8 length of `JSON.stringify(text)` (quotes and escapes included)."""
    size = 2
    for char in text:
        if char in _ESCAPES:
            size += 2
        elif char < " " or "\ud800" <= char <= "\udfff":
            size += 6  # \u00XX, and a lone surrogate is escaped by well-formed stringify
        else:
            size += len(char.encode("utf-8"))
    return size


def _object_entries(value: Any) -> dict[str, Any] | None:
    """Own entries of a JSON object: plain dicts and null-prototype objects only."""
    if isinstance(value, dict):
        return value
    if isinstance(value, JSOpaque) and value.kind == "nullProto" and isinstance(value.value, dict):
        return value.value
    return None


def json_size(value: Any) -> int | None:
    """UTF-8 size of `JSON.stringify(value)`, or None when `value` is not plain JSON data.

    Plain means: null, booleans, strings, finite numbers, dense arrays and objects whose
    prototype is Object.prototype or null, without cycles. Iterative, so deep data is fine.
    """
    size = 0
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, leaving = stack.pop()
        if leaving:
            active.discard(id(item))
            continue
        if item is None:
            size += 4
        elif item is True or item is False:
            size += 4 if item else 5
        elif isinstance(item, str):
            size += _string_json_bytes(item)
        elif isinstance(item, (int, float)):
            if isinstance(item, float) and not math.isfinite(item):
                return None
            size += len(js_number_string(item))
        else:
            entries = _object_entries(item)
            if entries is None and not isinstance(item, list):
                return None
            if id(item) in active:
                return None
            active.add(id(item))
            stack.append((item, True))
            if entries is not None:
                if not all(isinstance(key, str) for key in entries):
                    return None
                size += 2 + max(len(entries) - 1, 0) + sum(_string_json_bytes(key) + 1 for key in entries)
                stack.extend((child, False) for child in reversed(entries.values()))
            else:
                size += 2 + max(len(item) - 1, 0)
                stack.extend((child, False) for child in reversed(item))
    return size


def _plain(value: Any) -> Any:
    """`value` with null-prototype objects turned into dicts (what JSON round-tripping gives)."""
    entries = _object_entries(value)
    if entries is not None:
        return {key: _plain(item) for key, item in entries.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def validate_checkpoint(value: Any) -> CheckpointInput:
    """Validate a checkpoint request (INVALID_METADATA with the reference's messages)."""
    entries = js_object_entries(value)
    if entries is None or any(key not in _KEYS for key in entries):
        raise WorkflowError("INVALID_METADATA", _SHAPE_MESSAGE)
    name, prompt = entries.get("name"), entries.get("prompt")
    context_size = json_size(entries["context"]) if "context" in entries else None
    if not isinstance(name, str) or not js_trim(name) or not isinstance(prompt, str) or context_size is None:
        raise WorkflowError("INVALID_METADATA", _SHAPE_MESSAGE)
    if _utf8_length(prompt) > MAX_PROMPT_BYTES:
        raise WorkflowError("INVALID_METADATA", f"checkpoint prompt exceeds {MAX_PROMPT_BYTES} UTF-8 bytes")
    if context_size > MAX_CONTEXT_BYTES:
        raise WorkflowError("INVALID_METADATA", f"checkpoint context exceeds {MAX_CONTEXT_BYTES} UTF-8 bytes")
    return CheckpointInput(name, prompt, entries["context"])
