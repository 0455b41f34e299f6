"""Fuzzing the LSP wire of one live `piflow serve --stdio`: thousands of random and mutated JSON-RPC
messages, and every request (a message with a method and an integer or string id) gets exactly one
response; the server is still alive and answers hover and completion correctly at the end.

Seeded, so a failure replays: the seed is in the test id.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from lsp_wire import SCRIPT, RawServer, frame, isolated_project, uri_of

MESSAGES = 3000
METHODS = [
    "textDocument/hover",
    "textDocument/completion",
    "textDocument/definition",
    "textDocument/documentSymbol",
    "textDocument/codeLens",
    "textDocument/inlayHint",
    "textDocument/codeAction",
    "textDocument/diagnostic",
    "completionItem/resolve",
    "codeLens/resolve",
    "workspace/executeCommand",
    "workspace/symbol",
    "$/cancelRequest",
    "textDocument/didChange",
    "textDocument/didOpen",
    "textDocument/didClose",
    "textDocument/didSave",
    "workspace/didChangeConfiguration",
    "workspace/didChangeWatchedFiles",
    "$/setTrace",
    "piflow/unknown",
    "",
]
SAFE_COMMANDS = ["piflow.listRuns", "piflow.showRun", "piflow.showAgent", "piflow.showErrors", "piflow.nothing"]
"""Commands that never start, stop or answer a run (those are tested one by one elsewhere)."""
STRINGS = [
    "",
    "a",
    "\ud800",
    "\udfff\ud800",
    "é😀",
    "file:///dev/zero",
    "file:///",
    "untitled:x",
    "%%%",
    "x" * 5000,
    "\x00",
]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 4 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31 - 1, 2**31, 2**53, -(2**63), 10**30, rng.randrange(-100, 100)])
    if kind == 3:
        return rng.choice([0.5, -1.5, 1e308, float("nan"), float("inf")])
    if kind in (4, 5, 6):
        return rng.choice(STRINGS)
    if kind in (7, 8):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(["uri", "line", "character", "textDocument", "position", "range", "x"]): random_value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


class Fuzzer:
    def __init__(self, rng: random.Random, uri: str) -> None:
        self.rng, self.uri = rng, uri
        self.ids = 0
        self.unowed: set[int | str] = set()

    def fresh_id(self) -> int | str:
        self.ids += 1
        return self.ids if self.rng.random() < 0.7 else f"fuzz-{self.ids}"

    def position(self) -> dict[str, Any]:
        return {"line": self.rng.choice([0, 1, 2, 3, 50]), "character": self.rng.choice([0, 5, 21, 30, 200])}

    def params(self, method: str) -> Any:
        document = {"uri": self.rng.choice([self.uri, self.uri, "file:///nowhere.workflow.js", "untitled:y"])}
        span = {"start": self.position(), "end": self.position()}
        if method == "workspace/executeCommand":
            return {"command": self.rng.choice(SAFE_COMMANDS), "arguments": [random_value(self.rng)]}
        if method == "textDocument/didChange":
            return {
                "textDocument": {**document, "version": self.rng.randrange(2, 10_000)},
                "contentChanges": [{"range": span, "text": self.rng.choice([*STRINGS[:6], "agent(", "\n", "})"])}],
            }
        if method == "$/cancelRequest":
            return {"id": self.rng.randrange(max(1, self.ids))}
        return {
            "textDocument": document,
            "position": self.position(),
            "range": span,
            "context": {"diagnostics": [], "triggerKind": 1},
            "query": "a",
            "label": "x",
        }

    def valid(self) -> dict[str, Any]:
        method = self.rng.choice(METHODS)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": self.params(method)}
        if not method.startswith(("textDocument/did", "workspace/did", "$/")) or self.rng.random() < 0.2:
            message["id"] = 0
        return message

    def mutate(self, value: Any, depth: int = 0) -> Any:
        """Replace, drop or retype one part of `value` (somewhere below its top)."""
        if not isinstance(value, (dict, list)) or not value or (depth > 0 and self.rng.random() < 0.3):
            return random_value(self.rng)
        if isinstance(value, dict):
            key = self.rng.choice(list(value))
            if self.rng.random() < 0.25:
                return {k: v for k, v in value.items() if k != key}
            return {**value, key: self.mutate(value[key], depth + 1)}
        index = self.rng.randrange(len(value))
        return [*value[:index], self.mutate(value[index], depth + 1), *value[index + 1 :]]

    def next(self) -> tuple[bytes, int | str | None]:
        """A frame body, and the id whose single response it demands (None: no response is owed)."""
        roll = self.rng.random()
        if roll < 0.05:
            return bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 60))), None
        if roll < 0.10:
            text = json.dumps(self.valid())
            return text[: int(len(text) * self.rng.random())].encode(), None  # (same draws whatever the URI)
        if roll < 0.13:
            return json.dumps(random_value(self.rng)).encode(), None
        message: Any = self.valid()
        for _ in range(self.rng.choice([0, 1, 1, 2, 3])):
            message = self.mutate(message)
        owed: int | str | None = None
        if isinstance(message, dict) and type(message.get("id")) in (int, str):
            message["id"] = self.fresh_id()  # unique, so that replies can be counted
            if "method" in message:
                owed = message["id"]
            else:  # a response to nothing, or a malformed one: at most one reply may come
                self.unowed.add(message["id"])
        return json.dumps(message).encode("utf-8", "surrogatepass"), owed


@pytest.mark.parametrize("seed", [1404, 2718])
def test_every_request_gets_exactly_one_response(tmp_path: Path, seed: int) -> None:
    root, env = isolated_project(tmp_path)
    server = RawServer(env, root, tmp_path / "server.log")
    try:
        server.initialize(root)
        path = root / "a.workflow.js"
        path.write_text(SCRIPT)
        uri = uri_of(path)
        server.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "javascript", "version": 1, "text": SCRIPT}},
        )
        fuzzer = Fuzzer(random.Random(seed), uri)
        before = set(server.responses)  # initialize's
        owed: list[int | str] = []
        started = time.monotonic()
        for _ in range(MESSAGES):
            body, msg_id = fuzzer.next()
            server.send_bytes(frame(body))
            if msg_id is not None:
                owed.append(msg_id)
        assert len(owed) > MESSAGES // 3  # the storm is mostly requests
        for msg_id in owed:  # generous: the whole batch shares one deadline on a loaded machine
            server.response(msg_id, timeout=max(5.0, 90 - (time.monotonic() - started)))
        time.sleep(0.5)  # a duplicate response would have arrived by now
        duplicated = {
            msg_id: replies for msg_id, replies in server.responses.items() if msg_id is not None and len(replies) > 1
        }
        assert not duplicated
        assert set(owed) <= set(server.responses) - before - {None} <= set(owed) | fuzzer.unowed
        assert server.alive()
        assert_answers_correctly(server, root)
    finally:
        server.close()


def assert_answers_correctly(server: RawServer, root: Path) -> None:
    """A document opened after the storm gets a real hover and real model completions."""
    path = root / "final.workflow.js"
    path.write_text(SCRIPT)
    uri = uri_of(path)
    server.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "javascript", "version": 1, "text": SCRIPT}}
    )
    line = SCRIPT.splitlines()[1]
    hover = server.result(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 1, "character": line.index("agent") + 1}},
    )
    assert "agent" in json.dumps(hover)
    inside_model = line.index('"openai/') + 1
    completion = server.result(
        "textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": inside_model}}
    )
    items = completion["items"] if isinstance(completion, dict) else completion
    assert any("gpt-4o" in item["label"] for item in items), items
