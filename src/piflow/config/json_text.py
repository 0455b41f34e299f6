"""Read JSON as Node's `JSON.parse` does, with V8's error wording and the location of every value.

pi reads settings.json and models.json with `JSON.parse`, and the spec's settings messages embed
V8's parser message (`Expected property name or '}' in JSON at position 1 (line 1 column 2)`).
Python's `json` reports other texts and accepts `NaN`, so piflow has its own small parser. It
also records where each value starts, which editor features (diagnostics on settings.json,
go-to-definition of an alias) need. Positions are UTF-16 code units, as in JavaScript.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Final

from piflow.jsvalues import js_key_order

__all__ = ["JsonDocument", "JsonSyntaxError", "Location", "parse_json_document", "parse_json_text"]

_WHITESPACE: Final = frozenset(" \t\n\r")
_DIGITS: Final = frozenset("0123456789")
_ESCAPES: Final = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SPECIAL_SOURCES: Final = frozenset({"[object Object]", "undefined", "Infinity", "NaN"})
_CONTEXT: Final = 10  # V8's kMaxContextCharacters
_MAX_SAFE_INTEGER: Final = 2**53
_MAX_LOCATED_DEPTH: Final = 64  # deeper values are not located (editor features never need them)
_AFTER_JSON: Final = "Unexpected non-whitespace character after JSON"
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Location:
    """Where a value starts: 0-based UTF-16 offset, 1-based line and column (V8's counting)."""

    position: int
    line: int
    column: int


class JsonSyntaxError(ValueError):
    """A `JSON.parse` failure; `message` is V8's text, `location` is None for end-of-input errors."""

    def __init__(self, message: str, location: Location | None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location


@dataclass(frozen=True)
class JsonDocument:
    """A parsed JSON text: the value and where each value (by JSON path) and object key starts."""

    value: Any
    locations: dict[JsonPath, Location] = field(default_factory=dict)
    key_locations: dict[JsonPath, Location] = field(default_factory=dict)

    def location(self, path: JsonPath) -> Location | None:
        """The location of `path`, or of its nearest recorded ancestor."""
        for end in range(len(path), -1, -1):
            found = self.key_locations.get(path[:end]) or self.locations.get(path[:end])
            if found is not None:
                return found
        return None


class _Fail(Exception):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.length = len(text)
        self.index = 0
        self.locations: dict[JsonPath, Location] = {}
        self.key_locations: dict[JsonPath, Location] = {}
        self.error: JsonSyntaxError | None = None
        # V8 counts \r\n, \r and \n each as one line break; offsets are UTF-16 code units.
        self.line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
        self.astral = [] if text.isascii() else [i for i, char in enumerate(text) if ord(char) > 0xFFFF]

    # --- positions ---------------------------------------------------------------------------
    def location_at(self, index: int) -> Location:
        line = bisect_right(self.line_starts, index)
        line_start = self.line_starts[line - 1]
        astral_before = bisect_left(self.astral, index)
        astral_in_line = astral_before - bisect_left(self.astral, line_start)
        return Location(index + astral_before, line, 1 + index - line_start + astral_in_line)

    # --- errors (mirroring V8's JsonParser::ReportUnexpectedToken) ---------------------------
    def fail(self, template: str | None = None, at: int | None = None) -> _Fail:
        index = self.index if at is None else at
        if index >= self.length and template is None:
            self.error = JsonSyntaxError("Unexpected end of JSON input", None)
            return _Fail()
        location = self.location_at(index)
        where = f"at position {location.position} (line {location.line} column {location.column})"
        suffix = f" in JSON {where}"
        if template == _AFTER_JSON:
            message = f"{template} {where}"
        elif template is not None:
            message = template + suffix
        else:
            char = self.text[index]
            if char == '"':
                message = "Unexpected string" + suffix
            elif char in _DIGITS or char == "-":
                message = "Unexpected number" + suffix
            else:
                message = self.unexpected_token(char, index)
        self.error = JsonSyntaxError(message, location)
        return _Fail()

    def unexpected_token(self, char: str, index: int) -> str:
        source = self.text
        if source in _SPECIAL_SOURCES:
            return f'"{source}" is not valid JSON'
        if len(source) <= 2 * _CONTEXT + 1:
            return f"Unexpected token '{char}', \"{source}\" is not valid JSON"
        if index < _CONTEXT:
            return f"Unexpected token '{char}', \"{source[: index + _CONTEXT]}\"... is not valid JSON"
        if index < len(source) - _CONTEXT:
            window = source[index - _CONTEXT : index + _CONTEXT]
            return f"Unexpected token '{char}', ...\"{window}\"... is not valid JSON"
        return f"Unexpected token '{char}', ...\"{source[index - _CONTEXT :]}\" is not valid JSON"

    # --- scanning ----------------------------------------------------------------------------
    def skip_whitespace(self) -> None:
        text, index, length = self.text, self.index, self.length
        while index < length and text[index] in _WHITESPACE:
            index += 1
        self.index = index

    def peek(self) -> str:
        return self.text[self.index] if self.index < self.length else ""

    def parse(self) -> Any:
        value = self.parse_value(())
        self.skip_whitespace()
        if self.index < self.length:
            raise self.fail(_AFTER_JSON)
        return value

    def parse_value(self, path: JsonPath) -> Any:
        # Iterative over containers so deeply nested input cannot exhaust Python's stack; paths
        # stop being tracked (None) below the located depth so deep input stays linear.
        stack: list[tuple[JsonPath | None, dict[str, Any] | list[Any], str | None]] = []
        current_path: JsonPath | None = path
        while True:
            self.skip_whitespace()
            if current_path is not None:
                self.locations[current_path] = self.location_at(self.index)
            char = self.peek()
            value: Any
            if char == "{":
                self.index += 1
                self.skip_whitespace()
                if self.peek() == "}":
                    self.index += 1
                    value = {}
                else:
                    key = self.object_key(current_path, "Expected property name or '}'")
                    stack.append((current_path, {}, key))
                    current_path = _child(current_path, key)
                    continue
            elif char == "[":
                self.index += 1
                self.skip_whitespace()
                if self.peek() == "]":
                    self.index += 1
                    value = []
                else:
                    stack.append((current_path, [], None))
                    current_path = _child(current_path, 0)
                    continue
            else:
                value = self.scalar()
            # Close every container the value completes.
            while stack:
                container_path, container, pending_key = stack[-1]
                if isinstance(container, dict):
                    assert pending_key is not None
                    container[pending_key] = value
                    self.skip_whitespace()
                    char = self.peek()
                    if char == ",":
                        self.index += 1
                        self.skip_whitespace()
                        next_key = self.object_key(container_path, "Expected double-quoted property name")
                        stack[-1] = (container_path, container, next_key)
                        current_path = _child(container_path, next_key)
                        break
                    if char != "}":
                        raise self.fail("Expected ',' or '}' after property value")
                    self.index += 1
                    value = js_key_order(container)
                else:
                    container.append(value)
                    self.skip_whitespace()
                    char = self.peek()
                    if char == ",":
                        self.index += 1
                        current_path = _child(container_path, len(container))
                        break
                    if char != "]":
                        raise self.fail("Expected ',' or ']' after array element")
                    self.index += 1
                    value = container
                stack.pop()
            else:
                return value

    def object_key(self, container_path: JsonPath | None, template: str) -> str:
        if self.peek() != '"':
            raise self.fail(template)
        start = self.index
        key = self.string()
        key_path = _child(container_path, key)
        if key_path is not None:
            self.key_locations[key_path] = self.location_at(start)
        self.skip_whitespace()
        if self.peek() != ":":
            raise self.fail("Expected ':' after property name")
        self.index += 1
        return key

    def scalar(self) -> Any:
        char = self.peek()
        if char == '"':
            return self.string()
        if char == "-" or char in _DIGITS:
            return self.number()
        for literal, value in (("true", True), ("false", False), ("null", None)):
            if char == literal[0]:
                self.literal(literal)
                return value
        raise self.fail()

    def literal(self, literal: str) -> None:
        text = self.text
        for offset in range(1, len(literal)):
            index = self.index + offset
            if index >= self.length:
                self.index = index
                raise self.fail()
            if text[index] != literal[offset]:
                self.index = index
                raise self.fail()
        self.index += len(literal)

    def number(self) -> int | float:
        text, start = self.text, self.index
        index = start
        if text[index] == "-":
            index += 1
            if index >= self.length or text[index] not in _DIGITS:
                raise self.fail("No number after minus sign", index)
        if text[index] == "0":
            index += 1
            if index < self.length and text[index] in _DIGITS:
                self.index = index
                raise self.fail()
        else:
            while index < self.length and text[index] in _DIGITS:
                index += 1
        integral = True
        if index < self.length and text[index] == ".":
            integral = False
            index += 1
            if index >= self.length or text[index] not in _DIGITS:
                raise self.fail("Unterminated fractional number", index)
            while index < self.length and text[index] in _DIGITS:
                index += 1
        if index < self.length and text[index] in "eE":
            integral = False
            index += 1
            if index < self.length and text[index] in "+-":
                index += 1
            if index >= self.length or text[index] not in _DIGITS:
                raise self.fail("Exponent part is missing a number", index)
            while index < self.length and text[index] in _DIGITS:
                index += 1
        self.index = index
        literal = text[start:index]
        if integral and len(literal) < 17:
            return int(literal)
        number = float(literal)
        # JavaScript has one number type: integral values read as int where that is exact.
        if number.is_integer() and abs(number) < _MAX_SAFE_INTEGER:
            return int(number)
        return number

    def string(self) -> str:
        text, length = self.text, self.length
        index = self.index + 1
        parts: list[str] = []
        run_start = index
        while True:
            if index >= length:
                self.index = length
                raise self.fail("Unterminated string")
            char = text[index]
            if char == '"':
                parts.append(text[run_start:index])
                self.index = index + 1
                return "".join(parts)
            if char == "\\":
                parts.append(text[run_start:index])
                index += 1
                if index >= length:
                    self.index = length
                    raise self.fail()
                escape = text[index]
                if escape == "u":
                    code = self.hex4(index + 1)
                    index += 5
                    if 0xD800 <= code <= 0xDBFF and text.startswith("\\u", index):
                        low = _hex4_or_none(text, index + 2)
                        if low is not None and 0xDC00 <= low <= 0xDFFF:
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                            index += 6
                    parts.append(chr(code))
                elif escape in _ESCAPES:
                    parts.append(_ESCAPES[escape])
                    index += 1
                elif ord(escape) > 0xFF:
                    self.index = index
                    raise self.fail()
                else:
                    raise self.fail("Bad escaped character", index)
                run_start = index
                continue
            if char < " ":
                raise self.fail("Bad control character in string literal", index)
            index += 1

    def hex4(self, start: int) -> int:
        for offset in range(4):
            index = start + offset
            if index >= self.length or self.text[index] not in "0123456789abcdefABCDEF":
                if index >= self.length:
                    self.index = index
                    raise self.fail()
                raise self.fail("Bad Unicode escape", index)
        return int(self.text[start : start + 4], 16)


def _child(path: JsonPath | None, step: str | int) -> JsonPath | None:
    if path is None or len(path) >= _MAX_LOCATED_DEPTH:
        return None
    return (*path, step)


def _hex4_or_none(text: str, start: int) -> int | None:
    digits = text[start : start + 4]
    if len(digits) == 4 and all(char in "0123456789abcdefABCDEF" for char in digits):
        return int(digits, 16)
    return None


def parse_json_document(text: str) -> JsonDocument:
    """Parse `text` as `JSON.parse` would; raise `JsonSyntaxError` with V8's message."""
    parser = _Parser(text)
    try:
        value = parser.parse()
    except _Fail:
        assert parser.error is not None
        raise parser.error from None
    return JsonDocument(value, parser.locations, parser.key_locations)


def parse_json_text(text: str) -> Any:
    """The value of `text` (see `parse_json_document`)."""
    return parse_json_document(text).value
