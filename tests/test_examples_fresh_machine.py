"""The bundled examples on a fresh machine (no ~/.pi, no keys): `piflow check` and `piflow run` agree,
and every pi-extensible-workflows example runs to completion on the scripted backend (the pi-subagents
examples: tests/test_subagents_examples.py).

They run in a copy of examples/ made a git repository of its own: `withWorktree` (release) creates
worktrees and branches in the repository around the script, which must not be this one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUNNABLE = ("demo", "pipeline", "review-fanout", "release")


@pytest.fixture
def fresh(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty home: no pi agent dir, no user config, no API keys."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": "/usr/bin:/bin",
        "COPY": str(tmp_path / "examples"),
    }


@pytest.fixture(autouse=True)
def examples_repository(fresh: dict[str, str]) -> None:
    shutil.copytree(EXAMPLES, fresh["COPY"])
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.invalid",
                                                     "commit", "-qm", "examples"]):
        subprocess.run(["git", *command], cwd=fresh["COPY"], env=fresh, check=True, capture_output=True)


def piflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "piflow", *args], cwd=env["COPY"], env=env, capture_output=True, text=True,
        timeout=240, check=False,
    )


def test_check_reports_no_errors_on_the_examples(fresh: dict[str, str]) -> None:
    checked = piflow(fresh, "check", ".", "--format", "json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    reports = json.loads(checked.stdout)["files"]
    assert "error" not in {finding["severity"] for report in reports for finding in report["findings"]}


@pytest.mark.parametrize("name", RUNNABLE)
def test_each_example_runs_to_completion_on_the_scripted_backend(fresh: dict[str, str], name: str) -> None:
    fixtures = ["--fixtures", "demo.fixtures.yaml"] if name == "demo" else []
    ran = piflow(fresh, "run", f"{name}.workflow.js", "--backend", "scripted", "--answer", "ship=approve", "--json",
                 *fixtures)
    final = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (final["state"], final["error"]) == ("completed", None), ran.stdout + ran.stderr
