"""Owner processes: every run is executed by one process of its own, started the same way whoever
asks (`piflow run --detach`, the language server's ▶ Run, ↻ Resume and budget approvals).

An owner starts its run's worker first (`EarlyWorker`, a plain child process, before the owner
has an event loop or imports the engine): the worker's interpreter, imports and compile then
overlap the owner's own start-up. This module stays light for that reason (its piflow imports, the
worker's command and client, are made when needed).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from piflow.engine.worker.client import WorkerProcess

EDITOR_RUN_NICENESS: Final = 5
"""How much lower than the editor a run launched from it is scheduled. A run's owner, worker and
agents can fill every core; at a lower priority they still get all the CPU the machine has spare,
but typing in the editor always comes first."""
_NICENESS_VARIABLE: Final = "PIFLOW_OWNER_NICENESS"


def start_owner(
    argv: list[str], *, cwd: str | None = None, script_text: str | None = None, niceness: int = 0
) -> dict[str, Any]:
    """Start an owner process (`piflow <argv> --owner-process`, in its own session, so it outlives
    whoever started it: a terminal, an editor's language server) and return its first reply:
    `{"runId", "state", ...}` once the run is started (or answered without starting), or `{"error"}`.

    `script_text` is the script to run instead of the file's text (an editor's unsaved changes); it
    goes through the owner's stdin, so nothing is left behind if either side dies. `niceness` lowers
    the owner's scheduling priority, and so its worker's and agents' (see `lower_own_priority`).
    """
    command = [sys.executable, "-m", "piflow", *argv, "--owner-process"]
    environment = dict(os.environ)
    environment.pop(_NICENESS_VARIABLE, None)
    if niceness:
        environment[_NICENESS_VARIABLE] = str(niceness)
    if script_text is not None:
        command.append("--script-stdin")
    child = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.PIPE if script_text is not None else subprocess.DEVNULL,
        start_new_session=True,
        encoding="utf-8",
        env=environment,
    )
    assert child.stdout is not None
    if child.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.write(script_text or "")
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
    line = child.stdout.readline().strip()
    child.stdout.close()
    if not line.startswith("{"):
        code = child.wait()
        return {"error": {"message": f"the run's owner process exited (status {code}) before the run started"}}
    reply: dict[str, Any] = json.loads(line)
    return reply


def lower_own_priority() -> None:
    """In an owner process, before it starts anything: take the niceness its starter asked for, so
    the worker and the agents it spawns inherit it."""
    value = os.environ.pop(_NICENESS_VARIABLE, "")
    if value.isdigit():
        with contextlib.suppress(OSError):
            os.nice(int(value))


def _provisional_log(store_location: Path) -> Path:
    """Where a worker spawned before its run has an id logs: beside the runs, moved to the run's
    directory once the run exists (`WorkerProcess.move_log`). A random name (`uuid` loads `platform`:
    the engine imports it after the spawn)."""
    return store_location.parent / "runs" / f".starting-{os.urandom(16).hex()}.log"


async def spawn_worker(store_location: Path) -> WorkerProcess:
    """The worker of a run about to start or resume in the store at `store_location`, spawned now so
    that its start-up overlaps the host's (imports, validation, snapshot, store writes)."""
    from piflow.engine.worker.client import WorkerProcess

    worker = WorkerProcess(log=_provisional_log(store_location))
    await worker.spawn()
    return worker


async def discard_worker(worker: WorkerProcess) -> None:
    """A worker no run took (a failed launch or resume, a resume answered without one): killed, and
    its provisional log, empty or a start-up failure's, removed."""
    import anyio

    with anyio.CancelScope(shield=True):
        await worker.kill()
    if worker.log is not None:
        worker.log.unlink(missing_ok=True)


class EarlyWorker:
    """A worker an owner process started before it had an event loop or an engine (a plain child
    process, started before anyio, the worker's protocol types and the first event loop are even
    imported); the first launch or resume takes it (`take`, as a `WorkerProcess`), and the owner
    discards it at the end if nothing did."""

    def __init__(self, store_location: Path) -> None:
        from piflow.engine.worker.command import start_worker

        self._log = _provisional_log(store_location)
        self._child: subprocess.Popen[bytes] | None = start_worker(log=self._log)

    def take(self) -> WorkerProcess | None:
        child, self._child = self._child, None
        if child is None:
            return None
        from piflow.engine.worker.client import WorkerProcess

        worker = WorkerProcess(log=self._log)
        worker.adopt(child)
        return worker

    def discard(self) -> None:
        """Kill the worker unless a run took it, and remove its provisional log."""
        child, self._child = self._child, None
        if child is None:
            return
        child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._log.unlink(missing_ok=True)
