"""Output caps of tool replies, as pi applies them: at most 2,000 lines or 50 KB, with a notice.

A capped reply says what was cut and how to get the rest, so the model never mistakes a
truncated listing or file for the whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_LINES: Final = 2000
MAX_BYTES: Final = 50 * 1024
MAX_LINE_CHARS: Final = 500
"""Longest grep match line shown."""


def size(count: int) -> str:
    if count < 1024:
        return f"{count}B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f}KB"
    return f"{count / (1024 * 1024):.1f}MB"


@dataclass(frozen=True)
class Capped:
    lines: list[str]
    total: int
    by_bytes: bool

    @property
    def truncated(self) -> bool:
        return len(self.lines) < self.total


def head(lines: list[str], max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Capped:
    """The first lines that fit both caps (whole lines only)."""
    kept: list[str] = []
    used = 0
    for line in lines[:max_lines]:
        cost = len(line.encode("utf-8", "replace")) + (1 if kept else 0)
        if used + cost > max_bytes:
            return Capped(kept, len(lines), True)
        kept.append(line)
        used += cost
    return Capped(kept, len(lines), False)


def tail(lines: list[str], max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Capped:
    """The last lines that fit both caps (what matters of a command's output is its end)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines[-max_lines:] if max_lines else []):
        cost = len(line.encode("utf-8", "replace")) + (1 if kept else 0)
        if used + cost > max_bytes:
            kept.reverse()
            return Capped(kept, len(lines), True)
        kept.append(line)
        used += cost
    kept.reverse()
    return Capped(kept, len(lines), False)


def short_line(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "... [truncated]"
