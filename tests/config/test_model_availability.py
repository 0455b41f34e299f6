"""Model availability per backend and piflow.toml's `[model_aliases]`: what check and launch both use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from piflow.analysis.capabilities import Capabilities
from piflow.config import load_config, model_availability
from piflow.engine.environment import environment_from_config
from piflow.errors import WorkflowError

REGISTRY = {
    "providers": {
        "openai": {"baseUrl": "https://api.openai.com/v1", "api": "openai-completions", "apiKey": "OPENAI_API_KEY",
                   "models": [{"id": "gpt"}]},
        "ollama": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions", "models": [{"id": "qwen"}]},
    }
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    write(tmp_path / "agent" / "models.json", json.dumps(REGISTRY))
    return {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def project(tmp_path: Path, toml: str) -> Path:
    write(tmp_path / "repo" / "piflow.toml", toml)
    return tmp_path / "repo"


def test_without_keys_every_known_model_runs_on_the_scripted_backend(tmp_path: Path, env: dict[str, str]) -> None:
    config = load_config(project(tmp_path, '[piflow]\nbackend = "scripted"\n'), env)
    models = model_availability(config.registry, config.project)
    assert models.available == {"openai/gpt", "ollama/qwen"}
    assert models.missing_credentials == {"openai/gpt": "OPENAI_API_KEY"}


def test_the_openai_backend_needs_the_key_and_a_local_server_needs_none(tmp_path: Path, env: dict[str, str]) -> None:
    config = load_config(project(tmp_path, '[piflow]\nbackend = "openai"\n'), env)
    assert model_availability(config.registry, config.project).available == {"ollama/qwen"}
    with_key = load_config(tmp_path / "repo", {**env, "OPENAI_API_KEY": "sk"})
    assert model_availability(with_key.registry, with_key.project).available == {"openai/gpt", "ollama/qwen"}


def test_a_per_provider_backend_decides_for_its_models(tmp_path: Path, env: dict[str, str]) -> None:
    config = load_config(project(tmp_path, '[piflow]\nbackend = "openai"\n[backends.openai]\nbackend = "scripted"\n'),
                         env)
    assert "openai/gpt" in model_availability(config.registry, config.project).available


def test_check_and_launch_see_the_same_models_for_the_same_backend(tmp_path: Path, env: dict[str, str]) -> None:
    config = load_config(project(tmp_path, '[piflow]\nbackend = "scripted"\n'), env)
    launch = environment_from_config(config)
    assert Capabilities.from_config(config).models == launch.launch_context().available_models
    on_openai = launch.with_backend("openai").launch_context()
    assert Capabilities.from_config(config, backend="openai").models == on_openai.available_models == {"ollama/qwen"}


def test_piflow_toml_supplies_aliases_that_pi_settings_override(tmp_path: Path, env: dict[str, str]) -> None:
    root = project(tmp_path, '[model_aliases]\nfast = "openai/gpt:low"\nsmart = "openai/gpt:high"\n')
    write(tmp_path / "agent" / "pi-extensible-workflows" / "settings.json",
          json.dumps({"modelAliases": {"smart": "ollama/qwen"}}))
    config = load_config(root, env)
    assert config.model_aliases == {"fast": "openai/gpt:low", "smart": "ollama/qwen"}
    assert Capabilities.from_config(config).model_aliases == environment_from_config(config).model_aliases


def test_a_bad_alias_in_piflow_toml_names_the_file_and_line(tmp_path: Path, env: dict[str, str]) -> None:
    root = project(tmp_path, '[piflow]\nbackend = "scripted"\n\n[model_aliases]\nfast = "not a spec"\n')
    with pytest.raises(WorkflowError) as caught:
        load_config(root, env)
    assert caught.value.code == "CONFIG_ERROR"
    what = "Invalid model alias target for fast: Invalid model spec: not a spec"
    assert caught.value.message == f"{root / 'piflow.toml'}:5: {what}"
