"""`[dialects]` globs in piflow.toml choose a script's dialect, and `piflow check` and `piflow run`
agree on it: a pi-subagents script that uses neither the pragma nor `runs.*` (only `emit`) is
checked and run as pi-subagents when a glob names it, as the default dialect when none does, and a
first-line pragma still wins over the glob. (The editor's side: tests/server/test_dialect_globs_editor.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from isolation import isolated_environment
from piflow.config.project import load_project_config, matches_globs
from piflow.errors import WorkflowError

TOML = '[piflow]\nbackend = "scripted"\n\n[dialects]\npi-subagents = ["fleet/**/*.js"]\n'
EMITTING = 'emit({ stage: "start" });\nreturn "done";\n'
NAN = "emit(NaN);\nreturn 1;\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "fleet" / "nightly").mkdir(parents=True)
    (root / "piflow.toml").write_text(TOML, encoding="utf-8")
    return root


def _piflow(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = isolated_environment(project.parent, project.parent / "home", project.parent / "agent")
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=240, check=False)


def _check(project: Path, *paths: str) -> dict[str, Any]:
    ran = _piflow(project, "check", "--format", "json", "--no-compile", *paths)
    assert ran.returncode in (0, 1), ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    return {item["path"]: item for item in report["files"]}


def test_globs_match_nested_and_top_level_files_of_the_project_only(project: Path) -> None:
    config = load_project_config(project)
    assert config.dialects == {"pi-subagents": ("fleet/**/*.js",)}
    assert config.dialect_for(project / "fleet" / "count.js") == "pi-subagents"  # `**/` matching no directory
    assert config.dialect_for(project / "fleet" / "nightly" / "scan.js") == "pi-subagents"
    assert config.dialect_for(project / "review.workflow.js") is None
    assert not matches_globs(project, project.parent / "fleet" / "count.js", ["**/*.js"])  # outside the project


def test_an_unknown_dialect_in_the_table_is_a_config_error_at_its_line(project: Path) -> None:
    (project / "piflow.toml").write_text(TOML + 'pi-agents = ["x/*.js"]\n', encoding="utf-8")
    with pytest.raises(WorkflowError) as caught:
        load_project_config(project)
    assert caught.value.code == "CONFIG_ERROR"
    assert caught.value.message.endswith("piflow.toml:6: unknown key dialects.pi-agents")


def test_check_uses_the_glob_then_the_pragma(project: Path) -> None:
    (project / "fleet" / "nan.js").write_text(NAN, encoding="utf-8")
    (project / "fleet" / "nightly" / "forced.js").write_text("// piflow: pi-extensible-workflows\n" + NAN)
    (project / "nan.workflow.js").write_text(NAN, encoding="utf-8")
    files = _check(project, "fleet/nan.js", "fleet/nightly/forced.js", "nan.workflow.js")
    assert files["fleet/nan.js"]["dialect"] == "pi-subagents"
    assert [f["code"] for f in files["fleet/nan.js"]["findings"]] == ["SUBAGENTS_BOUNDARY"]
    assert (files["fleet/nightly/forced.js"]["dialect"], files["fleet/nightly/forced.js"]["findings"]) == (
        "pi-extensible-workflows", [])
    assert (files["nan.workflow.js"]["dialect"], files["nan.workflow.js"]["findings"]) == (
        "pi-extensible-workflows", [])


def test_run_launches_a_glob_matched_script_as_pi_subagents(project: Path) -> None:
    (project / "fleet" / "count.js").write_text(EMITTING, encoding="utf-8")
    ran = _piflow(project, "run", "fleet/count.js", "--json")
    final = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (final["state"], final["result"], final["error"]) == ("completed", "done", None), ran.stdout + ran.stderr
    # the same text outside the glob is a first-dialect script, where `emit` does not exist
    (project / "count.workflow.js").write_text(EMITTING, encoding="utf-8")
    ran = _piflow(project, "run", "count.workflow.js", "--json")
    final = json.loads(ran.stdout.strip().splitlines()[-1])
    assert final["state"] == "failed" and "emit is not defined" in final["error"]["message"], ran.stdout
