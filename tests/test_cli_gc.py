"""`piflow delete` and `piflow gc` over the real CLI, in a real git repository: runs go with their
worktrees, branches and run directories; a running run and the user's own branches never do.

The project keeps its run store inside the repository (`store = ".piflow/runs.db"`, as the docs
suggest), so the tests also see that nothing of piflow's is left in the user's repository.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from isolation import isolated_environment
from piflow.engine.store import RunStore

SCRIPT = 'return await withWorktree("fix", () => agent("Fix the bug", { label: "fixer" }));\n'
WAITS = 'await checkpoint({ name: "ship", prompt: "Ship it?", context: {} });\n'


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Project:
    root: Path
    env: dict[str, str]

    def piflow(self, *args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=self.root, env=self.env, stdin=stdin,
                              capture_output=True, text=True, timeout=120, check=False)

    def run(self, script: str = "fix.workflow.js") -> str:
        ran = self.piflow("run", script, "--json")
        assert ran.returncode == 0, ran.stderr
        run_id: str = json.loads(ran.stdout.splitlines()[-1])["runId"]
        return run_id

    def branches(self) -> list[str]:
        return git(self.root, "for-each-ref", "--format=%(refname:short)", "refs/heads").splitlines()

    def run_ids(self) -> list[str]:
        listed = self.piflow("runs", "--all", "--json")
        assert listed.returncode == 0, listed.stderr
        return [run["runId"] for run in json.loads(listed.stdout)]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    home, root = tmp_path / "home", tmp_path / "repo"
    (home / ".pi" / "agent").mkdir(parents=True)
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".piflow/\n")
    (root / "app.py").write_text("print('app')\n")
    (root / "fixtures.json").write_text('{"responses": []}')
    (root / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\nstore = ".piflow/runs.db"\n\n'
                                      '[scripted]\nfixtures = "fixtures.json"\n')
    (root / "fix.workflow.js").write_text(SCRIPT)
    (root / "ship.workflow.js").write_text(WAITS)
    git(root, "add", "--all")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init")
    git(root, "branch", "piflow/my-own-experiment")  # the user's, under piflow's prefix
    return Project(root, isolated_environment(tmp_path, home, home / ".pi" / "agent"))


def test_delete_removes_the_run_its_worktrees_branches_and_files(project: Project) -> None:
    kept = project.run()
    run_id = project.run()
    before = git(project.root, "status", "--porcelain")

    deleted = project.piflow("delete", run_id[:8], "--yes")

    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"Deleted run {run_id[:8]} (fix)\n  deleted branch piflow/{run_id}/")
    assert project.run_ids() == [kept]
    assert not any(branch.startswith(f"piflow/{run_id}") for branch in project.branches())
    assert "piflow/my-own-experiment" in project.branches()
    assert not (project.root / ".piflow" / "runs" / run_id).exists()
    assert run_id not in git(project.root, "worktree", "list")
    assert git(project.root, "status", "--porcelain") == before
    assert project.piflow("show", run_id).returncode == 2


def test_delete_without_a_terminal_needs_yes(project: Project) -> None:
    run_id = project.run()

    refused = project.piflow("delete", run_id)

    assert refused.returncode == 2
    assert refused.stderr == "piflow delete: this removes runs for good: confirm in a terminal or pass --yes\n"
    assert project.run_ids() == [run_id]


@pytest.mark.parametrize(("answer", "deleted"), [("n", False), ("y", True)])
def test_delete_asks_in_a_terminal(project: Project, answer: str, deleted: bool) -> None:
    run_id = project.run()
    controller, terminal = pty.openpty()
    try:
        os.write(controller, f"{answer}\n".encode())
        asked = project.piflow("delete", run_id, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(controller)

    assert f"Delete run {run_id[:8]}  fix  completed" in asked.stdout
    assert "its 1 worktree(s) and their branches? [y/N]" in asked.stdout
    assert project.run_ids() == ([] if deleted else [run_id])
    assert asked.returncode == (0 if deleted else 1)


def test_a_running_run_is_never_removed_and_gc_keeps_resumable_runs_unless_asked(project: Project) -> None:
    started = project.piflow("run", "ship.workflow.js", "--detach")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip().splitlines()[-1]
    with RunStore.open(project.root / ".piflow" / "runs.db") as store:
        deadline = time.monotonic() + 60
        while not store.awaiting_checkpoints(run_id):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        owner = store.lease_owner(run_id)
    assert owner is not None

    refused = project.piflow("delete", run_id, "--yes")
    swept = project.piflow("gc", "--older-than", "0s", "--include-resumable", "--yes")

    assert refused.returncode == 1
    assert f"run {run_id[:8]} is waiting for a checkpoint answer" in refused.stderr
    assert swept.stdout == "No runs to remove.\n"
    assert project.run_ids() == [run_id]

    os.kill(owner[0], signal.SIGKILL)  # the owner dies: the run is interrupted, and resumable
    deadline = time.monotonic() + 30
    while project.piflow("show", "--json", run_id).stdout.count('"interrupted"') == 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert project.piflow("gc", "--older-than", "0s", "--yes").stdout == "No runs to remove.\n"
    removed = project.piflow("gc", "--older-than", "0s", "--include-resumable", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert project.run_ids() == []


def test_gc_removes_only_runs_older_than_asked(project: Project) -> None:
    first, second = project.run(), project.run()

    young = project.piflow("gc", "--older-than", "1h", "--yes")
    preview = project.piflow("gc", "--older-than", "0s", "--dry-run")

    assert young.stdout == "No runs to remove.\n"
    assert preview.stdout.startswith("Would remove 2 run(s):\n")
    assert sorted(project.run_ids()) == sorted([first, second])
    swept = project.piflow("gc", "--older-than", "0s", "--yes")
    assert swept.returncode == 0, swept.stderr
    assert project.run_ids() == []
    assert project.branches() == ["main", "piflow/my-own-experiment"]
    assert git(project.root, "worktree", "list").count("\n") == 0
    assert sorted(p.name for p in (project.root / ".piflow" / "runs").iterdir()) == []


def test_a_bad_duration_is_a_usage_error(project: Project) -> None:
    bad = project.piflow("gc", "--older-than", "7 days")
    assert bad.returncode == 2
    assert "'7 days' is not a duration such as 7d, 12h, 90m or 1d12h" in bad.stderr
