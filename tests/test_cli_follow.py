"""`piflow show RUN --follow`: a run followed through the store's change feed from another process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from test_cli_runs import Project, make_project

SLOW = """phase("one");
const a = await agent("first", { label: "first" });
phase("two");
const b = await agent("second", { label: "second" });
await checkpoint({ name: "ship", prompt: "Ship it?", context: null });
return [a, b];
"""


def _follow(project: Project, run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "piflow", "show", run_id, "--follow"],
        cwd=project.root, env=project.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_show_follow_prints_events_as_they_happen_until_the_run_ends(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project.root / "slow.workflow.js").write_text(SLOW)
    started = project.piflow("run", "slow.workflow.js", "--detach", check=True)
    run_id = started.stdout.strip()
    follower = _follow(project, run_id[:8])
    assert follower.stdout is not None
    # The run waits at its checkpoint until the test answers it: the follower has printed what came
    # so far and waits for what comes next, however late it started on a loaded machine.
    watchdog = threading.Timer(60, follower.kill)  # a follower that never tells the checkpoint fails, not hangs
    watchdog.start()
    try:
        lines = [follower.stdout.readline()]
        while not lines[-1].startswith("checkpoint ship awaits an answer"):
            assert lines[-1], f"the follower ended before the checkpoint: {lines}, {follower.communicate()}"
            lines.append(follower.stdout.readline())
    finally:
        watchdog.cancel()
    assert follower.poll() is None
    project.piflow("approve", run_id[:8], "ship", check=True)
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    lines += out.splitlines(keepends=True)
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
