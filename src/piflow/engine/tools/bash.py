"""The `bash` tool: one command in the workspace, in its own process group, killed whole on timeout.

The command runs as `bash -c` in a new session, so a timeout or a cancelled attempt kills
everything it started (a test runner's children included), not just the shell. Its output
(stdout and stderr interleaved) keeps its end: the last 2,000 lines or 50 KB, with a notice.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.abc

from piflow.engine.tools.arguments import Arguments
from piflow.engine.tools.confinement import ToolError, Workspace
from piflow.engine.tools.output import MAX_BYTES, size, tail

_KEPT_BYTES: Final = 4 * MAX_BYTES
"""Output kept in memory while a command runs (its end; what came before is only counted)."""


@dataclass
class _Output:
    kept: bytearray
    dropped_lines: int = 0

    def add(self, data: bytes) -> None:
        self.kept += data
        excess = len(self.kept) - _KEPT_BYTES
        if excess > 0:
            cut = self.kept.find(b"\n", excess)
            cut = excess if cut == -1 else cut + 1
            self.dropped_lines += self.kept.count(b"\n", 0, cut)
            del self.kept[:cut]

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        capped = tail(lines)
        body = "\n".join(capped.lines)
        total = len(lines) + self.dropped_lines
        if not capped.truncated and not self.dropped_lines:
            return body
        first = total - len(capped.lines) + 1
        why = f" ({size(MAX_BYTES)} limit)" if capped.by_bytes else ""
        return f"{body}\n\n[Showing lines {first}-{total} of {total}{why}.]"


def _kill_group(process: anyio.abc.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


async def bash(workspace: Workspace, args: Arguments, timeout_ms: int | None) -> str:
    """Run the command; a non-zero exit or a timeout is a tool error carrying the output."""
    command = args.string("command")
    seconds = args.optional_int("timeout", minimum=1)
    limits = [limit for limit in (seconds, None if timeout_ms is None else timeout_ms / 1000) if limit is not None]
    deadline = min(limits) if limits else math.inf
    output = _Output(bytearray())
    process = await anyio.open_process(
        ["bash", "-c", command],
        cwd=workspace.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        with anyio.move_on_after(deadline) as scope:
            assert process.stdout is not None
            async for data in process.stdout:
                output.add(data)
            await process.wait()
        timed_out = scope.cancelled_caught
    finally:
        if process.returncode is None:  # timed out, or the attempt was cancelled
            _kill_group(process)
            with anyio.CancelScope(shield=True):
                await process.wait()
                await process.aclose()
        else:
            with anyio.CancelScope(shield=True):
                await process.aclose()
    text = output.text()
    if timed_out:
        if seconds is not None and seconds <= deadline:
            status = f"Command timed out after {seconds} seconds"
        else:
            status = f"Tool 'bash' exceeded its timeout of {timeout_ms}ms."
        raise ToolError(f"{text}\n\n{status}" if text else status)
    if process.returncode:
        status = f"Command exited with code {process.returncode}"
        raise ToolError(f"{text}\n\n{status}" if text else status)
    return text or "(no output)"
