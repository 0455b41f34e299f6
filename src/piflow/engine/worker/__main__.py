"""The worker program (`python -m piflow.engine.worker`): runs one script body, asking the host over stdio.

Three threads: the main thread evaluates JavaScript; a reader turns stdin lines into a queue; a
heartbeat thread writes `{"t":"hb"}` every second while the worker waits for the host or its script
keeps making host calls. A script stuck in `while(true){}` stops the heartbeats and the host kills
the worker, as the reference's blocked event loop does. The worker never touches the store, the
network or files.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from piflow.engine.worker.wire import (
    DEFAULT_HEAP_LIMIT,
    DEFAULT_MEMORY_LIMIT,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_LINE,
    NOT_JSON,
    OVERSIZED,
    RPC_LIMIT_BYTES,
    SETTLE_HEAD,
    encode,
    error_json,
)
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.worker.runtime import ScriptRuntime

_END: Final = b""


class _Channel:
    """stdin lines in, protocol lines out; writes from the main and heartbeat threads never interleave.

    Output goes straight to the file descriptor with `os.write` until every byte is out: a buffered
    writer interrupted by the parent-watch timer signal in the middle of a large write was seen
    letting a heartbeat land inside a call line.
    """

    def __init__(self, stdin: BinaryIO, output: int) -> None:
        self._stdin = stdin
        self._output = output
        self._lock = threading.Lock()
        self._lines: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        with self._lock:
            while view:
                view = view[os.write(self._output, view) :]

    def read_forever(self) -> None:
        """Queue each line; an oversized line or the end of input ends the stream (`_END`)."""
        uncapped = 2
        while True:
            # The compile and start messages carry the body, args and variables: only later ones are capped.
            line = self._stdin.readline() if uncapped else self._stdin.readline(RPC_LIMIT_BYTES + 1)
            uncapped = max(0, uncapped - 1)
            if len(line) > RPC_LIMIT_BYTES and not line.endswith(b"\n"):
                self._lines.put(b"\x00")
                return
            self._lines.put(line)
            if not line:
                return

    def receive(self) -> dict[str, Any]:
        return _parse(self._lines.get())

    def receive_settles(self) -> list[bytes]:
        """The next settle line and every one already queued, unparsed (QuickJS parses them)."""
        lines = [_settle_line(self._lines.get())]
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return lines
            lines.append(_settle_line(line))


def _checked(line: bytes) -> bytes:
    if line == _END:
        raise _HostGone
    if line == b"\x00":
        raise WorkflowError("RPC_LIMIT_EXCEEDED", OVERSIZED)
    return line


def _parse(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(_checked(line))
    except ValueError:
        raise WorkflowError("RPC_LIMIT_EXCEEDED", NOT_JSON) from None
    if not isinstance(message, dict):
        raise WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message")
    return message


def _settle_line(line: bytes) -> bytes:
    if not _checked(line).startswith(SETTLE_HEAD):
        raise WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message")
    return line


class _Heartbeat:
    """Beats every second while the worker is idle, or evaluating with progress.

    The GIL alone does not stop this thread during an evaluation: the parent-watch signal handler
    runs Python code now and then, which lets it run. So it asks the runtime whether JavaScript is
    running and, if so, whether it made progress since the last beat.
    """

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self.runtime: ScriptRuntime | None = None

    def beat_forever(self) -> None:
        seen: int | None = None
        while True:
            runtime = self.runtime
            marker = runtime.progress if runtime is not None and runtime.evaluating else None
            if marker is None or marker != seen:
                self._channel.write(HEARTBEAT_LINE)
            seen = marker
            time.sleep(HEARTBEAT_INTERVAL)


class _HostGone(Exception):
    """stdin closed: nobody is left to answer."""


def _run(channel: _Channel, heartbeat: _Heartbeat, heap_limit: int) -> None:
    """Execute the script up to and including its `done` message."""
    # Imported once stdin is being read (a host sending the script early does not wait for these
    # imports); made before the script arrives, so an early-spawned worker has its context ready.
    from piflow.engine.worker.runtime import ScriptRuntime

    runtime = ScriptRuntime(heap_limit)
    heartbeat.runtime = runtime
    # The script comes first, alone, instrumented by the host (the worker never loads the grammar):
    # the worker compiles it while the host still prepares the run.
    script = channel.receive()
    if script.get("t") != "compile" or not isinstance(script.get("source"), str):
        raise WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message")
    dialect = script.get("dialect") if isinstance(script.get("dialect"), str) else None
    runtime.compile(script["source"])
    start = channel.receive()
    if start.get("t") != "start":
        raise WorkflowError("INTERNAL_ERROR", "Malformed workflow worker message")
    workflow = start.get("workflow") if isinstance(start.get("workflow"), dict) else None
    step = runtime.launch(
        start.get("args"), list(start.get("functions") or []), dict(start.get("variables") or {}), dialect,
        workflow,
    )
    while True:
        if step.lines:
            channel.write(step.lines)
        if step.finished:
            return
        if not step.pending:
            # No host call is pending and nothing else can wake the script: it waits forever.
            raise WorkflowError("INTERNAL_ERROR", "Workflow script is waiting for a promise that can never settle")
        step = runtime.settle(channel.receive_settles())


def _exit_with_parent(parent: int) -> None:
    """Quit within a second of losing the host, even inside `while(true){}`.

    dukpy checks Python signals while JavaScript runs, so a timer signal handler still gets to run.
    """

    def check(_signal: int, _frame: object) -> None:
        if os.getppid() != parent:
            os._exit(0)

    signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, HEARTBEAT_INTERVAL, HEARTBEAT_INTERVAL)


def _limits(argv: list[str]) -> tuple[int, int]:
    """`--memory-limit N` (address space bytes, 0: none) and `--heap-limit N` (JavaScript heap bytes).

    Read by hand: the host is the only caller, and argparse would add ~9 ms to every worker's start.
    """
    limits = {"--memory-limit": DEFAULT_MEMORY_LIMIT, "--heap-limit": DEFAULT_HEAP_LIMIT}
    if len(argv) % 2 or any(name not in limits for name in argv[::2]):
        raise SystemExit("usage: python -m piflow.engine.worker [--memory-limit BYTES] [--heap-limit BYTES]")
    for name, value in zip(argv[::2], argv[1::2], strict=True):
        try:
            limits[name] = int(value)
        except ValueError:
            raise SystemExit(f"{name} expects a number of bytes, not {value!r}") from None
    return limits["--memory-limit"], limits["--heap-limit"]


def main(argv: list[str] | None = None) -> None:
    memory_limit, heap_limit = _limits(sys.argv[1:] if argv is None else argv)
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    _exit_with_parent(os.getppid())
    # The protocol owns the original stdout; anything else printed (by Python or C code) goes to stderr.
    output = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    channel = _Channel(sys.stdin.buffer, output)
    heartbeat = _Heartbeat(channel)
    threading.Thread(target=heartbeat.beat_forever, name="heartbeat", daemon=True).start()
    threading.Thread(target=channel.read_forever, name="stdin", daemon=True).start()
    try:
        _run(channel, heartbeat, heap_limit)
    except WorkflowError as exc:
        channel.write(encode({"t": "done", "ok": False, "error": error_json(exc)}))
    except _HostGone:
        pass
    except Exception as exc:  # a broken runtime (memory exhausted in the middle of a job): report, not crash
        import traceback  # only here: importing it costs every worker's start ~3 ms

        traceback.print_exc()
        # Named by its type: a JavaScript value thrown through the runtime may read just "null".
        summary = f"{type(exc).__name__}: {(str(exc).strip() or 'no message').splitlines()[0]}"
        failure = WorkflowError("INTERNAL_ERROR", f"Workflow worker failed ({summary}); its log has the details")
        channel.write(encode({"t": "done", "ok": False, "error": error_json(failure)}))
    # Skip interpreter teardown: the daemon threads and a large QuickJS heap have nothing to flush.
    os._exit(0)


if __name__ == "__main__":
    main()
