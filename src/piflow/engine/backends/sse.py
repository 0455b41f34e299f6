"""Server-sent events (the `text/event-stream` framing of streaming chat completions).

Decoding follows the WHATWG event-stream rules for the fields chat-completion servers use
(`data`, `event`, `id`, `retry`, `:` comments), with two deliberate departures:

- a line naming any other field is an error rather than ignored, because a server that sends
  one is not speaking SSE (a wrong `baseUrl`, a proxy's error page) and silently skipping it
  would turn a clear configuration error into a vague "the response ended early";
- an event still open when the stream ends is delivered rather than dropped, because some
  servers close the connection right after the last `data:` line without the blank line.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Final

_IGNORED_FIELDS: Final = frozenset({"id", "retry"})


class SseError(Exception):
    """The stream is not a valid event stream."""


@dataclass(frozen=True)
class ServerSentEvent:
    event: str
    data: str


async def server_sent_events(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """Decode an event stream given line by line (without line terminators)."""
    data: list[str] = []
    event = ""
    async for line in lines:
        if line == "":
            if data:
                yield ServerSentEvent(event or "message", "\n".join(data))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name not in _IGNORED_FIELDS:
            raise SseError(f"not an event-stream line: {line[:200]!r}")
    if data:
        yield ServerSentEvent(event or "message", "\n".join(data))
