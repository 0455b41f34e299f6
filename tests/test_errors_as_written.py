"""A script's own error reaches the user as the script wrote it (spec C, "authored"), in `piflow run`,
`piflow show` and `piflow show --json`, after the error went through the run store.

Every command runs `python -m piflow` in a subprocess with its own HOME, XDG directories and pi
agent dir, on the scripted backend.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from isolation import isolated_environment
from piflow.errors import WorkflowError, format_workflow_failure


def piflow(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home, root = tmp_path / "home", tmp_path / "project"
    (home / ".pi" / "agent").mkdir(parents=True)
    root.mkdir()
    (root / "fixtures.json").write_text('{"responses": []}')
    (root / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n\n[scripted]\nfixtures = "fixtures.json"\n')
    return root, isolated_environment(tmp_path, home, home / ".pi" / "agent")


def failed_run(project: tuple[Path, dict[str, str]], script: str) -> tuple[str, str]:
    """Run `script`; its run id and what `piflow run` printed."""
    root, env = project
    (root / "release.workflow.js").write_text(script)
    ran = piflow(root, env, "run", "release.workflow.js")
    assert ran.returncode == 1, ran.stderr
    return ran.stdout.splitlines()[0], ran.stdout + ran.stderr


def test_a_thrown_error_is_shown_verbatim_by_run_show_and_show_json(project: tuple[Path, dict[str, str]]) -> None:
    run_id, output = failed_run(project, 'await phase("release");\nthrow new Error("The release was rejected");\n')
    assert output.rstrip().endswith("failed: The release was rejected")
    assert "internal error" not in output and "INTERNAL_ERROR" not in output
    root, env = project
    shown = piflow(root, env, "show", run_id[:8])
    assert "Error: The release was rejected\n" in shown.stdout
    assert "internal error" not in shown.stdout
    error = json.loads(piflow(root, env, "show", "--json", run_id).stdout)["error"]
    assert error == {"code": "INTERNAL_ERROR", "message": "The release was rejected", "authored": True}


def test_a_thrown_string_gets_the_spec_prose_with_one_period(project: tuple[Path, dict[str, str]]) -> None:
    """`throw "..."` is not authored (spec C): the prose applies, and a detail that ends its own
    sentence is not followed by a second period."""
    run_id, output = failed_run(project, 'throw "the vote failed.";\n')
    assert output.rstrip().endswith("failed: INTERNAL_ERROR: The workflow encountered an internal error: "
                                    "the vote failed.")
    root, env = project
    assert "internal error: the vote failed.\n" in piflow(root, env, "show", run_id).stdout


def test_a_coded_error_keeps_its_code_and_template() -> None:
    error = WorkflowError("AGENT_FAILED", "AGENT_FAILED: the model refused.")
    assert format_workflow_failure(error) == "The workflow agent failed: the model refused."
    assert error.headline() == "AGENT_FAILED: The workflow agent failed: the model refused."
    assert WorkflowError.from_json(error.to_json()).authored is False
    authored = WorkflowError("INTERNAL_ERROR", "Nope.", authored=True)
    assert WorkflowError.from_json(authored.to_json()).headline() == "Nope."
