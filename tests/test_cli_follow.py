"""`piflow show RUN --follow`: a run followed through the store's change feed from another process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from test_cli_runs import Project, make_project

SLOW = """phase("one");
const a = await agent("first", { label: "first" });
phase("two");
return [a, await agent("second", { label: "second" })];
"""


def _follow(project: Project, run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "piflow", "show", run_id, "--follow"],
        cwd=project.root, env=project.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_show_follow_prints_events_as_they_happen_until_the_run_ends(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project.root / "slow.fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": 1500}}))
    (project.root / "slow.workflow.js").write_text(SLOW)
    started = project.piflow("run", "slow.workflow.js", "--fixtures", "slow.fixtures.json", "--detach", check=True)
    run_id = started.stdout.strip()
    follower = _follow(project, run_id[:8])
    assert follower.stdout is not None
    first = follower.stdout.readline()
    assert first == "phase: one\n"
    assert follower.poll() is None  # the run goes on: the follower waits for what comes next
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    lines = [first, *out.splitlines(keepends=True)]
    assert lines[:4] == ["phase: one\n", "agent first: completed\n", "phase: two\n", "agent second: completed\n"]
    assert "state: running -> completed\n" in lines
    assert lines[-1] == 'Result: ["[scripted] first", "[scripted] second"]\n'


def test_show_follow_of_an_ended_run_prints_its_history_and_returns(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project.root / "once.workflow.js").write_text('return await agent("once", { label: "once" });\n')
    run_id = project.piflow("run", "once.workflow.js", "--json", check=True).stdout.splitlines()[0]
    began = time.monotonic()
    followed = project.piflow("show", run_id, "--follow", check=True)
    assert time.monotonic() - began < 30
    assert followed.stdout.splitlines()[0] == "agent once: completed"
    assert "State: completed" in followed.stdout.splitlines()
