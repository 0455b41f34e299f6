"""Starting a worker process: its command line, its sandboxed environment, its log.

Light on purpose (no event loop, no protocol types): an owner process starts its run's worker with
it before it imports anything else (`engine/owner.py`), and the client adopts the child later.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from piflow.engine.worker.wire import DEFAULT_HEAP_LIMIT, DEFAULT_MEMORY_LIMIT

_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[3])
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


def start_worker(
    *,
    log: Path | None = None,
    python: str = sys.executable,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    heap_limit: int = DEFAULT_HEAP_LIMIT,
) -> subprocess.Popen[bytes]:
    """A worker process with unbuffered pipes for the protocol, in a session of its own. Its stderr
    goes to `log` (a Python traceback must not reach a terminal), else to the host's stderr."""
    stderr = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        stderr = log.open("ab")
    try:
        return subprocess.Popen(
            [
                *(python, "-m", "piflow.engine.worker"),
                *("--memory-limit", str(memory_limit), "--heap-limit", str(heap_limit)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
            env=worker_environment(os.environ),
            start_new_session=True,
        )
    finally:
        if stderr is not None:
            stderr.close()  # the worker has its own copy
