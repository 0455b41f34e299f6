"""A project for driving the real `piflow` CLI in subprocesses: its own HOME, XDG dirs and pi agent dir,
the scripted backend with slow agents (so a run can be interrupted part-way), and store readers that
never write (no recovery), so a test sees exactly what the owner process recorded."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isolation import isolated_environment
from piflow.engine.store import default_store_path

AGENTS = 30
SLOW = f"""for (let i = 0; i < {AGENTS}; i++) {{ await agent("step " + i, {{ label: "s" + i }}); }}
return "done";
"""
QUICK = 'return await agent("hello", { label: "hi" });\n'


@dataclass
class Project:
    root: Path
    env: dict[str, str]

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "piflow", *args]

    def piflow(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*args), cwd=self.root, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    @property
    def store(self) -> Path:
        return default_store_path(self.root, self.env)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the run store as it is (no migration, no recovery of dead owners)."""
        with sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=30) as connection:
            return connection.execute(sql, params).fetchall()

    def state(self, run_id: str) -> str:
        return str(self.query("SELECT state FROM runs WHERE id = ?", run_id)[0][0])

    def leases(self, run_id: str) -> int:
        return int(self.query("SELECT count(*) FROM leases WHERE run_id = ?", run_id)[0][0])

    def completed_labels(self, run_id: str) -> list[str]:
        rows = self.query("SELECT label FROM agents WHERE run_id = ? AND state = 'completed' ORDER BY n", run_id)
        return [row[0] for row in rows]

    def labels(self, run_id: str) -> list[str]:
        return [row[0] for row in self.query("SELECT label FROM agents WHERE run_id = ? ORDER BY n", run_id)]

    def run_ids(self) -> list[str]:
        if not self.store.exists():
            return []
        return [row[0] for row in self.query("SELECT id FROM runs")]


def make_project(base: Path, *, latency_ms: int = 300) -> Project:
    home = base / "home"
    root = base / "project"
    (home / ".pi" / "agent").mkdir(parents=True)
    root.mkdir(parents=True)
    fixtures = {"defaults": {"latencyMs": latency_ms}, "responses": [{"match": {"label": "hi"}, "text": "hello"}]}
    (root / "fixtures.json").write_text(json.dumps(fixtures))
    (root / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n\n[scripted]\nfixtures = "fixtures.json"\n')
    (root / "slow.workflow.js").write_text(SLOW)
    (root / "quick.workflow.js").write_text(QUICK)
    env = isolated_environment(base, home, home / ".pi" / "agent")
    return Project(root, env)


def poll(condition: Callable[[], bool], timeout: float = 90, what: str = "the condition") -> None:
    """Wait for `condition` with a margin a loaded two-core machine needs."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()
