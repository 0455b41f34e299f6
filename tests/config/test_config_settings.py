"""Workflow settings files (spec D): loading details and `save_model_aliases`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from piflow.config.settings import load_settings, save_model_aliases
from piflow.errors import WorkflowError


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_missing_file_gives_default_concurrency(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "nope" / "settings.json").to_json() == {"concurrency": 8}


def test_integral_float_concurrency_is_an_integer(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"concurrency": 4.0}', encoding="utf-8")
    assert load_settings(path).concurrency == 4


def test_unknown_key_reported_in_javascript_key_order(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"theme": 1, "7": 2}', encoding="utf-8")
    with pytest.raises(WorkflowError, match=r"Unknown workflow setting at .*: 7$"):
        load_settings(path)


def test_extension_selectors_resolve_relative_to_the_settings_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "agent" / "settings.json",
        {"disabledAgentResources": {"extensions": ["./ext.ts", "../x.ts"]}},
    )
    policy = load_settings(path).disabled_agent_resources
    assert policy is not None
    assert policy.extensions == (str(tmp_path / "agent" / "ext.ts"), str(tmp_path / "x.ts"))


def test_extension_selectors_are_canonical_and_deduplicated(tmp_path: Path) -> None:
    real = tmp_path / "real.ts"
    real.write_text("", encoding="utf-8")
    (tmp_path / "link.ts").symlink_to(real)
    path = write(
        tmp_path / "settings.json",
        {"disabledAgentResources": {"extensions": ["link.ts", f"file://{real}", " real.ts "]}},
    )
    policy = load_settings(path).disabled_agent_resources
    assert policy is not None and policy.extensions == (str(real),)


def test_skills_are_trimmed_and_deduplicated(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"disabledAgentResources": {"skills": [" a ", "a", "b"]}})
    policy = load_settings(path).disabled_agent_resources
    assert policy is not None and policy.skills == ("a", "b") and policy.extensions == ()


def test_home_selector_uses_the_given_environment(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"disabledAgentResources": {"extensions": ["~/e.ts"]}})
    policy = load_settings(path, environ={"HOME": "/somewhere"}).disabled_agent_resources
    assert policy is not None and policy.extensions == ("/somewhere/e.ts",)


def test_resource_kind_must_be_an_array(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"disabledAgentResources": {"skills": "a"}})
    with pytest.raises(WorkflowError) as caught:
        load_settings(path)
    assert (caught.value.code, caught.value.message) == (
        "INVALID_SETTINGS",
        f"{path}.disabledAgentResources.skills must be an array",
    )


def test_encoded_slash_in_file_url_is_not_a_valid_path(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"disabledAgentResources": {"extensions": ["file:///a%2Fb"]}})
    with pytest.raises(
        WorkflowError, match="must be a valid path: File URL path must not include encoded / characters"
    ):
        load_settings(path)


def test_unreadable_settings_file_is_a_config_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    path = write(tmp_path / "settings.json", {})
    path.chmod(0)
    with pytest.raises(WorkflowError) as caught:
        load_settings(path)
    assert (
        caught.value.message
        == f"Invalid workflow settings JSON at {path}: EACCES: permission denied, open '{path}'"
    )


def test_json_error_reports_v8_position_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{\n  "concurrency": 2\n  "modelAliases": {}\n}', encoding="utf-8")
    with pytest.raises(WorkflowError) as caught:
        load_settings(path)
    assert caught.value.code == "CONFIG_ERROR"
    assert caught.value.message.endswith(
        "Expected ',' or '}' after property value in JSON at position 23 (line 3 column 3)"
    )


# --- save_model_aliases -----------------------------------------------------------------------


def test_save_creates_directories_and_writes_two_space_json(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "pi-extensible-workflows" / "settings.json"
    save_model_aliases(path, {"fast": "openai/gpt:low"})
    assert (
        path.read_text(encoding="utf-8") == '{\n  "modelAliases": {\n    "fast": "openai/gpt:low"\n  }\n}\n'
    )


def test_save_keeps_other_keys_and_their_order(tmp_path: Path) -> None:
    path = write(
        tmp_path / "settings.json",
        {"modelAliases": {"old": "a/b"}, "concurrency": 3, "disabledAgentResources": {"skills": ["s"]}},
    )
    save_model_aliases(path, {"new": "c/d"})
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert list(saved) == ["modelAliases", "concurrency", "disabledAgentResources"]
    assert saved == {
        "modelAliases": {"new": "c/d"},
        "concurrency": 3,
        "disabledAgentResources": {"skills": ["s"]},
    }


def test_save_writes_a_private_file_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"concurrency": 2})
    path.chmod(0o644)
    save_model_aliases(path, {"a": "p/m"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [entry.name for entry in tmp_path.iterdir()] == ["settings.json"]


def test_save_rejects_invalid_aliases_without_touching_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"concurrency": 2})
    before = path.read_text(encoding="utf-8")
    with pytest.raises(WorkflowError) as caught:
        save_model_aliases(path, {"bad name": "p/m"})
    assert caught.value.code == "CONFIG_ERROR"
    assert caught.value.message == f"Invalid model alias name: bad name (settings: {path})"
    assert path.read_text(encoding="utf-8") == before


def test_save_refuses_to_rewrite_an_invalid_settings_file(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"concurrency": 99})
    with pytest.raises(WorkflowError) as caught:
        save_model_aliases(path, {"a": "p/m"})
    assert caught.value.code == "INVALID_SETTINGS"
    assert json.loads(path.read_text(encoding="utf-8")) == {"concurrency": 99}


def test_saved_file_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    save_model_aliases(path, {"reviewer": "anthropic/opus:high"})
    assert load_settings(path).model_aliases == {"reviewer": "anthropic/opus:high"}
