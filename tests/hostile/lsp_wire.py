"""A raw LSP client for hostile tests: writes arbitrary bytes to a real `piflow serve --stdio` and
reads what comes back, frame by frame, with timeouts.

pytest-lsp cannot send a broken frame or a request before `initialize`; this client can. Server
requests (registrations, refreshes, progress tokens) are answered with `null` so the server never
waits on the test; everything else is recorded for assertions.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from pygls.uris import from_fs_path

from isolation import isolated_environment

SERVER_COMMAND = [sys.executable, "-m", "piflow", "serve", "--stdio"]
MODELS = {
    "providers": {
        "openai": {
            "baseUrl": "https://api.openai.com/v1",
            "api": "openai-completions",
            "apiKey": "sk-test",
            "models": [{"id": "gpt-4o"}, {"id": "gpt-4o-mini"}],
        }
    }
}
SCRIPT = (
    'phase("draft");\n'
    'const draft = await agent("Write a haiku", { label: "poet", model: "openai/gpt-4o" });\n'
    "return { draft };\n"
)


def isolated_project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A project using the scripted backend, and an environment in which nothing of the developer's leaks."""
    home, project = tmp_path / "home", tmp_path / "project"
    agent = home / ".pi" / "agent"
    (agent / "pi-extensible-workflows").mkdir(parents=True)
    project.mkdir()
    (agent / "models.json").write_text(json.dumps(MODELS))
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    env = isolated_environment(tmp_path, home, agent)
    return project, env


def uri_of(path: Path) -> str:
    uri = from_fs_path(str(path))
    assert uri is not None
    return str(uri)


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """One `piflow serve --stdio` process and the messages it has sent."""

    def __init__(self, env: dict[str, str], cwd: Path, stderr: Path) -> None:
        self._stderr = stderr.open("wb")
        self.process = subprocess.Popen(
            SERVER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd
        )
        self.responses: dict[Any, list[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self._arrived: queue.Queue[dict[str, Any]] = queue.Queue()
        self._outbox: queue.Queue[bytes] = queue.Queue()
        self._ids = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    # -- sending --------------------------------------------------------------------------------
    def send_bytes(self, data: bytes) -> None:
        """Queue `data` for the server. One writer thread: the reader must never wait on a full pipe
        (it answers server requests), or client and server would wait on each other for ever."""
        self._outbox.put(data)

    def _write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        with contextlib.suppress(OSError, ValueError):  # the server exited (or was killed)
            while True:
                stdin.write(self._outbox.get())
                stdin.flush()

    def send(self, message: Any) -> None:
        self.send_bytes(frame(json.dumps(message).encode()))

    def request(self, method: str, params: Any = None) -> int:
        msg_id = self.next_id()
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def next_id(self) -> int:
        return next(self._ids) + 1_000_000

    # -- receiving ------------------------------------------------------------------------------
    def response(self, msg_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The (first) response to `msg_id`, waiting for it."""
        deadline = time.monotonic() + timeout
        while msg_id not in self.responses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response to {msg_id!r} within {timeout} s")
            with contextlib.suppress(queue.Empty):
                self._arrived.get(timeout=min(remaining, 0.5))
        return self.responses[msg_id][0]

    def call(self, method: str, params: Any = None, timeout: float = 30) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def result(self, method: str, params: Any = None, timeout: float = 30) -> Any:
        reply = self.call(method, params, timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def errors_without_id(self) -> list[dict[str, Any]]:
        return [reply["error"] for reply in self.responses.get(None, [])]

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while (message := _read_message(stdout)) is not None:
            if "method" in message and "id" in message:  # a server request: never keep it waiting
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                self.notifications.append(message)
            elif "method" in message:
                self.notifications.append(message)
            else:
                self.responses.setdefault(message.get("id"), []).append(message)
            self._arrived.put(message)

    # -- lifecycle ------------------------------------------------------------------------------
    def initialize(self, root: Path) -> dict[str, Any]:
        result = self.result(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": uri_of(root),
                "capabilities": {"general": {"positionEncodings": ["utf-16"]}},
                "workspaceFolders": [{"uri": uri_of(root), "name": "project"}],
            },
        )
        self.notify("initialized", {})
        assert isinstance(result, dict)
        return result

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout)

    def close(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        self._stderr.close()


def _read_message(stdout: IO[bytes]) -> dict[str, Any] | None:
    """One message the server wrote (strictly framed: the server must never write a broken frame)."""
    length = None
    while True:
        line = stdout.readline()
        if not line:
            return None
        if line == b"\r\n":
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None, "a frame from the server without Content-Length"
    body = stdout.read(length)
    if len(body) < length:
        return None
    message: dict[str, Any] = json.loads(body)
    return message
