"""The CLI says what went wrong, never with a Python traceback: bad JSON options are usage errors
before any run exists, piflow's own bugs are one line plus a saved report, a crashing worker is a
clear run error, and `piflow doctor` never shows credentials inside baseUrls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Project, make_project

from piflow.engine.worker.boundary import MAX_DEPTH


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path, latency_ms=0)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--args", _nested(MAX_DEPTH + 5), f"--args must be nested at most {MAX_DEPTH} levels deep"),
        ("--args", _nested(60_000), f"--args must be nested at most {MAX_DEPTH} levels deep"),
        ("--args", '{"name": "\\ud800"}', "--args must be well-formed Unicode (it contains a lone surrogate)"),
        ("--args", '{"\\udc80": 1}', "--args must be well-formed Unicode"),
        ("--budget", '{"tokens": ' + _nested(MAX_DEPTH + 1) + "}", "--budget must be nested at most"),
    ],
    ids=["deep", "very-deep", "surrogate-value", "surrogate-key", "deep-budget"],
)
@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detach"])
def test_unusable_json_options_are_usage_errors_before_any_run(
    project: Project, option: str, value: str, says: str, detach: bool
) -> None:
    completed = project.piflow("run", "quick.workflow.js", option, value, *(["--detach"] if detach else []))
    assert completed.returncode == 2
    assert completed.stderr.startswith(f"piflow run: {says}")
    assert "Traceback" not in completed.stderr
    assert project.run_ids() == []
    later = project.piflow("run", "quick.workflow.js", "--args", _nested(MAX_DEPTH))  # the limit itself is fine
    assert later.returncode == 0, later.stderr


def test_a_bug_in_piflow_is_one_line_and_a_saved_report(project: Project) -> None:
    program = (
        "import sys, piflow.cli, piflow.cli_runs\n"
        "def broken(args): raise RuntimeError('boom in runs')\n"
        "piflow.cli_runs._runs = broken\n"
        "sys.exit(piflow.cli.main(['runs']))\n"
    )
    completed = subprocess.run([sys.executable, "-c", program], cwd=project.root, env=project.env,
                               capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 70
    assert "Traceback" not in completed.stderr
    [line] = completed.stderr.splitlines()
    assert line.startswith("piflow: internal error, a bug in piflow (RuntimeError: boom in runs); the details are in ")
    assert "please report it" in line
    [report] = (Path(project.env["XDG_STATE_HOME"]) / "piflow" / "crashes").iterdir()
    assert str(report) in line
    text = report.read_text()
    assert "Traceback (most recent call last)" in text and "RuntimeError: boom in runs" in text
    assert project.piflow("runs").returncode == 0  # the real command still works


def test_a_crashing_worker_is_a_clear_run_error_and_its_traceback_goes_to_a_log(project: Project,
                                                                                   tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if 'piflow.engine.worker' in sys.orig_argv:\n"
        "    sys.stderr.write('Traceback (most recent call last):\\n  File \"x\", line 1\\n')\n"
        "    sys.stderr.write('MemoryError: simulated\\n')\n"
        "    sys.stderr.flush()\n"
        "    os._exit(3)\n"
    )
    project.env["PYTHONPATH"] = f"{hook}:{project.env['PYTHONPATH']}"
    completed = project.piflow("run", "quick.workflow.js")
    assert completed.returncode == 1
    assert "Traceback" not in completed.stdout + completed.stderr
    assert "Workflow child exited with code 3: MemoryError: simulated (worker log: " in completed.stdout
    run_id = completed.stdout.splitlines()[0]
    shown = json.loads(project.piflow("show", run_id, "--json").stdout)
    assert shown["state"] == "failed"
    log = Path(shown["error"]["message"].rsplit("(worker log: ", 1)[1].rstrip(")"))
    assert "Traceback (most recent call last)" in log.read_text()


def test_doctor_never_prints_the_credentials_of_a_base_url(project: Project) -> None:
    registry = {"providers": {"corp": {
        "baseUrl": "https://alice:s3cr%40t@llm.example.com/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m1"}],
    }}}
    (Path(project.env["PI_CODING_AGENT_DIR"]) / "models.json").write_text(json.dumps(registry))
    text = project.piflow("doctor")
    as_json = project.piflow("doctor", "--json")
    for completed in (text, as_json):
        assert "Traceback" not in completed.stderr
        assert "s3cr" not in completed.stdout and "alice" not in completed.stdout
        assert "https://***@llm.example.com/v1" in completed.stdout
