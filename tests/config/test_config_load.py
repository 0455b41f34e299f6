"""`load_config` and `Capabilities.from_config`: one view of pi's and piflow's files for a project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from piflow.analysis.capabilities import Capabilities
from piflow.config import DEFAULT_ROOT_TOOLS, load_config
from piflow.errors import WorkflowError


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def setup_pi(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    write(
        agent / "pi-extensible-workflows" / "settings.json",
        json.dumps({"concurrency": 4, "modelAliases": {"fast": "openai/gpt:low"}}),
    )
    write(agent / "pi-extensible-workflows" / "roles" / "reviewer.md", "---\nmodel: openai/gpt\n---\nReview.")
    write(
        agent / "models.json",
        json.dumps(
            {
                "providers": {
                    "openai": {
                        "baseUrl": "u",
                        "api": "openai-completions",
                        "apiKey": "sk",
                        "models": [{"id": "gpt"}],
                    }
                }
            }
        ),
    )
    project = tmp_path / "repo"
    write(project / ".pi" / "pi-extensible-workflows" / "roles" / "scout.md", "Scout.")
    write(
        project / ".pi" / "pi-extensible-workflows" / "settings.json",
        json.dumps({"disabledAgentResources": {"skills": ["noisy"]}}),
    )
    return project


def test_untrusted_project_ignores_its_pi_directory(tmp_path: Path, env: dict[str, str]) -> None:
    project = setup_pi(tmp_path)
    config = load_config(project, env)
    assert not config.trusted
    assert config.roles.names == ["reviewer"]
    assert config.project_settings is None and config.resource_policy.skills == ()
    assert config.settings.concurrency == 4 and config.model_aliases == {"fast": "openai/gpt:low"}


def test_trusted_project_adds_roles_and_resource_policy(tmp_path: Path, env: dict[str, str]) -> None:
    project = setup_pi(tmp_path)
    write(project / "piflow.toml", "[piflow]\ntrust_project = true\n")
    config = load_config(project / "sub" if (project / "sub").exists() else project, env)
    assert config.trusted
    assert config.roles.names == ["reviewer", "scout"] and config.roles.project_names == {"scout"}
    assert config.resource_policy.skills == ("noisy",)


def test_capabilities_from_config(tmp_path: Path, env: dict[str, str]) -> None:
    config = load_config(setup_pi(tmp_path), env)
    caps = Capabilities.from_config(config)
    assert caps.models == {"openai/gpt"} and caps.known_models == {"openai/gpt"}
    assert caps.tools == set(DEFAULT_ROOT_TOOLS)
    assert caps.agent_types == {"reviewer"}
    assert caps.model_aliases == {"fast": "openai/gpt:low"}
    assert caps.settings_path == str(tmp_path / "agent" / "pi-extensible-workflows" / "settings.json")
    assert caps.verified_models
    assert Capabilities.from_config(config, tools=["read"]).tools == {"read"}


def test_without_a_registry_models_cannot_be_verified(tmp_path: Path, env: dict[str, str]) -> None:
    config = load_config(tmp_path, env)
    caps = Capabilities.from_config(config)
    assert not config.registry.configured and not caps.verified_models
    assert caps.models == {"scripted/default"}  # only the launching model, which the scripted backend answers


def test_broken_settings_raise_unless_tolerant(tmp_path: Path, env: dict[str, str]) -> None:
    write(tmp_path / "agent" / "pi-extensible-workflows" / "settings.json", '{"concurrency": 0}')
    with pytest.raises(WorkflowError) as caught:
        load_config(tmp_path, env)
    assert caught.value.code == "INVALID_SETTINGS"
    config = load_config(tmp_path, env, tolerant=True)
    assert config.settings.concurrency == 8
    assert [problem.code for problem in config.problems] == ["INVALID_SETTINGS"]


def test_user_config_comes_from_xdg_config_home(tmp_path: Path, env: dict[str, str]) -> None:
    write(tmp_path / "xdg" / "piflow" / "config.toml", '[piflow]\nbackend = "pi"\n')
    assert load_config(tmp_path, env).project.backend == "pi"
