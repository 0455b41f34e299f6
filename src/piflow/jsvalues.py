"""JavaScript value notions that plain JSON cannot carry, shared by validators and the engine."""

from __future__ import annotations

import math
from typing import Any, Final


class _Undefined:
    """JavaScript `undefined`: a value that is present as an argument but absent as JSON."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final = _Undefined()


class JSFunction:
    """A JavaScript function value (only its presence matters to validators)."""

    def __repr__(self) -> str:
        return "JSFunction()"


class JSOpaque:
    """A non-plain JavaScript value (BigInt, Date, class instance, symbol-keyed object...).

    `kind` names what it was; `value` keeps a JSON-ish view where one exists.
    """

    def __init__(self, kind: str, value: Any = None) -> None:
        self.kind = kind
        self.value = value

    def __repr__(self) -> str:
        return f"JSOpaque({self.kind!r})"


def is_json_number(value: object) -> bool:
    """True for a finite int/float that is not a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def is_plain_json(value: object, _seen: set[int] | None = None) -> bool:
    """True when `value` is JSON-compatible: plain dicts/lists, strings, finite numbers, bools, None."""
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, (int, float)):
        return is_json_number(value)
    if isinstance(value, (dict, list)):
        seen = _seen if _seen is not None else set()
        if id(value) in seen:
            return False
        seen.add(id(value))
        items = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
            return False
        ok = all(is_plain_json(item, seen) for item in items)
        seen.discard(id(value))
        return ok
    return False
