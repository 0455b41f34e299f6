"""The host's end of a worker: spawn it, receive its primitive calls, settle them, collect the result.

The host sends `{"t":"compile","source":S,"dialect"?:D}` (S: the body as `instrument.instrumented`
rewrites it, done by the host or kept from the launch snapshot; sent as soon as the body is known:
the worker compiles it while the host validates), then `{"t":"start","args":A,"functions":[...],"variables":{...},
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

import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from piflow import __version__
from piflow.engine.worker import boundary, command
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
_UNDECODED: Final = object()
"""A line `_decode_all` left to be decoded alone."""
_SECONDS_IN_WORDS: Final = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def unresponsive_message(timeout: float) -> str:
    """The reference's `WORKER_UNRESPONSIVE` message, naming the timeout actually in force
    (five seconds by default, which gives the reference's exact words)."""
    whole = int(timeout)
    words = _SECONDS_IN_WORDS[whole - 1] if whole == timeout and 1 <= whole <= 10 else f"{timeout:g}"
    return f"Workflow worker missed its {words}-second heartbeat"


@functools.cache
def _instrumentation_digest() -> bytes:
    """The rewrite's own code: a development tree's changed instrumentation misses every old key."""
    with open(Path(__file__).with_name("instrument.py"), "rb") as source:
        return hashlib.blake2b(source.read(), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Instrumentation:
    """A body's instrumented source and the key it was made under (body, dialect, piflow's version,
    the rewrite's code). A launch snapshot keeps it, so a resume's host hands it to the worker
    instead of instrumenting again: 0.15 s and the grammar's imports at 10,000 agents."""

    key: str
    source: str

    @staticmethod
    def key_of(body: str, dialect: str | None) -> str:
        digest = hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=16)
        digest.update(f"\0{dialect or ''}\0{__version__}\0".encode())
        digest.update(_instrumentation_digest())
        return digest.hexdigest()

    @classmethod
    def of(cls, body: str, dialect: str | None, kept: Any = None) -> Instrumentation:
        """`kept` (a snapshot's `instrumented`) when it was made from this very body and dialect by
        this piflow; else the body instrumented now (raises INVALID_SYNTAX or INVALID_METADATA)."""
        key = cls.key_of(body, dialect)
        if isinstance(kept, dict) and kept.get("key") == key and isinstance(kept.get("source"), str):
            return cls(key, kept["source"])
        from piflow.engine.worker.instrument import instrumented

        return cls(key, instrumented(body, dialect))

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "source": self.source}


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
        self.instrumentation: Instrumentation | None = None
        """What the worker compiles, once `compile` made it (a launch snapshot keeps it)."""
        self._started = False

    async def spawn(self) -> None:
        """Start the worker process now, so its interpreter and imports overlap the host's launch work
        (validation, snapshot, store writes); `compile` and `start` hand it the script later."""
        if self._process is not None:
            raise RuntimeError("WorkerProcess.spawn() called twice")
        self.adopt(command.start_worker(log=self._log, python=self._python, memory_limit=self._memory_limit,
                                        heap_limit=self._heap_limit))

    def adopt(self, child: subprocess.Popen[bytes]) -> None:
        """Take a worker process started with `command.start_worker` (by an owner process before it
        had an event loop, or by `spawn`) as this execution's worker."""
        if self._process is not None:
            raise RuntimeError("WorkerProcess.spawn() called twice")
        self._process = _PipedProcess(child)

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

    async def compile(self, body: str, dialect: str | None = None, kept: Any = None) -> None:
        """Instrument the script body and hand it to the worker now (spawning it first unless
        `spawn()` did), so it compiles it while the host still prepares the run; `start` runs it.

        `dialect` "pi-subagents" runs the body as that dialect's script (`wire.SUBAGENTS_DIALECT`);
        `kept` is a launch snapshot's `instrumented`, used when it matches (`Instrumentation.of`).
        A body that cannot be instrumented (a syntax error, a reserved name) fails the run as the
        worker's compile would: `wait_done` raises it.
        """
        if self._body is not None:
            raise RuntimeError("WorkerProcess.compile() called twice")
        self._body = body
        try:
            self.instrumentation = Instrumentation.of(body, dialect, kept)
            message = {"t": "compile", "source": self.instrumentation.source}
            if dialect is not None:
                message["dialect"] = dialect
            encoded = encode(message)
        except (TypeError, ValueError):
            self._body = self.instrumentation = None
            raise WorkflowError("RPC_LIMIT_EXCEEDED", NOT_JSON) from None
        except WorkflowError as exc:
            await self._fail(exc)
            return
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
        if self._outcome is None:  # (a body that failed to instrument has its outcome already)
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
            process.kill()
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
        if self._outcome is not None:
            return
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


class _PipedProcess(Process):
    """A worker started with `subprocess.Popen` (`command.start_worker`), as anyio's `Process`: an
    owner process starts its worker before any event loop exists. Its pipes are non-blocking and
    waited on with the event loop (`anyio.wait_readable`/`wait_writable`); nothing blocks the loop."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdin is not None and child.stdout is not None
        self._child = child
        self._stdin = _PipeSend(child.stdin.fileno(), child.stdin.close)
        self._stdout = _PipeReceive(child.stdout.fileno(), child.stdout.close)

    async def aclose(self) -> None:
        await self._stdin.aclose()
        await self._stdout.aclose()
        await self.wait()

    async def wait(self) -> int:
        # The worker is not the event loop's child: poll (a few ms after its end, once per execution).
        while (code := self._child.poll()) is None:
            await anyio.sleep(0.005)
        return code

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, number: signal.Signals) -> None:
        if self._child.poll() is None:  # (reaped once it ended: the pid is not reused under our hands)
            with suppress(ProcessLookupError):
                os.kill(self._child.pid, number)

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def returncode(self) -> int | None:
        return self._child.poll()

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None


class _PipeSend(ByteSendStream):
    def __init__(self, fd: int, close: Callable[[], None]) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._close = close

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._fd is None:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except (BrokenPipeError, ConnectionResetError):
                raise anyio.BrokenResourceError from None

    async def aclose(self) -> None:
        if self._fd is not None:
            anyio.notify_closing(self._fd)  # a task waiting to write gets ClosedResourceError
            self._fd = None
            with suppress(OSError):  # a broken pipe's unsent bytes
                self._close()


class _PipeReceive(ByteReceiveStream):
    def __init__(self, fd: int, close: Callable[[], None]) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._close = close

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()  # a worker writing without pause must not starve the loop
        while True:
            if self._fd is None:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if self._fd is not None:
            anyio.notify_closing(self._fd)  # a task waiting to read gets ClosedResourceError
            self._fd = None
            self._close()
