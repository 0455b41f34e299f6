"""The run commands over the real CLI: what `piflow show` tells of agents, and the first-hour stumbles.

Every command runs `python -m piflow` in a subprocess with its own HOME, XDG directories and pi
agent dir, on the scripted backend (no network, no keys).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from isolation import isolated_environment
from piflow.engine.store import RunRecord, RunStore, default_store_path

BIG = "x" * (70 * 1024)
FIXTURES = {
    "responses": [
        {"match": {"label": "writer"}, "json": {"summary": "all good", "lines": 3},
         "tokens": {"input": 7, "output": 5}},
        {"match": {"label": "big"}, "text": BIG},
        {"match": {"label": "breaker"}, "fail": {"code": "AGENT_FAILED", "message": "the model refused"}},
    ]
}
SCRIPT = """const summary = await agent("Summarise the change", { label: "writer" });
const big = await agent("Say a lot", { label: "big" });
await agent("Break", { label: "breaker", retries: 1 });
return { summary, size: big.length };
"""
CHECKPOINT = """const draft = await agent("Draft", { label: "writer" });
await checkpoint({ name: "ship", prompt: "Ship it?", context: { draft } });
return draft;
"""


@dataclass
class Project:
    root: Path
    env: dict[str, str]

    def piflow(self, *args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            [sys.executable, "-m", "piflow", *args],
            cwd=cwd or self.root, env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )
        if check:
            assert completed.returncode == 0, completed.stderr
        return completed

    def runs(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = json.loads(self.piflow("runs", "--all", "--json", check=True).stdout)
        return listed


def make_project(base: Path) -> Project:
    home = base / "home"
    root = base / "work" / "project"
    (home / ".pi" / "agent").mkdir(parents=True)
    root.mkdir(parents=True)
    (root / "fixtures.json").write_text(json.dumps(FIXTURES))
    (root / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n\n[scripted]\nfixtures = "fixtures.json"\n')
    (root / "review.workflow.js").write_text(SCRIPT)
    (root / "ship.workflow.js").write_text(CHECKPOINT)
    env = isolated_environment(base, home, home / ".pi" / "agent")
    return Project(root, env)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, str]:
    """One run whose first agents succeed and whose last fails after a retry (shared: tests only read it)."""
    project = make_project(tmp_path_factory.mktemp("failed"))
    completed = project.piflow("run", "review.workflow.js")
    assert completed.returncode == 1, completed.stderr
    return project, completed.stdout.splitlines()[0]


def test_show_tells_each_agents_output_or_error_and_the_state_in_words(failed_run: tuple[Project, str]) -> None:
    project, run_id = failed_run
    out = project.piflow("show", run_id[:8], check=True).stdout
    lines = out.splitlines()
    assert lines[0] == f"Run {run_id}: review"
    assert "State: failed" in lines
    assert "  #1 writer: completed, 1 attempt, 12 tokens, $0.0000, model scripted/default" in lines
    assert '     output: {"summary":"all good","lines":3}' in lines
    assert any(line.startswith("     output: xxxx") and line.endswith("…") for line in lines)
    assert "  #3 breaker: failed, 2 attempts, 0 tokens, $0.0000, model scripted/default" in lines
    assert "     error: AGENT_FAILED: the model refused" in lines
    assert "     attempt 1: AGENT_FAILED: the model refused" in lines  # why it was retried
    assert lines[-1] == "Error: AGENT_FAILED: The workflow agent failed: the model refused."


def test_show_json_carries_outputs_attempts_and_transcripts(failed_run: tuple[Project, str]) -> None:
    project, run_id = failed_run
    view = json.loads(project.piflow("show", run_id, "--json", check=True).stdout)
    writer, big, breaker = view["agentList"]
    assert writer["output"] == {"summary": "all good", "lines": 3}
    assert writer["outputPreview"] == '{"summary":"all good","lines":3}'
    assert writer["outputTruncated"] is False and writer["transcriptPath"] is None
    [attempt] = writer["attemptList"]
    assert attempt["setup"]["model"] == "scripted/default"  # what it ran with: tests/engine/test_attempt_audit.py
    assert {k: v for k, v in attempt.items() if k != "setup"} == {
        "number": 1, "state": "completed", "tokens": 12, "costUsd": 0.0}
    assert "output" not in big and big["outputTruncated"] is True  # 70 KiB: over the 64 KiB the view carries
    assert big["outputPreview"] == "x" * 199 + "…"
    assert "output" not in breaker and breaker["outputPreview"] is None and breaker["outputTruncated"] is False
    refused = {"code": "AGENT_FAILED", "message": "the model refused"}
    assert breaker["error"] == refused
    assert [(a["number"], a["state"], a["error"]) for a in breaker["attemptList"]] == [
        (1, "failed", refused), (2, "failed", refused)
    ]


def test_an_unknown_run_names_the_project_and_how_to_list_runs(failed_run: tuple[Project, str]) -> None:
    project, _ = failed_run
    completed = project.piflow("show", "nonsense")
    assert completed.returncode == 2
    assert "RESUME_INCOMPATIBLE" not in completed.stderr
    assert completed.stderr.strip() == (
        f"piflow show: no run nonsense in the project {project.root}; `piflow runs --all` lists its runs"
    )
    assert "at least 8 characters" in project.piflow("stop", "abc").stderr


def test_running_a_missing_file_says_it_does_not_exist(project: Project) -> None:
    completed = project.piflow("run", "missing.workflow.js")
    assert (completed.returncode, completed.stderr.strip()) == (2, "piflow run: missing.workflow.js: no such file")
    assert not default_store_path(project.root, project.env).exists()


def test_a_bad_answer_is_refused_before_any_run_exists(project: Project) -> None:
    completed = project.piflow("run", "ship.workflow.js", "--answer", "ship=yes")
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.strip() == "piflow run: --answer takes NAME=approve or NAME=reject, not 'ship=yes'"
    assert project.runs() == []
    answered = project.piflow("run", "ship.workflow.js", "--answer", "ship=approve", "--json")
    assert json.loads(answered.stdout.splitlines()[-1])["state"] == "completed"


def test_json_options_that_do_not_parse_say_where_before_any_run_exists(project: Project) -> None:
    args = project.piflow("run", "ship.workflow.js", "--args", "{topic: 1}")
    assert (args.returncode, args.stderr.strip().splitlines()[-1]) == (
        2, "piflow: INVALID_METADATA: --args is not valid JSON: Expecting property name enclosed in double quotes "
           "at column 2",
    )
    budget = project.piflow("run", "ship.workflow.js", "--budget", '{\n  "tokens": {"total": 10},\n}')
    assert (budget.returncode, budget.stderr.strip().splitlines()[-1]) == (
        2, "piflow: INVALID_METADATA: --budget is not valid JSON: Expecting property name enclosed in double quotes "
        "at line 3 column 1"
    )
    assert project.runs() == []


def test_runs_elsewhere_point_at_the_project_that_has_them(project: Project) -> None:
    project.piflow("run", "ship.workflow.js", "--answer", "ship=reject", check=False)
    outside = project.root.parent
    out = project.piflow("runs", cwd=outside, check=True).stdout.splitlines()
    assert out[0].startswith(f"No workflow runs in the project {outside} (run store ")
    assert out[2] == f"  {project.root}  1 run   cd {project.root} && piflow runs"


def test_runs_say_when_older_finished_runs_are_left_out(project: Project) -> None:
    with RunStore.open(default_store_path(project.root, project.env)) as store:
        for number in range(12):
            record = RunRecord(id=str(uuid.uuid4()), workflow_name=f"old{number}", cwd=str(project.root),
                               state="completed", concurrency=1, backend="scripted", created_at=number)
            store.create_run(record, "return 1;", {})
    lines = project.piflow("runs", check=True).stdout.splitlines()
    assert len(lines) == 11
    assert lines[-1] == "(2 older finished runs not shown: `piflow runs --all` lists every run)"
    assert len(project.piflow("runs", "--all", check=True).stdout.splitlines()) == 12


def test_output_into_a_closed_pipe_ends_quietly(project: Project) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "piflow", "doctor"], cwd=project.root, env=project.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # like `| head` that has read enough, before piflow writes anything
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141  # as if killed by SIGPIPE, the shell convention
    assert stderr == ""


def test_a_run_whose_reader_went_away_still_finishes(project: Project) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "piflow", "run", "ship.workflow.js", "--answer", "ship=approve"],
        cwd=project.root, env=project.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0
    assert stderr == ""
    assert [run["state"] for run in project.runs()] == ["completed"]


def test_no_child_is_reaped_behind_asyncios_back(project: Project) -> None:
    # "Unknown child process pid …, will report returncode 255" had two causes: a parent that
    # leaves SIGCHLD ignored (exec keeps that, and the kernel then reaps the worker itself), and
    # killing a worker that had just exited through `Popen.kill`, whose poll reaped it (about
    # one run in three).
    launcher = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'piflow', *sys.argv[1:]])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", launcher, "run", "ship.workflow.js", "--answer", "ship=approve"],
        cwd=project.root, env=project.env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "Unknown child process" not in completed.stderr
