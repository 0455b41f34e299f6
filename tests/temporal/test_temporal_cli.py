"""`piflow run/runs/show/approve` against a real Temporal dev server and real `piflow worker`s."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from temporal_support import temporal_project

from isolation import isolated_environment
from temporal_cluster import Workers

SCRIPT = """
phase("scan");
const found = await parallel("scan", {
  api: () => agent("Scan the API", { label: "api" }),
  ui: () => agent("Scan the UI", { label: "ui" }),
});
phase("fix");
const fixed = await pipeline("fix", { one: "a", two: "b" }, {
  draft: (x) => agent("Draft " + x, { label: "draft" }),
  check: (d) => agent("Check " + d, { label: "check" }),
});
const ship = await checkpoint({ name: "ship", prompt: "Ship it?", context: { fixed } });
return { found, fixed, ship };
"""


def make_project(root: Path, workers: Workers) -> Path:
    return temporal_project(root, workers, {"release.workflow.js": SCRIPT})


def piflow(project: Path, home: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`piflow` as a user on a machine whose home is `home` (each "machine" its own home and run store)."""
    root = project.parent / home
    env = isolated_environment(root, root / "home", root / "agent")
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=timeout)


def wait_show(project: Path, run_id: str, predicate: object, timeout: float = 90) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    shown: dict[str, object] = {}
    while time.monotonic() < deadline:
        done = piflow(project, "teammate", "show", run_id[:8], "--json")
        if done.returncode == 0:
            shown = json.loads(done.stdout)
            if predicate(shown):  # type: ignore[operator]
                return shown
        time.sleep(0.5)
    raise AssertionError(f"run never reached the expected state; last seen {shown}")


def test_a_run_launched_on_one_machine_is_answered_from_another(tmp_path: Path, workers: Workers) -> None:
    workers.start(2)
    project = make_project(tmp_path, workers)
    launched = piflow(project, "laptop", "run", "release.workflow.js", "--detach")
    assert launched.returncode == 0, launched.stderr
    run_id = launched.stdout.strip().splitlines()[-1]

    shown = wait_show(project, run_id, lambda s: s["state"] == "awaiting_input")
    assert [c["name"] for c in shown["checkpoints"]] == ["ship"]  # type: ignore[index]
    listed = piflow(project, "teammate", "runs", "--json")
    assert [(r["runId"], r["state"]) for r in json.loads(listed.stdout)] == [(run_id, "awaiting_input")]

    approved = piflow(project, "teammate", "approve", run_id[:8], "ship")
    assert approved.returncode == 0 and "accepted" in approved.stdout, approved.stderr
    again = piflow(project, "laptop", "approve", run_id[:8], "ship")
    assert again.returncode == 1 and "not awaiting" in again.stdout

    shown = wait_show(project, run_id, lambda s: s["state"] == "completed")
    assert shown["result"] == {
        "found": {"api": "[scripted] Scan the API", "ui": "[scripted] Scan the UI"},
        "fixed": {"one": "[scripted] Check [scripted] Draft a", "two": "[scripted] Check [scripted] Draft b"},
        "ship": "approved",
    }
    labels = sorted((a["label"], a["state"]) for a in shown["agentList"])  # type: ignore[union-attr]
    assert labels == [("api", "completed"), ("check", "completed"), ("check", "completed"),
                      ("draft", "completed"), ("draft", "completed"), ("ui", "completed")]


def test_piflow_run_follows_the_run_to_its_result(tmp_path: Path, workers: Workers) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers)
    done = piflow(project, "laptop", "run", "release.workflow.js", "--answer", "ship=reject", "--json")
    assert done.returncode == 0, done.stderr + workers.logs()
    final = json.loads(done.stdout.strip().splitlines()[-1])
    assert final["state"] == "completed"
    assert final["result"]["ship"] == "rejected"


SLOW = """
const a = await agent("one", { label: "one" });
const b = await agent("two", { label: "two" });
return [a, b];
"""


def test_pause_resume_and_stop_from_the_command_line(tmp_path: Path, workers: Workers) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers)
    (project / "slow.workflow.js").write_text(SLOW)
    (project / "fixtures.json").write_text(json.dumps({"defaults": {"latencyMs": 4000}}))
    launched = piflow(project, "laptop", "run", "slow.workflow.js", "--fixtures", "fixtures.json", "--detach")
    run_id = launched.stdout.strip().splitlines()[-1]
    wait_show(project, run_id, lambda s: len(s["agentList"]) == 1)  # type: ignore[arg-type]
    assert piflow(project, "teammate", "pause", run_id[:8]).returncode == 0
    paused = wait_show(project, run_id, lambda s: s["state"] == "paused")
    time.sleep(5)  # "one" finishes meanwhile; "two" must not start while paused
    assert [a["label"] for a in paused["agentList"]] == ["one"]  # type: ignore[index]
    assert len(wait_show(project, run_id, lambda s: s["state"] == "paused")["agentList"]) == 1  # type: ignore[arg-type]
    assert piflow(project, "teammate", "resume", run_id[:8]).returncode == 0
    done = wait_show(project, run_id, lambda s: s["state"] == "completed")
    assert done["result"] == ["[scripted] one", "[scripted] two"]

    launched = piflow(project, "laptop", "run", "slow.workflow.js", "--fixtures", "fixtures.json", "--detach")
    run_id = launched.stdout.strip().splitlines()[-1]
    wait_show(project, run_id, lambda s: len(s["agentList"]) == 1)  # type: ignore[arg-type]
    assert piflow(project, "teammate", "stop", run_id[:8]).returncode == 0
    stopped = wait_show(project, run_id, lambda s: s["state"] == "stopped")
    assert stopped["error"] is None  # a manual stop is no error, as on the embedded engine
