"""A real chat-completions HTTP server on loopback for backend tests.

It runs `http.server` in a background thread on 127.0.0.1 (HTTP/1.1, chunked streaming, like a
real provider), answers each POST with the next scripted reply and records every request. Replies:

- `Stream`: server-sent events (dict chunks as `data: <json>`, strings written verbatim), then
  `data: [DONE]`; optionally slow, or cut off mid-body (`truncate`).
- `Body`: one complete body with a status code (JSON or any text).
- `Hang`: a stream that only sends keep-alive comments until the client goes away, which sets
  `disconnected` — how tests see that cancellation closed the connection.

The chunk builders make OpenAI-shaped `chat.completion.chunk`s.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


class Reply(Protocol):
    def send(self, handler: _Handler) -> None: ...


@dataclass(frozen=True)
class Stream:
    chunks: Sequence[dict[str, Any] | str]
    done: bool = True
    delay: float = 0.0
    truncate: bool = False

    def send(self, handler: _Handler) -> None:
        handler.start_chunked(200, "text/event-stream")
        for chunk in self.chunks:
            if self.delay:
                time.sleep(self.delay)
            text = chunk if isinstance(chunk, str) else f"data: {json.dumps(chunk)}\n\n"
            handler.write_chunk(text.encode())
        if self.truncate:
            handler.close_connection = True
            return
        if self.done:
            handler.write_chunk(b"data: [DONE]\n\n")
        handler.end_chunks()


@dataclass(frozen=True)
class Body:
    body: Any
    status: int = 200
    content_type: str = "application/json"

    def send(self, handler: _Handler) -> None:
        data = (self.body if isinstance(self.body, str) else json.dumps(self.body)).encode()
        handler.send_response(self.status)
        handler.send_header("Content-Type", self.content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


@dataclass(frozen=True)
class Hang:
    interval: float = 0.05
    limit: float = 10.0

    def send(self, handler: _Handler) -> None:
        handler.start_chunked(200, "text/event-stream")
        handler.close_connection = True
        deadline = time.monotonic() + self.limit
        try:
            while time.monotonic() < deadline:
                handler.write_chunk(b": keep-alive\n\n")
                time.sleep(self.interval)
        except OSError:
            handler.chat.disconnected.set()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    @property
    def chat(self) -> ChatServer:
        return self.server.chat

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.chat.requests.append(Recorded(self.path, headers, json.loads(raw)))
        self.chat.next_reply().send(self)

    def start_chunked(self, status: int, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: failures show in assertions, not on stderr."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, chat: ChatServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.chat = chat

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up mid-response is what failing and cancelled attempts do."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class ChatServer:
    """Scripted replies in order; an unscripted request gets a 500 naming the problem."""

    requests: list[Recorded] = field(default_factory=list)
    disconnected: threading.Event = field(default_factory=threading.Event)
    _replies: deque[Reply] = field(default_factory=deque)
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def script(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    def next_reply(self) -> Reply:
        if not self._replies:
            return Body({"error": {"message": "no scripted reply left"}}, status=500)
        return self._replies.popleft()

    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    data: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        data["prompt_tokens_details"] = {"cached_tokens": cached}
    return data


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "m1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(counts: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [], "usage": counts}


def _pieces(text: str, parts: int = 3) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_stream(
    text: str, *, reasoning: str = "", counts: dict[str, Any] | None = None
) -> list[dict[str, Any] | str]:
    chunks: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": piece}) for piece in _pieces(reasoning)]
    chunks += [chunk({"content": piece}) for piece in _pieces(text)]
    chunks.append(chunk({}, finish="stop"))
    if counts is not None:
        chunks.append(usage_chunk(counts))
    return chunks


def tool_stream(
    name: str, arguments: Any, *, call_id: str = "call_1", counts: dict[str, Any] | None = None
) -> list[dict[str, Any] | str]:
    """One tool call, streamed as OpenAI does: id and name first, then the arguments in pieces."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    start = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    chunks: list[dict[str, Any] | str] = [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [start]}),
    ]
    chunks += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in _pieces(text)]
    chunks.append(chunk({}, finish="tool_calls"))
    if counts is not None:
        chunks.append(usage_chunk(counts))
    return chunks


def completion(
    content: str | None, *, tool_calls: list[dict[str, Any]] | None = None, counts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A non-streaming `chat.completion` body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }
    if counts is not None:
        body["usage"] = counts
    return body
