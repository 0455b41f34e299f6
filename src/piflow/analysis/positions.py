"""Positions in a script: UTF-8 bytes (tree-sitter), UTF-16 code units (LSP, inspect) and code points.

tree-sitter reports UTF-8 byte offsets; the LSP speaks UTF-16 `(line, character)` by default and the
reference's inspect offsets are JavaScript string indices (UTF-16). A `TextIndex` converts between
them in O(log n) per query: it records only where the text leaves ASCII, so pure-ASCII scripts (the
common case) convert by identity.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Final

_LSP_LINE_BREAK: Final = re.compile(rb"\r\n|\r|\n")
_NEWLINE: Final = re.compile(rb"\n")
_JS_LINE_BREAK: Final = re.compile("\r\n|[\r\n\u2028\u2029]")
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")


@dataclass(frozen=True, slots=True)
class Position:
    """A zero-based `(line, character)` position; `character` counts UTF-16 code units."""

    line: int
    character: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


@dataclass(frozen=True, slots=True)
class Range:
    """A span of the document: LSP start/end positions plus UTF-16 offsets into the whole text."""

    start: Position
    end: Position
    start_offset: int
    end_offset: int

    def to_json(self) -> dict[str, object]:
        return {
            "start": self.start.to_json(),
            "end": self.end.to_json(),
            "startOffset": self.start_offset,
            "endOffset": self.end_offset,
        }


class TextIndex:
    """Offset conversions for one immutable text.

    Only non-ASCII characters are recorded: for the k-th one, where it starts (as a code-point
    index, a byte offset and a UTF-16 offset) and how many more bytes / UTF-16 units than code
    points the text holds up to its end. A conversion is then one bisection.
    """

    __slots__ = (
        "_astral",
        "_byte_start",
        "_char_start",
        "_extra_bytes",
        "_extra_units",
        "_js_lines",
        "_line_starts",
        "_unit_start",
        "data",
        "is_ascii",
        "text",
    )

    def __init__(self, text: str, data: bytes | None = None) -> None:
        self.text = text
        self.data = text.encode("utf-8", "surrogatepass") if data is None else data
        self.is_ascii = len(self.data) == len(text)
        breaks = _LSP_LINE_BREAK if self.data.find(b"\r") >= 0 else _NEWLINE  # (the latter is faster)
        self._line_starts = [0] + [match.end() for match in breaks.finditer(self.data)]
        self._js_lines: list[int] | None = None
        self._char_start: list[int] = []
        self._byte_start: list[int] = []
        self._unit_start: list[int] = []
        self._extra_bytes: list[int] = []
        self._extra_units: list[int] = []
        self._astral: list[bool] = []
        if not self.is_ascii:
            self._index_non_ascii()

    def _index_non_ascii(self) -> None:
        extra_bytes = 0
        extra_units = 0
        for match in _NON_ASCII.finditer(self.text):
            index = match.start()
            code = ord(match.group())
            self._char_start.append(index)
            self._byte_start.append(index + extra_bytes)
            self._unit_start.append(index + extra_units)
            extra_bytes += (1 if code < 0x800 else 2 if code < 0x10000 else 3) if not 0xD800 <= code < 0xE000 else 2
            extra_units += 1 if code >= 0x10000 else 0
            self._extra_bytes.append(extra_bytes)
            self._extra_units.append(extra_units)
            self._astral.append(code >= 0x10000)

    # -- offsets -----------------------------------------------------------------------------------

    def byte_to_char(self, offset: int) -> int:
        """Code-point index of a byte offset (which must fall on a character boundary)."""
        if self.is_ascii:
            return offset
        k = bisect_left(self._byte_start, offset)
        return offset - (self._extra_bytes[k - 1] if k else 0)

    def byte_to_utf16(self, offset: int) -> int:
        """UTF-16 offset of a byte offset (which must fall on a character boundary)."""
        if self.is_ascii:
            return offset
        k = bisect_left(self._byte_start, offset)
        return offset - (self._extra_bytes[k - 1] - self._extra_units[k - 1] if k else 0)

    def utf16_to_byte(self, offset: int) -> int:
        """Byte offset of a UTF-16 offset; an offset inside a surrogate pair rounds down."""
        if self.is_ascii:
            return offset
        k = bisect_left(self._unit_start, offset)
        if k and self._astral[k - 1] and offset == self._unit_start[k - 1] + 1:
            return self._byte_start[k - 1]
        return offset + (self._extra_bytes[k - 1] - self._extra_units[k - 1] if k else 0)

    def char_to_byte(self, index: int) -> int:
        """Byte offset of a code-point index."""
        if self.is_ascii:
            return index
        k = bisect_left(self._char_start, index)
        return index + (self._extra_bytes[k - 1] if k else 0)

    # -- lines -------------------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_start_byte(self, line: int) -> int:
        """Byte offset where an LSP line starts (lines break at `\\r\\n`, `\\r` and `\\n`)."""
        line = max(0, min(line, len(self._line_starts) - 1))
        return self._line_starts[line]

    def position(self, offset: int) -> Position:
        """LSP position of a byte offset."""
        line = bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[line]
        return Position(line, self.byte_to_utf16(offset) - self.byte_to_utf16(start))

    def offset_at(self, line: int, character: int) -> int:
        """Byte offset of an LSP position, clamped to the line (an out-of-range line clamps to the end)."""
        if line >= len(self._line_starts):
            return len(self.data)
        start = self._line_starts[max(line, 0)]
        end = self._line_starts[line + 1] if line + 1 < len(self._line_starts) else len(self.data)
        target = self.utf16_to_byte(self.byte_to_utf16(start) + max(character, 0))
        return min(target, self._line_content_end(start, end))

    def _line_content_end(self, start: int, end: int) -> int:
        if end > start and self.data[end - 1 : end] == b"\n":
            end -= 1
        if end > start and self.data[end - 1 : end] == b"\r":
            end -= 1
        return end

    def range(self, start: int, end: int) -> Range:
        """The `Range` of a byte span."""
        return Range(self.position(start), self.position(end), self.byte_to_utf16(start), self.byte_to_utf16(end))

    # -- JavaScript (acorn) positions --------------------------------------------------------------

    def js_line_column(self, offset: int) -> tuple[int, int]:
        """acorn's `(line, column)` of a byte offset: 1-based line, 0-based UTF-16 column.

        JavaScript also breaks lines at U+2028/U+2029, which the LSP does not.
        """
        if self._js_lines is None:
            # ASCII text has no U+2028/U+2029 and counts characters as bytes: the LSP lines are JavaScript's
            self._js_lines = (
                self._line_starts
                if self.is_ascii
                else [0] + [match.end() for match in _JS_LINE_BREAK.finditer(self.text)]
            )
        char = self.byte_to_char(offset)
        line = bisect_right(self._js_lines, char) - 1
        start = self.char_to_byte(self._js_lines[line])
        return line + 1, self.byte_to_utf16(offset) - self.byte_to_utf16(start)
