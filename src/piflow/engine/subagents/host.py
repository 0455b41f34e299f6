"""`runs.host(key, params)` (spec A.7): one operator-owned shell command, journaled under its key.

A host step runs `/bin/sh -c command` in the workflow's cwd, in a process group of its own, so a
timeout or a cancelled run kills everything the command started. Its outcome (passed, failed or
timed out) is journaled under `host/<key>` in the transaction that records it, so a resumed run
replays it instead of running the command again; a step stopped by cancellation is not an
outcome, and runs again on resume. The log file keeps the first MiB of the combined output, the
result the first 4 KiB of each stream (the reference's bounds).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import time
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
from anyio.abc import ByteReceiveStream, Process

from piflow.analysis.dialects.subagents import KEY_GRAMMAR
from piflow.engine.journal import OperationKind, host_path
from piflow.engine.subagents.progress import SUBAGENT_HOST
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun

HOST_STEP_LIMIT: Final = 32
PREVIEW_BYTES: Final = 4096
LOG_BYTES: Final = 1024 * 1024
COMMAND_BYTES: Final = 16384
MAX_TIMEOUT_MS: Final = 86_400_000
OUTPUT_PATH_BYTES: Final = 240
TERM_GRACE: Final = 1.0
"""Seconds a timed-out or stopped command's group gets between SIGTERM and SIGKILL."""

FIELDS: Final = ("kind", "command", "timeoutMs", "output", "role", "provider")
ROLES: Final = ("ci", "gate")
CWD_HINT: Final = (
    " The host step does not accept per-step cwd; commands and relative output paths use the workflow cwd."
    " Set cwd on the outer subagent request, or put a trusted directory change in command"
    " (for example, 'cd /path/to/worktree && npm test')."
)
_TRAVERSAL: Final = re.compile(r"^[/\\]|(?:^|[/\\])\.\.(?:[/\\]|$)")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_LINE_BREAK_OR_NUL: Final = re.compile(r"[\r\n\x00]")

HostState = Literal["passed", "failed", "timed-out", "stopped"]


@dataclass(frozen=True, slots=True)
class HostStep:
    """A validated `runs.host` call."""

    key: str
    command: str
    timeout_ms: int
    output: str | None = None
    role: str | None = None
    provider: str | None = None


def _invalid(message: str) -> WorkflowError:
    return WorkflowError("INVALID_METADATA", message)


def _utf8_length(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def host_step(key: Any, params: Any) -> HostStep:
    """`params` of `runs.host(key, params)` as a step, or the spec's error for the first problem."""
    if not isinstance(key, str) or KEY_GRAMMAR.match(key) is None:
        raise _invalid(
            "runs.host key must be 1-128 characters using letters, numbers, '.', '_' or '-', "
            "and start with a letter or number."
        )
    label = f"runs.host('{key}')"
    if not isinstance(params, dict):
        raise _invalid(f"{label} params must be an object.")
    unknown = [name for name in params if name not in FIELDS]
    if unknown:
        hint = CWD_HINT if "cwd" in unknown else ""
        raise _invalid(f"{label} params have unsupported fields: {', '.join(unknown)}.{hint}")
    if params.get("kind") != "command":
        raise _invalid(f"{label} kind must be 'command'.")
    command = params.get("command")
    if (not isinstance(command, str) or not command.strip() or "\x00" in command
            or _utf8_length(command.strip()) > COMMAND_BYTES):
        raise _invalid(f"{label} command must be a non-empty string of at most {COMMAND_BYTES} bytes without NUL.")
    timeout = params.get("timeoutMs")
    if isinstance(timeout, float) and timeout.is_integer():
        timeout = int(timeout)  # JSON has one number type: 120000.0 is the integer the script wrote
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= MAX_TIMEOUT_MS:
        raise _invalid(f"{label} timeoutMs must be an integer from 1 to {MAX_TIMEOUT_MS}.")
    output = params.get("output")
    if output is not None and (
        not isinstance(output, str) or not output.strip() or _TRAVERSAL.search(output) is not None
        or _CONTROL.search(output) is not None or _utf8_length(output.strip()) > OUTPUT_PATH_BYTES
    ):
        raise _invalid(f"{label} output must be a bounded relative path without traversal or control characters.")
    role = params.get("role")
    if role is not None and role not in ROLES:
        raise _invalid(f"{label} role must be 'ci' or 'gate'.")
    provider = params.get("provider")
    if provider is not None and (
        not isinstance(provider, str) or not provider.strip() or _LINE_BREAK_OR_NUL.search(provider) is not None
        or _utf8_length(provider.strip()) > 64
    ):
        raise _invalid(f"{label} provider must be a non-empty single-line string of at most 64 bytes.")
    return HostStep(
        key=key,
        command=command.strip(),
        timeout_ms=timeout,
        output=output.strip() if isinstance(output, str) else None,
        role=role,
        provider=provider.strip() if isinstance(provider, str) else None,
    )


# -- running a command ------------------------------------------------------------------------


def bounded_text(data: bytes, limit: int) -> str:
    """`data` decoded, cut to at most `limit` UTF-8 bytes with `...` marking a cut (the reference's preview)."""
    text = data.decode("utf-8", errors="replace")
    if len(text.encode("utf-8")) <= limit:
        return text
    cut = text.encode("utf-8")[: limit - 3].decode("utf-8", errors="ignore")
    return cut + "..."


class _Capture:
    """What a command wrote: a preview per stream and the combined log, each bounded as it arrives."""

    def __init__(self) -> None:
        self.streams: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.log = bytearray()

    def add(self, stream: str, chunk: bytes) -> None:
        preview = self.streams[stream]
        if len(preview) <= PREVIEW_BYTES:  # one byte over the preview limit: enough to know it was cut
            preview += chunk[: PREVIEW_BYTES + 1 - len(preview)]
        if len(self.log) < LOG_BYTES:
            self.log += chunk[: LOG_BYTES - len(self.log)]

    def preview(self, stream: str) -> str:
        return bounded_text(bytes(self.streams[stream]), PREVIEW_BYTES)


async def _drain(stream: ByteReceiveStream | None, name: str, capture: _Capture) -> None:
    if stream is None:
        return
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        while True:
            capture.add(name, await stream.receive())


def _signal_group(process: Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _terminate(process: Process) -> None:
    """SIGTERM the command's group, SIGKILL it after a grace period (the reference's 1 s)."""
    _signal_group(process, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE):
        await process.wait()
    _signal_group(process, signal.SIGKILL)
    await process.wait()


def _output_path(step: HostStep, cwd: Path, default: Path) -> Path:
    """Where the log goes: `output` inside the workflow cwd (symbolic links may not lead out), else `default`."""
    if step.output is None:
        return default
    root = cwd.resolve()
    path = root / step.output
    parent = path.parent.resolve()
    if not parent.is_relative_to(root):
        raise WorkflowError("INVALID_METADATA", f"runs.host('{step.key}') output resolves outside the workflow cwd.")
    with contextlib.suppress(FileNotFoundError):
        info = path.lstat()
        if not path.is_file() or path.is_symlink() or info.st_nlink > 1:
            raise WorkflowError(
                "INVALID_METADATA", f"runs.host('{step.key}') output must be a regular, non-linked file path."
            )
    return parent / path.name


def _save_log(path: Path, data: bytes, key: str) -> None:
    """Replace `path` with `data` atomically (a reader never sees half a log)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".piflow-host-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
    except OSError as exc:
        raise WorkflowError(
            "AGENT_FAILED", f"runs.host('{key}') could not save command output: {exc.strerror or exc}"
        ) from None


async def execute(step: HostStep, cwd: Path, default_log: Path) -> dict[str, Any]:
    """Run `step` to its result (spec A.7); on cancellation its process group is killed first."""
    log_path = _output_path(step, cwd, default_log)
    capture = _Capture()
    started = time.monotonic()
    state: HostState
    exit_code: int | None = None
    try:
        process = await anyio.open_process(
            ["/bin/sh", "-c", step.command], stdin=DEVNULL, stdout=PIPE, stderr=PIPE, cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        state, error = "failed", f"Command could not start: {exc.strerror or exc}."
    else:
        try:
            async with anyio.create_task_group() as streams:
                streams.start_soon(_drain, process.stdout, "stdout", capture)
                streams.start_soon(_drain, process.stderr, "stderr", capture)
                with anyio.move_on_after(step.timeout_ms / 1000) as deadline:
                    exit_code = await process.wait()
                if deadline.cancelled_caught:
                    await _terminate(process)
                # Background jobs the command left behind would hold its pipes open: end them too.
                _signal_group(process, signal.SIGKILL)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _terminate(process)
                await process.aclose()
            raise
        await process.aclose()
        if deadline.cancelled_caught:
            state, exit_code, error = "timed-out", None, f"Command timed out after {step.timeout_ms}ms."
        elif exit_code == 0:
            state, error = "passed", ""
        else:
            state = "failed"
            error = f"Command exited with code {exit_code if exit_code is not None and exit_code >= 0 else 'unknown'}."
    _save_log(log_path, bytes(capture.log), step.key)
    result: dict[str, Any] = {
        "key": step.key,
        "kind": "command",
        "ok": state == "passed",
        "state": state,
        "exitCode": exit_code,
        "stdout": capture.preview("stdout"),
        "stderr": capture.preview("stderr"),
        "outputPath": str(log_path),
        "durationMs": round((time.monotonic() - started) * 1000),
    }
    if error:
        result["error"] = error
    return result


def failure(result: dict[str, Any]) -> WorkflowError:
    """The rejection of a host step that did not pass (spec A.7)."""
    return WorkflowError("AGENT_FAILED", f"Host command '{result['key']}' failed: {result.get('error', '')}")


# -- one run's host steps ---------------------------------------------------------------------


class HostSteps:
    """The `runs.host` calls of one execution of a script: the key namespace, the limit, the journal.

    `children` holds the workflow keys `runs.run`/`runs.all`/`runs.lanes` launched in this
    execution: host keys share their namespace (spec A.3).
    """

    def __init__(self, run: ActiveRun, children: Container[str]) -> None:
        self._run = run
        self._children = children
        self.keys: set[str] = set()

    async def call(self, key: Any, params: Any) -> dict[str, Any]:
        """Serve one `runs.host` call: its journaled result on replay, else the command's."""
        step = host_step(key, params)
        if step.key in self.keys or step.key in self._children:
            raise _invalid(f"Workflow key '{step.key}' is already in use.")
        if len(self.keys) >= HOST_STEP_LIMIT:
            raise _invalid(f"workflowScript supports at most {HOST_STEP_LIMIT} runs.host calls.")
        self.keys.add(step.key)
        run = self._run
        path = host_path(step.key)
        recorded = run.operations.check(OperationKind.HOST, path)
        if recorded is not None:
            result: dict[str, Any] = recorded.value
        else:
            await run.lifecycle.enter()
            try:
                default_log = run.store.run_dir(run.id) / "host" / f"{step.key}.log"
                run.emit(SUBAGENT_HOST, {"key": step.key, "command": step.command, "state": "running"})
                try:
                    result = await execute(step, Path(run.cwd), default_log)
                except anyio.get_cancelled_exc_class():
                    run.emit(SUBAGENT_HOST, {"key": step.key, "command": step.command, "state": "stopped"})
                    raise
                with run.batch():
                    run.operations.record(OperationKind.HOST, path, result)
                    run.emit(SUBAGENT_HOST, {**result, "command": step.command})
            finally:
                run.lifecycle.leave()
        if not result["ok"]:
            raise failure(result)
        return result
