"""JavaScript lexical values in Python: string and number literals, identifier escapes, `trim`.

Static checks compare what a script *means*, so `"revie\\u0077er"` must be the role `reviewer`,
`\\u0061gent(...)` must be an agent call and `1e21` must be an integer, exactly as in JavaScript.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, Final

JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What `String.prototype.trim` removes (WhiteSpace and LineTerminator; Python's `strip()` removes more)."""


def js_trim(value: str) -> str:
    return value.strip(JS_WHITESPACE)


def js_blank(value: str) -> bool:
    """`!value.trim()` for a string."""
    return not js_trim(value)


_IDENTIFIER_ESCAPE: Final = re.compile(r"\\u\{([0-9a-fA-F]+)\}|\\u([0-9a-fA-F]{4})")


def identifier_name(raw: str) -> str:
    """An identifier's name with `\\uXXXX` / `\\u{X}` escapes resolved (acorn's `Identifier.name`)."""
    if "\\" not in raw:
        return raw
    return _IDENTIFIER_ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), raw)


_STRING_ESCAPE: Final = re.compile(
    r"\\(?:u\{([0-9a-fA-F]+)\}|u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([0-7]{1,3})|(\r\n|[\r\n\u2028\u2029])|(.))",
    re.DOTALL,
)
_SIMPLE_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(match: re.Match[str]) -> str:
    braced, four, hex2, octal, continuation, other = match.groups()
    if braced is not None:
        code = int(braced, 16)
        return chr(code) if code <= 0x10FFFF else ""
    if four is not None:
        return chr(int(four, 16))
    if hex2 is not None:
        return chr(int(hex2, 16))
    if octal is not None:
        value = int(octal, 8)
        if value > 255:
            return chr(int(octal[:-1], 8)) + octal[-1]
        return chr(value)
    if continuation is not None:
        return ""
    return _SIMPLE_ESCAPES.get(other, other)


def string_value(raw: str) -> str:
    """The value of a string literal's source text (quotes included)."""
    inner = raw[1:-1]
    if "\\" not in inner:
        return inner
    return join_surrogates(_STRING_ESCAPE.sub(_unescape, inner))


def join_surrogates(value: str) -> str:
    """Combine escaped surrogate pairs into one code point (lone surrogates stay, as in JSON)."""
    if not any("\ud800" <= ch <= "\udfff" for ch in value):
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


_RADIX: Final = {"x": 16, "o": 8, "b": 2}


def number_value(raw: str) -> int | float:
    """The value of a numeric literal (no BigInt suffix), as JavaScript's double.

    Integral values within ±2**53 are returned as `int` so they compare and serialise as JSON does.
    """
    text = raw.replace("_", "")
    lowered = text.lower()
    if len(lowered) > 2 and lowered[0] == "0" and lowered[1] in _RADIX:
        return normalise_number(float(int(lowered[2:], _RADIX[lowered[1]])))
    if len(text) > 1 and text[0] == "0" and text.isdigit():
        # legacy octal (or decimal with a leading zero): a syntax error in strict code anyway
        return normalise_number(float(int(text, 8) if all(c in "01234567" for c in text) else int(text)))
    return normalise_number(float(text))


def bigint_value(raw: str) -> int:
    """The value of a BigInt literal such as `10n` or `0x1fn`."""
    text = raw[:-1].replace("_", "").lower()
    if len(text) > 2 and text[0] == "0" and text[1] in _RADIX:
        return int(text[2:], _RADIX[text[1]])
    return int(text)


def normalise_number(value: float) -> int | float:
    """A double as Python represents JSON numbers: exact integers as `int` (and -0 as 0)."""
    if math.isfinite(value) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def is_js_integer(value: object) -> bool:
    """`Number.isInteger(value)`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value.is_integer())


def js_number_to_string(value: float) -> str:
    """`String(number)` (ECMAScript Number::toString, radix 10)."""
    if isinstance(value, int):
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value < 0:
        return "-" + js_number_to_string(-value)
    mantissa, _, exponent = repr(value).partition("e")
    digits = mantissa.replace(".", "")
    point = mantissa.index(".") if "." in mantissa else len(mantissa)
    n = point + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    sign = "+" if n - 1 >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{head}e{sign}{abs(n - 1)}"


_ARRAY_INDEX: Final = re.compile(r"^(?:0|[1-9][0-9]*)$")


def js_object(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """A dict with JavaScript's own-key order: array-index keys ascending first, then insertion order.

    A repeated key keeps its first position and its last value, as in an object literal.
    """
    result: dict[str, Any] = {}
    for key, value in pairs:
        result[key] = value
    if not any(_ARRAY_INDEX.match(key) and int(key) < 2**32 - 1 for key in result):
        return result
    indices = sorted((key for key in result if _ARRAY_INDEX.match(key) and int(key) < 2**32 - 1), key=int)
    ordered = {key: result[key] for key in indices}
    ordered.update((key, value) for key, value in result.items() if key not in ordered)
    return ordered
