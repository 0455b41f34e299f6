"""`[piflow] executor` and `[temporal]` in piflow.toml, and what a user sees when they are wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from isolation import isolated_environment
from piflow.config.project import load_project_config
from piflow.engine.temporal.settings import TemporalSettings
from piflow.errors import WorkflowError


def write(project: Path, text: str) -> Path:
    project.mkdir(exist_ok=True)
    (project / "piflow.toml").write_text(text)
    return project


def test_the_project_file_chooses_the_cluster_and_flags_override_it(tmp_path: Path) -> None:
    project = write(tmp_path / "p", '[piflow]\nexecutor = "temporal"\n\n[temporal]\naddress = "tc.example:7233"\n'
                                     'namespace = "team"\napi_key_env = "TEAM_KEY"\n')
    assert load_project_config(project).executor == "temporal"
    assert TemporalSettings.for_project(str(project)) == TemporalSettings(
        address="tc.example:7233", namespace="team", task_queue="piflow", api_key_env="TEAM_KEY")
    assert TemporalSettings.for_project(str(project), task_queue="q", address=None).task_queue == "q"


@pytest.mark.parametrize(("text", "message"), [
    ('[piflow]\nexecutor = "cloud"\n', 'piflow.toml:2: piflow.executor must be one of "embedded", "temporal"'),
    ('[temporal]\nadress = "x:1"\n', "piflow.toml:2: unknown key temporal.adress"),
])
def test_a_wrong_setting_names_its_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(WorkflowError) as raised:
        load_project_config(write(tmp_path / "p", text))
    assert raised.value.code == "CONFIG_ERROR" and raised.value.message.endswith(message)


def test_an_unreachable_cluster_is_a_config_error_that_says_what_to_do(tmp_path: Path) -> None:
    project = write(tmp_path / "p", '[piflow]\nexecutor = "temporal"\n\n[temporal]\naddress = "127.0.0.1:1"\n')
    env = isolated_environment(tmp_path, tmp_path / "home", tmp_path / "agent")
    done = subprocess.run([sys.executable, "-m", "piflow", "runs"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("piflow: CONFIG_ERROR: Cannot reach the Temporal cluster at 127.0.0.1:1")
    assert "temporal server start-dev" in done.stderr and "Traceback" not in done.stderr


def test_an_api_key_variable_that_is_not_set_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    from piflow.engine.temporal.settings import connect

    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(WorkflowError, match="api_key_env names NO_SUCH_KEY_VAR, which is not set"):
        anyio.run(connect, TemporalSettings(api_key_env="NO_SUCH_KEY_VAR"))
