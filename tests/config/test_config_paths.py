"""Where pi's and piflow's files are."""

from __future__ import annotations

from pathlib import Path

from piflow.config import paths


def test_agent_dir_defaults_to_pi_agent_under_home() -> None:
    assert paths.agent_dir({"HOME": "/h"}) == Path("/h/.pi/agent")


def test_agent_dir_from_environment_expands_tilde() -> None:
    assert paths.agent_dir({"HOME": "/h", "PI_CODING_AGENT_DIR": "~/pi"}) == Path("/h/pi")
    assert paths.agent_dir({"PI_CODING_AGENT_DIR": "/opt/agent"}) == Path("/opt/agent")


def test_settings_and_roles_locations() -> None:
    agent, project = Path("/a"), Path("/p")
    assert paths.global_settings_path(agent) == Path("/a/pi-extensible-workflows/settings.json")
    assert paths.project_settings_path(project) == Path("/p/.pi/pi-extensible-workflows/settings.json")
    assert paths.global_roles_dir(agent) == Path("/a/pi-extensible-workflows/roles")
    assert paths.project_roles_dir(project) == Path("/p/.pi/pi-extensible-workflows/roles")
    assert paths.models_registry_path(agent) == Path("/a/models.json")


def test_xdg_locations_ignore_relative_values() -> None:
    assert paths.user_config_path({"HOME": "/h"}) == Path("/h/.config/piflow/config.toml")
    assert paths.user_config_path({"HOME": "/h", "XDG_CONFIG_HOME": "/x"}) == Path("/x/piflow/config.toml")
    assert paths.state_dir({"HOME": "/h", "XDG_STATE_HOME": "relative"}) == Path("/h/.local/state/piflow")
    assert paths.state_dir({"HOME": "/h", "XDG_STATE_HOME": "/s"}) == Path("/s/piflow")
