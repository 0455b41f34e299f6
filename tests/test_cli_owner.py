"""`piflow run` and `piflow resume` own their run: the worker is spawned before the engine is imported
(issue 15: fast start), and a worker no run took is gone when the command ends.

Every command runs in a fresh interpreter with its own HOME and XDG directories, on the scripted
backend (no network, no keys).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from isolation import isolated_environment
from piflow.engine.store import RunStore, default_store_path

CHECKPOINT = """const draft = await agent("Draft", { label: "writer" });
await checkpoint({ name: "ship", prompt: "Ship it?", context: { draft } });
return draft;
"""

# Each spawn of a worker records which of these the process had imported at that moment.
SPAWN_PROBE = """
import json, sys
from piflow.engine.worker import command
HEAVY = ("piflow.cli_owning", "piflow.cli_runs", "piflow.engine.engine", "piflow.engine.runs", "piflow.engine.views",
         "piflow.analysis.launch", "piflow.analysis.dialects", "piflow.config.availability",
         "anyio", "piflow.engine.worker.protocol", "piflow.engine.worker.client")
start, spawned = command.start_worker, []
def recording(**options):
    spawned.append([name for name in HEAVY if name in sys.modules])
    return start(**options)
command.start_worker = recording
from piflow.cli import main
code = main({argv!r})
sys.stdout.flush()
print("SPAWNED " + json.dumps({{"code": code, "spawned": spawned}}))
"""


class Project:
    def __init__(self, base: Path) -> None:
        home = base / "home"
        (home / ".pi" / "agent").mkdir(parents=True)
        self.root = base / "project"
        self.root.mkdir()
        (self.root / "ship.workflow.js").write_text(CHECKPOINT, encoding="utf-8")
        (self.root / "one.workflow.js").write_text('return await agent("Say hi", { label: "a" });\n', encoding="utf-8")
        self.env = isolated_environment(base, home, home / ".pi" / "agent")

    @property
    def store(self) -> Path:
        return default_store_path(self.root, self.env)

    def piflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=120, check=False)

    def probe_spawns(self, *argv: str) -> tuple[int, list[list[str]], str]:
        """Run `piflow argv` in-process under the spawn probe: its exit code, what each worker spawn
        saw imported, and its output before the probe's line."""
        code = textwrap.dedent(SPAWN_PROBE.format(argv=list(argv)))
        done = subprocess.run([sys.executable, "-c", code], cwd=self.root, env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)
        output, _, probe = done.stdout.rpartition("SPAWNED ")
        assert probe, done.stderr
        found = json.loads(probe)
        return found["code"], found["spawned"], output

    def interrupted_run(self) -> str:
        """A run whose owner was killed while it awaited its checkpoint."""
        owner = subprocess.Popen([sys.executable, "-m", "piflow", "run", "ship.workflow.js"], cwd=self.root,
                                 env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert owner.stdout is not None
            run_id = owner.stdout.readline().strip()
            with RunStore.open(self.store) as store:
                deadline = time.monotonic() + 60
                while not store.awaiting_checkpoints(run_id):
                    assert time.monotonic() < deadline and owner.poll() is None
                    time.sleep(0.05)
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait()
        return run_id

    def provisional_logs(self) -> list[Path]:
        runs = self.store.parent / "runs"
        return sorted(runs.glob(".starting-*")) if runs.exists() else []


def test_a_run_spawns_its_worker_once_before_it_imports_the_engine_or_the_analysis(tmp_path: Path) -> None:
    project = Project(tmp_path)
    code, spawned, output = project.probe_spawns("run", "one.workflow.js", "--json")
    assert code == 0
    assert json.loads(output.splitlines()[-1])["result"] == "[scripted] Say hi"
    assert spawned == [[]]


def test_a_resume_spawns_its_worker_before_the_engine_and_replays_the_run_to_its_end(tmp_path: Path) -> None:
    project = Project(tmp_path)
    run_id = project.interrupted_run()
    code, spawned, output = project.probe_spawns("resume", run_id[:8], "--answer", "ship=approve", "--json")
    assert code == 0
    assert json.loads(output.splitlines()[-1]) == {
        "runId": run_id, "state": "completed", "result": "[scripted] Draft", "error": None}
    assert spawned == [[]]
    assert project.provisional_logs() == []  # the worker's log went to the run's directory


def test_a_resume_that_starts_nothing_leaves_no_worker_log_behind(tmp_path: Path) -> None:
    project = Project(tmp_path)
    assert project.piflow("run", "one.workflow.js", "--json").returncode == 0
    unknown = project.piflow("resume", "0123456789abcdef")
    assert unknown.returncode == 2
    assert "no run 0123456789abcdef in the project" in unknown.stderr
    (run,) = json.loads(project.piflow("runs", "--all", "--json").stdout)
    finished = project.piflow("resume", run["runId"])
    assert finished.returncode == 2
    assert "RESUME_INCOMPATIBLE: Cannot resume completed run" in finished.stderr
    assert project.provisional_logs() == []


def test_a_missing_script_is_refused_before_any_worker_or_run_store_exists(tmp_path: Path) -> None:
    project = Project(tmp_path)
    missing = project.piflow("run", "missing.workflow.js")
    assert missing.returncode == 2
    assert "missing.workflow.js" in missing.stderr
    assert not project.store.parent.exists()
