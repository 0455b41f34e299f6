"""A tiny host for worker tests: answers every call at once through the real client, and records it.

Imported by the other `test_worker_*` modules; it holds no tests itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from piflow.engine.worker.client import WorkerProcess
from piflow.errors import WorkflowError

Handler = Callable[[dict[str, Any]], Any]


def _echo(call: dict[str, Any]) -> Any:
    op = call["op"]
    if op == "agent":
        return f"echo:{call['prompt']}"
    if op == "turn":
        return f"turn{call['turn']}:{call['prompt']}"
    if op == "checkpoint":
        return "approved"
    if op == "function":
        return {"function": call["name"], "input": call["input"]}
    return None


class Host:
    """Echo answers by default; `handlers` override per op (raise `WorkflowError` to fail a call)."""

    def __init__(self, **handlers: Handler) -> None:
        self.handlers = handlers
        self.calls: list[dict[str, Any]] = []

    def __call__(self, call: dict[str, Any]) -> Any:
        self.calls.append(call)
        return self.handlers.get(call["op"], _echo)(call)

    def of(self, op: str) -> list[dict[str, Any]]:
        return [call for call in self.calls if call["op"] == op]


async def run(body: str, host: Host | None = None, **start: Any) -> Any:
    """Run `body` to completion in a real worker process; returns its result or raises its error."""
    worker = WorkerProcess()
    await worker.start(body=body, **start)
    return await worker.serve(host if host is not None else Host())


async def failure(body: str, host: Host | None = None, **start: Any) -> WorkflowError:
    """The error a run of `body` fails with."""
    with pytest.raises(WorkflowError) as caught:
        await run(body, host, **start)
    return caught.value


def reject(code: str, message: str, failed_at: str | None = None) -> Handler:
    """A handler failing every call with this error."""

    def handler(call: dict[str, Any]) -> Any:
        raise WorkflowError(code, message, failed_at=failed_at)

    return handler
