"""A tiny host for worker tests: answers every call at once through the real client, and records it.

Imported by the other `test_worker_*` modules; it holds no tests itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.protocol import AgentCall, CheckpointCall, FunctionCall, TurnCall, WorkerCall
from piflow.errors import WorkflowError

Handler = Callable[[Any], Any]
"""Answers one typed call (`piflow.engine.worker.protocol`); each handler serves the op it is named after."""


def _echo(call: WorkerCall) -> Any:
    match call:
        case AgentCall():
            return f"echo:{call.prompt}"
        case TurnCall():
            return f"turn{call.turn}:{call.prompt}"
        case CheckpointCall():
            return "approved"
        case FunctionCall():
            return {"function": call.name, "input": call.input}
    return None


class Host:
    """Echo answers by default; `handlers` override per op (raise `WorkflowError` to fail a call)."""

    def __init__(self, **handlers: Handler) -> None:
        self.handlers = handlers
        self.calls: list[WorkerCall] = []

    def __call__(self, call: WorkerCall) -> Any:
        self.calls.append(call)
        return self.handlers.get(call.op, _echo)(call)

    def of(self, op: str) -> list[Any]:
        return [call for call in self.calls if call.op == op]


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

    def handler(call: WorkerCall) -> Any:
        raise WorkflowError(code, message, failed_at=failed_at)

    return handler
