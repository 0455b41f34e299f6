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


# --- JavaScript object and string semantics the validators share -------------------------------

_OBJECT_LIKE_OPAQUE: Final = frozenset({"nullProto", "classInstance", "symbolKey", "cycle"})
_ENTRYLESS_OPAQUE: Final = frozenset({"date", "regexp"})

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim removes.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """`String.prototype.trim` (Python's `str.strip` removes a slightly different set)."""
    return text.strip(JS_WHITESPACE)


def _is_array_index(key: str) -> bool:
    return key == "0" or (key.isascii() and key.isdigit() and key[0] != "0" and int(key) < 2**32 - 1)


def js_key_order(entries: dict[str, Any]) -> dict[str, Any]:
    """Reorder keys as a JS object enumerates them: array indices ascending, then insertion order."""
    indices = [key for key in entries if _is_array_index(key)]
    if not indices:
        return entries
    ordered = {key: entries[key] for key in sorted(indices, key=int)}
    ordered.update((key, item) for key, item in entries.items() if key not in ordered)
    return ordered


def js_object_entries(value: object) -> dict[str, Any] | None:
    """What `Object.entries(value)` sees when `typeof value === "object"` and it is not an array.

    Returns None for values a reference `object(value)` check rejects (null, arrays, primitives,
    functions, BigInt, sparse arrays). Null-prototype objects and class instances expose their
    own keys; Date and RegExp objects are objects without enumerable keys.
    """
    if isinstance(value, dict):
        return js_key_order(value)
    if isinstance(value, JSOpaque):
        if value.kind in _OBJECT_LIKE_OPAQUE:
            inner = value.value if isinstance(value.value, dict) else {}
            return js_key_order(inner)
        if value.kind in _ENTRYLESS_OPAQUE:
            return {}
    return None


def is_js_integer(value: object) -> bool:
    """`Number.isInteger(value)`: a finite number with no fractional part (never a bool)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def utf16_length(text: str) -> int:
    """`text.length` in JavaScript: UTF-16 code units."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def js_number_string(value: int | float) -> str:
    """`String(value)` for a JavaScript number (shortest round-trip digits, JS exponent rules)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) < 2**53:
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent_text = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction.rstrip("0")).lstrip("0") if fraction else whole.lstrip("0")
    # Position of the decimal point relative to the first significant digit (ECMAScript's n).
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    point = len(whole) - leading_zeros + (int(exponent_text) if exponent_text else 0)
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * (-point) + digits
    else:
        exponent = point - 1
        mark = "+" if exponent >= 0 else "-"
        body = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{body}e{mark}{abs(exponent)}"
    return sign + text
