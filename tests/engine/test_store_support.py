"""Helpers shared by the run store tests: runs to store, and child processes on the same store."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

from piflow.engine.store import RunRecord, RunStore

CHILD_PRELUDE = """\
import os, sys, time
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError
store = RunStore.open(sys.argv[1])
"""


def new_run(store: RunStore, run_id: str | None = None, **fields: Any) -> RunRecord:
    """Create and return a running run (fields override the defaults)."""
    values: dict[str, Any] = {
        "id": run_id or str(uuid.uuid4()),
        "workflow_name": "review",
        "cwd": "/home/user/project",
        "state": "running",
        "concurrency": 4,
        "backend": "scripted",
    }
    values.update(fields)
    record = RunRecord(**values)
    store.create_run(record, "return 1", {"identityVersion": 3, "script": "return 1"})
    return record


def _child_source(code: str) -> str:
    return CHILD_PRELUDE + textwrap.dedent(code)


def run_child(path: Path, code: str, *args: str, timeout: float = 60) -> str:
    """Run `code` in a fresh Python process with `store` open on `path`; return its stdout."""
    completed = subprocess.run(
        [sys.executable, "-c", _child_source(code), str(path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def start_child(path: Path, code: str, *args: str) -> subprocess.Popen[str]:
    """Start `code` in a fresh Python process with `store` open on `path` (stdout piped)."""
    return subprocess.Popen(
        [sys.executable, "-c", _child_source(code), str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
