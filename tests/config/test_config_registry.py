"""pi's model registry (`models.json`): known and available models, costs, keys, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from piflow.config.registry import ModelCost, load_model_registry
from piflow.errors import WorkflowError


def registry_file(tmp_path: Path, providers: dict[str, Any]) -> Path:
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"providers": providers}, indent=2), encoding="utf-8")
    return path


PROVIDERS: dict[str, Any] = {
    "ollama": {
        "baseUrl": "http://localhost:11434/v1",
        "api": "openai-completions",
        "models": [{"id": "llama3", "contextWindow": 8192}],
    },
    "openai": {
        "baseUrl": "https://api.openai.com/v1",
        "api": "openai-completions",
        "apiKey": "OPENAI_API_KEY",
        "models": [{"id": "gpt", "cost": {"input": 1.25, "output": 10, "cacheRead": 0.125}}],
    },
    "openrouter": {
        "baseUrl": "https://openrouter.ai/api/v1",
        "api": "openai-completions",
        "apiKey": "sk-or-literal",
        "models": [{"id": "anthropic/claude", "name": "Claude via OpenRouter", "reasoning": True}],
    },
    "vault": {
        "baseUrl": "https://vault.example/v1",
        "api": "openai-completions",
        "apiKey": "$VAULT_KEY",
        "models": [{"id": "m"}],
    },
    "anthropic": {"baseUrl": "https://proxy.example"},
}


def test_missing_file_is_an_unconfigured_empty_registry(tmp_path: Path) -> None:
    registry = load_model_registry(tmp_path / "models.json", environ={})
    assert not registry.configured
    assert registry.known_models == [] and registry.available_models == []


def test_known_models_list_every_configured_model(tmp_path: Path) -> None:
    registry = load_model_registry(registry_file(tmp_path, PROVIDERS), environ={})
    assert registry.configured
    assert registry.known_models == ["ollama/llama3", "openai/gpt", "openrouter/anthropic/claude", "vault/m"]


def test_available_models_follow_the_documented_key_rule(tmp_path: Path) -> None:
    path = registry_file(tmp_path, PROVIDERS)
    assert load_model_registry(path, environ={}).available_models == [
        "ollama/llama3",  # loopback server, no key needed
        "openrouter/anthropic/claude",  # literal key
    ]
    env = {"OPENAI_API_KEY": "sk-1", "VAULT_KEY": "v"}
    assert load_model_registry(path, environ=env).available_models == [
        "ollama/llama3",
        "openai/gpt",
        "openrouter/anthropic/claude",
        "vault/m",
    ]


def test_provider_without_key_is_available_through_its_default_variable(tmp_path: Path) -> None:
    providers = {
        "acme": {"baseUrl": "https://acme.example", "api": "openai-completions", "models": [{"id": "x"}]}
    }
    path = registry_file(tmp_path, providers)
    assert load_model_registry(path, environ={}).available_models == []
    assert load_model_registry(path, environ={"ACME_API_KEY": "k"}).available_models == ["acme/x"]


def test_api_key_resolution_matches_pi(tmp_path: Path) -> None:
    path = registry_file(tmp_path, PROVIDERS)
    registry = load_model_registry(path, environ={"OPENAI_API_KEY": "from-env", "VAULT_KEY": "v"})
    assert registry.api_key("openai") == "from-env"
    assert registry.api_key("openrouter") == "sk-or-literal"
    assert registry.api_key("vault") == "v"
    assert load_model_registry(path, environ={}).api_key("openai") == "OPENAI_API_KEY"


def test_command_keys_run_only_when_asked(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    providers = {
        "cmd": {
            "baseUrl": "https://x",
            "api": "a",
            "apiKey": f"!touch {marker} && echo secret",
            "models": [{"id": "m"}],
        }
    }
    registry = load_model_registry(registry_file(tmp_path, providers), environ={})
    assert registry.available_models == ["cmd/m"] and not marker.exists()
    assert registry.api_key("cmd") == "secret" and marker.exists()


def test_model_lookup_and_cost_table(tmp_path: Path) -> None:
    registry = load_model_registry(registry_file(tmp_path, PROVIDERS), environ={})
    model = registry.model("openrouter/anthropic/claude")
    assert model is not None and model.name == "Claude via OpenRouter" and model.reasoning
    assert registry.cost("openai/gpt") == ModelCost(1.25, 10.0, 0.125, 0.0)
    assert registry.cost("openai/gpt").usd(1_000_000, 100_000) == pytest.approx(2.25)  # type: ignore[union-attr]
    assert registry.model("ollama/llama3").context_window == 8192  # type: ignore[union-attr]
    assert registry.model("nope/x") is None


def test_later_model_with_the_same_id_replaces_the_earlier(tmp_path: Path) -> None:
    providers = {
        "p": {"baseUrl": "u", "api": "a", "apiKey": "k", "models": [{"id": "m"}, {"id": "m", "name": "New"}]}
    }
    registry = load_model_registry(registry_file(tmp_path, providers), environ={})
    assert registry.known_models == ["p/m"] and registry.model("p/m").name == "New"  # type: ignore[union-attr]


def test_invalid_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text('{\n  "providers": {\n    "p": {,}\n  }\n}', encoding="utf-8")
    with pytest.raises(WorkflowError) as caught:
        load_model_registry(path)
    assert caught.value.code == "CONFIG_ERROR"
    assert caught.value.message.startswith(f"{path}:3:11: invalid JSON: Expected property name or '}}'")


def test_wrong_shape_points_at_the_offending_key(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(
        '{\n  "providers": {\n    "p": {\n      "baseUrl": "u", "api": "a",\n'
        '      "models": [{"id": "m", "cost": {"input": "1"}}]\n    }\n  }\n}',
        encoding="utf-8",
    )
    with pytest.raises(WorkflowError) as caught:
        load_model_registry(path)
    assert (
        caught.value.message == f"{path}:5:39: providers.p.models[0].cost.input must be a non-negative number"
    )


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ({"p": []}, "providers.p must be an object"),
        ({"p": {"baseUrl": "u", "api": "a", "models": {}}}, "providers.p.models must be an array"),
        ({"p": {"api": "a", "models": [{"id": "m"}]}}, "providers.p needs a baseUrl when it defines models"),
        ({"p": {"baseUrl": "u", "models": [{"id": "m"}]}}, "providers.p.models[0] needs an api"),
        (
            {"p": {"baseUrl": "u", "api": "a", "models": [{"id": ""}]}},
            "providers.p.models[0].id must be a non-empty",
        ),
        (
            {"p": {"baseUrl": "u", "api": "a", "models": [{"id": "m", "maxTokens": 0}]}},
            "maxTokens must be a positive",
        ),
        ({"p": {"baseUrl": 1}}, "providers.p.baseUrl must be a string"),
    ],
)
def test_shape_errors(tmp_path: Path, providers: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkflowError) as caught:
        load_model_registry(registry_file(tmp_path, providers))
    assert caught.value.code == "CONFIG_ERROR" and message in caught.value.message


def test_unknown_keys_are_accepted_for_forward_compatibility(tmp_path: Path) -> None:
    providers = {
        "p": {
            "baseUrl": "u",
            "api": "a",
            "apiKey": "k",
            "compat": {"x": 1},
            "models": [{"id": "m", "input": ["text", "image"]}],
        }
    }
    registry = load_model_registry(registry_file(tmp_path, providers), environ={})
    assert registry.available_models == ["p/m"]
