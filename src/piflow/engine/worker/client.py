"""The host's end of a worker: spawn it, receive its primitive calls, settle them, collect the result.

The host sends `{"t":"compile","body":B,"dialect"?:D}` (as soon as the body is known: the worker
compiles it while the host validates), then `{"t":"start","args":A,"functions":[...],"variables":{...},
"workflow"?:W}` (W: a pi-subagents run's pragma fields)
and later `{"t":"settle","results":[...]}` lines.

Messages the worker sends (one JSON object per line, ids increasing in script call order):

* `{"t":"hb"}` every second;
* `{"t":"call","id":N,"op":"agent","prompt":P,"options":O,"identity":{"callSite":"s:e","path":[...],
  "occurrence":n,"worktreeOwner":str|null}}`;
* `{"t":"call","id":N,"op":"turn","prompt":P,"options":O,"conversation":{"name":trimmed,"callSite":"s:e",
  "path":[...],"occurrence":n,"worktreeOwner":str|null},"turn":t}`;
* `{"t":"call","id":N,"op":"checkpoint","value":V,"label":"name"|"name#2"|null}` (null: the host
  rejects the value, spec A.9);
* `{"t":"call","id":N,"op":"phase","name":V}`, `{"t":"call","id":N,"op":"log","message":V}`;
* `{"t":"call","id":N,"op":"function","name":F,"input":V,"identity":{"path":[...],"occurrence":n,
  "worktreeOwner":str|null}}`;
* pi-subagents scripts (SUBAGENTS_SPEC A): `{"t":"call","id":N,"op":"children","items":[{key,params}],
  "batch":bool}`, `{"op":"steer","key":K,"message":M,"options":O}`, `{"op":"status","target":T}`,
  `{"op":"emit","value":V}`, `{"op":"console","level":L,"text":T}`, `{"op":"state","action":"get"|"set",
  "key":K,"value"?:V}` (each with `"t":"call","id":N`);
* `{"t":"done","ok":true,"value":V}` or `{"t":"done","ok":false,"error":{code,message,failedAt?,authored}}`.

Values a script passes go through `JSON.stringify` (functions and `undefined` members vanish, an
`undefined` argument becomes null); the host validates them (`boundary.admit`) and hands each call
out as a typed `WorkerCall`. A call is answered with a `Settled`, sent as
`{"id":N,"ok":true,"value":V}` or `{"id":N,"ok":false,"error":{code,message,failedAt?,authored}}`; agent
outcome codes (AGENT_TIMEOUT, AGENT_FAILED, RESULT_INVALID) fail only the script's promise, any
other code also fails the run if the script leaves the call unawaited.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from subprocess import PIPE
from typing import Any, Final

import anyio
from anyio.abc import Process

from piflow.engine.worker import boundary
from piflow.engine.worker.protocol import (
    DEFAULT_HEAP_LIMIT,
    DEFAULT_MEMORY_LIMIT,
    HEARTBEAT_TIMEOUT,
    NOT_JSON,
    OVERSIZED,
    RPC_LIMIT_BYTES,
    SETTLE_HEAD,
    SETTLE_TAIL,
    Settled,
    WorkerCall,
    encode,
    error_from_json,
)
from piflow.errors import WorkflowError

_ITEMS_ROOM: Final = RPC_LIMIT_BYTES - len(SETTLE_HEAD) - len(SETTLE_TAIL)
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[3])
_UNDECODED: Final = object()
"""A line `_decode_all` left to be decoded alone."""
_SECONDS_IN_WORDS: Final = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def unresponsive_message(timeout: float) -> str:
    """The reference's `WORKER_UNRESPONSIVE` message, naming the timeout actually in force
    (five seconds by default, which gives the reference's exact words)."""
    whole = int(timeout)
    words = _SECONDS_IN_WORDS[whole - 1] if whole == timeout and 1 <= whole <= 10 else f"{timeout:g}"
    return f"Workflow worker missed its {words}-second heartbeat"


Answer = Callable[[WorkerCall], Any]
"""Computes a call's value; raises `WorkflowError` to fail it."""


class WorkerProcess:
    """One script execution in a child process.

    Usage: `start(...)` (after an early `spawn()`/`compile()` when the host has work to overlap), then
    iterate `calls()` to its end while answering with `settle(...)` (from any task), then
    `wait_done()`; `kill()` cancels at any point and is safe to call again afterwards.
    The reading happens inside `calls()`, so the heartbeat watch runs while it is being iterated.
    """

    def __init__(
        self,
        *,
        heartbeat_timeout: float = HEARTBEAT_TIMEOUT,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        heap_limit: int = DEFAULT_HEAP_LIMIT,
        python: str = sys.executable,
        log: Path | None = None,
    ) -> None:
        """`log`: the file the worker's stderr goes to (a Python traceback must not reach a terminal);
        without one, the worker shares the host's stderr."""
        self._log = log
        self._heartbeat_timeout = heartbeat_timeout
        self._memory_limit = memory_limit
        self._heap_limit = heap_limit
        self._python = python
        self._process: Process | None = None
        self._write_lock = anyio.Lock()
        self._outcome: tuple[Any, WorkflowError | None] | None = None
        self._finished = anyio.Event()
        self._refused: list[Settled] = []
        """Answers to calls refused at the boundary, sent before the batch they came with is handed out."""
        self._body: str | None = None
        """The script body handed to the worker (`compile`)."""
        self._started = False

    async def spawn(self) -> None:
        """Start the worker process now, so its interpreter and imports overlap the host's launch work
        (validation, snapshot, store writes); `compile` and `start` hand it the script later."""
        if self._process is not None:
            raise RuntimeError("WorkerProcess.spawn() called twice")
        stderr: Any = None
        if self._log is not None:
            self._log.parent.mkdir(parents=True, exist_ok=True)
            stderr = self._log.open("ab")
        try:
            self._process = await anyio.open_process(
                [
                    *(self._python, "-m", "piflow.engine.worker"),
                    *("--memory-limit", str(self._memory_limit), "--heap-limit", str(self._heap_limit)),
                ],
                stdin=PIPE,
                stdout=PIPE,
                stderr=stderr,
                env=worker_environment(os.environ),
                start_new_session=True,
            )
        finally:
            if stderr is not None:
                stderr.close()  # the worker has its own copy

    @property
    def log(self) -> Path | None:
        return self._log

    def move_log(self, log: Path) -> None:
        """Give a spawned worker's log its final name (a worker spawned before its run had an id)."""
        if self._log is not None and self._log != log:
            log.parent.mkdir(parents=True, exist_ok=True)
            with suppress(FileNotFoundError):
                os.replace(self._log, log)
        self._log = log

    async def compile(self, body: str, dialect: str | None = None) -> None:
        """Hand the worker the script body now (spawning it first unless `spawn()` did), so it
        instruments and compiles it while the host still validates the run; `start` runs it.

        `dialect` "pi-subagents" runs the body as that dialect's script (`runtime.SUBAGENTS_DIALECT`).
        """
        if self._body is not None:
            raise RuntimeError("WorkerProcess.compile() called twice")
        message = {"t": "compile", "body": body}
        if dialect is not None:
            message["dialect"] = dialect
        try:
            encoded = encode(message)
        except (TypeError, ValueError):
            raise WorkflowError("RPC_LIMIT_EXCEEDED", NOT_JSON) from None
        self._body = body
        if self._process is None:
            await self.spawn()
        await self._send(encoded)

    async def start(
        self,
        *,
        body: str,
        args: Any = None,
        functions: Sequence[str] = (),
        variables: Mapping[str, Any] | None = None,
        dialect: str | None = None,
        workflow: Mapping[str, Any] | None = None,
    ) -> None:
        """Run `body` (compiled first unless `compile` already has it); args must be JSON of at most
        10 MiB (spec A.1). `workflow` is a pi-subagents run's pragma fields (its child `defaults`)."""
        if self._started:
            raise RuntimeError("WorkerProcess.start() called twice")
        start = {"t": "start", "args": args, "functions": list(functions), "variables": dict(variables or {})}
        if workflow:
            start["workflow"] = dict(workflow)
        try:
            args_size = len(encode(args)) - 1
            encoded_start = encode(start)
        except (TypeError, ValueError):
            raise WorkflowError("RPC_LIMIT_EXCEEDED", NOT_JSON) from None
        if args_size > RPC_LIMIT_BYTES:
            raise WorkflowError("RPC_LIMIT_EXCEEDED", OVERSIZED)
        if self._body is None:
            await self.compile(body, dialect)
        elif self._body != body:
            raise RuntimeError("WorkerProcess.start() got another body than the one compiled")
        self._started = True
        await self._send(encoded_start)

    async def calls(self) -> AsyncIterator[WorkerCall]:
        """Every call message, in order, until the worker finishes (successfully or not)."""
        async for batch in self._batches():
            for call in batch:
                yield call

    async def settle(self, results: Iterable[Settled]) -> None:
        """Answer calls; results are delivered in the given order, in as few messages as fit 10 MiB."""
        lines: list[bytes] = []
        items: list[bytes] = []
        size = 0
        for result in results:
            item = _encode_result(result)
            if items and size + 1 + len(item) > _ITEMS_ROOM:
                lines.append(_settle_line(items))
                items, size = [], 0
            size += len(item) + (1 if items else 0)
            items.append(item)
        if items:
            lines.append(_settle_line(items))
        if lines:
            await self._send(b"".join(lines))

    async def serve(self, answer: Answer) -> Any:
        """Answer every call with `answer` (each batch the worker sends is settled at once); return the result."""
        try:
            async for batch in self._batches():
                results: list[Settled] = []
                for call in batch:
                    try:
                        results.append(Settled(call.id, answer(call)))
                    except WorkflowError as exc:
                        results.append(Settled(call.id, error=exc))
                await self.settle(results)
            return await self.wait_done()
        finally:
            with anyio.CancelScope(shield=True):
                await self.kill()

    async def wait_done(self) -> Any:
        """The script's result; raises the run's `WorkflowError` when it failed."""
        await self._finished.wait()
        assert self._outcome is not None
        value, error = self._outcome
        if error is not None:
            raise error
        return value

    async def kill(self) -> None:
        """Stop the worker now; if it had not finished, the run fails with CANCELLED."""
        self._finish(None, WorkflowError("CANCELLED", "Workflow cancelled"))
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with suppress(ProcessLookupError):
                # Not `process.kill()`: `Popen.send_signal` first polls the child with waitpid, and
                # when the worker has just exited that reaps it under asyncio's child watcher, which
                # then logs "Unknown child process pid …, will report returncode 255".
                os.kill(process.pid, signal.SIGKILL)
        await process.aclose()

    # -- internals ----------------------------------------------------------------------------
    def _finish(self, value: Any, error: WorkflowError | None) -> None:
        """Record the first outcome; later ones (a kill after `done`, EOF after a failure) are ignored."""
        if self._outcome is None:
            self._outcome = (value, error)
            self._finished.set()

    async def _fail(self, error: WorkflowError) -> None:
        self._finish(None, error)
        await self.kill()

    async def _send(self, data: bytes) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise RuntimeError("WorkerProcess.start() has not been called")
        # A worker that is gone cannot be answered; reading its output tells why it went.
        async with self._write_lock:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.send(data)

    async def _batches(self) -> AsyncIterator[list[WorkerCall]]:
        """Calls grouped as they arrive; also watches heartbeats, limits, `done` and the exit code."""
        process = self._process
        if process is None or process.stdout is None:
            raise RuntimeError("WorkerProcess.start() has not been called")
        pending = bytearray()
        while self._outcome is None:
            chunk: bytes | None = b""
            with anyio.move_on_after(self._heartbeat_timeout):
                try:
                    chunk = await process.stdout.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    chunk = None
            if chunk is None:
                await self._exited(process)
                return
            if not chunk:
                await self._fail(WorkflowError("WORKER_UNRESPONSIVE", unresponsive_message(self._heartbeat_timeout)))
                return
            scanned = len(pending)
            pending += chunk
            lines: list[bytes] = []
            start = 0
            while (end := pending.find(b"\n", max(start, scanned))) >= 0:
                lines.append(bytes(pending[start:end]))
                start = end + 1
            del pending[:start]
            batch: list[WorkerCall] = []
            for line, decoded in zip(lines, _decode_all(lines), strict=True):
                message = self._message(line, decoded)
                if message is not None:
                    batch.append(message)
            if self._refused:
                refused, self._refused = self._refused, []
                await self.settle(refused)
            if len(pending) > RPC_LIMIT_BYTES:
                self._finish(None, WorkflowError("RPC_LIMIT_EXCEEDED", OVERSIZED))
            if self._outcome is not None:
                # Finished, or failed: calls sent alongside a failure start no new work.
                await self.kill()
                return
            if batch:
                yield batch

    def _message(self, line: bytes, decoded: Any = _UNDECODED) -> WorkerCall | None:
        """A call to hand out, or None (heartbeat, `done`, a call refused at the boundary, or a fault).

        `decoded`: the line's JSON when `_decode_all` could decode it with its batch. Calls whose
        values cannot cross into the host (`boundary`) are answered here with their error, so the
        engine only ever sees well-formed calls.
        """
        if self._outcome is not None:
            return None
        if len(line) > RPC_LIMIT_BYTES:
            self._finish(None, WorkflowError("RPC_LIMIT_EXCEEDED", OVERSIZED))
            return None
        try:
            message = json.loads(line) if decoded is _UNDECODED else decoded
        except RecursionError:
            self._undecodable(line)
            return None
        except ValueError:
            self._finish(None, WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message"))
            return None
        kind = message.get("t") if isinstance(message, dict) else None
        if kind == "call" and isinstance(message.get("id"), int) and isinstance(message.get("op"), str):
            call = boundary.admit(message["id"], message)
            if not isinstance(call, WorkflowError):
                return call
            self._refused.append(Settled(message["id"], error=call))
        elif kind == "done":
            if message.get("ok") is True:
                value = message.get("value")
                self._finish(value, boundary.result_problem(value))
            else:
                self._finish(None, error_from_json(message.get("error")))
        elif kind != "hb":
            self._finish(None, WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message"))
        return None

    def _undecodable(self, line: bytes | bytearray) -> None:
        """A message nested too deeply for Python's JSON decoder: fail its call, or the run."""
        kind, call_id, op = boundary.undecodable(line)
        if kind == "call" and call_id is not None and op is not None:
            self._refused.append(Settled(call_id, error=boundary.rejection(op, boundary.TOO_DEEP)))
        elif kind == "done":
            self._finish(None, WorkflowError("RESULT_INVALID", f"Workflow result {boundary.TOO_DEEP}"))
        else:
            self._finish(None, WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message"))

    async def _exited(self, process: Process) -> None:
        code = await process.wait()
        message = f"Workflow child exited with code {code}{self._last_words()}"
        self._finish(None, WorkflowError("INTERNAL_ERROR", message))
        await self.kill()

    def _last_words(self) -> str:
        """The last line the worker wrote to its log (a Python error's summary), and where the rest is."""
        if self._log is None:
            return ""
        try:
            with self._log.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
                lines = log.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        last = next((line.strip() for line in reversed(lines) if line.strip()), None)
        return f": {last} (worker log: {self._log})" if last else ""


_INHERITED: Final = frozenset(
    {
        "PATH",
        "PYTHONHOME",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONNOUSERSITE",
        "PYTHONHASHSEED",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TMPDIR",
        "SYSTEMROOT",
        "COVERAGE_PROCESS_START",
    }
)
"""What a worker keeps of the host's environment: enough for Python to start, never credentials."""


def worker_environment(host: Mapping[str, str]) -> dict[str, str]:
    """The sandboxed worker's environment: no provider keys or tokens, piflow importable."""
    environment = {name: value for name, value in host.items() if name in _INHERITED}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, host.get("PYTHONPATH")]))
    return environment


def _decode_all(lines: list[bytes]) -> list[Any]:
    """Every line's JSON in one decode (a 10,000-agent fan-out's calls arrive in a few reads), or
    `_UNDECODED` for each when some line is not one JSON value (each is then decoded alone, and
    the faulty one answered as such)."""
    if len(lines) > 1:
        try:
            decoded = json.loads(b"[" + b",".join(lines) + b"]")
        except (ValueError, RecursionError):
            pass
        else:
            if len(decoded) == len(lines):
                return list(decoded)
    return [_UNDECODED] * len(lines)


def _settle_line(items: list[bytes]) -> bytes:
    return SETTLE_HEAD + b",".join(items) + SETTLE_TAIL + b"\n"


def _encode_result(result: Settled) -> bytes:
    """One settled call as JSON; a value that is not JSON or too large fails that call instead (spec A.1)."""
    try:
        item = result.encoded()
    except (TypeError, ValueError):
        return _rejection(result.id, NOT_JSON)
    return _rejection(result.id, OVERSIZED) if len(item) > _ITEMS_ROOM else item


def _rejection(call_id: int, message: str) -> bytes:
    return encode({"id": call_id, "ok": False, "error": {"code": "RPC_LIMIT_EXCEEDED", "message": message}})[:-1]
