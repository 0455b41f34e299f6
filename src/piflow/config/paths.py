"""Where pi and piflow keep their files, so every part of piflow reads the same locations as pi.

Every function takes an optional environment mapping so tests (and the server, which may run
with a different environment than the project) never have to patch `os.environ`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

WORKFLOWS_DIR_NAME: Final = "pi-extensible-workflows"
"""The directory pi-extensible-workflows uses under the agent dir and under a project's `.pi/`."""

PROJECT_CONFIG_NAME: Final = "piflow.toml"
SETTINGS_FILE_NAME: Final = "settings.json"
MODELS_FILE_NAME: Final = "models.json"


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def home_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's home: `$HOME` when set (as Node's `os.homedir()`), else the password database."""
    home = _env(environ).get("HOME")
    return Path(home) if home else Path(os.path.expanduser("~"))


def expand_home(path: str, environ: Mapping[str, str] | None = None) -> str:
    """Expand a leading `~` or `~/` the way pi does (no `~user` forms)."""
    if path == "~":
        return str(home_dir(environ))
    if path.startswith(("~/", "~\\")):
        return os.path.join(home_dir(environ), path[2:])
    return path


def agent_dir(environ: Mapping[str, str] | None = None) -> Path:
    """pi's agent dir: `$PI_CODING_AGENT_DIR` (with `~` expanded) or `~/.pi/agent`."""
    configured = _env(environ).get("PI_CODING_AGENT_DIR")
    if configured:
        return Path(expand_home(configured, environ))
    return home_dir(environ) / ".pi" / "agent"


def global_settings_path(agent: Path) -> Path:
    """`<agentDir>/pi-extensible-workflows/settings.json`: concurrency, aliases, resource policy."""
    return agent / WORKFLOWS_DIR_NAME / SETTINGS_FILE_NAME


def project_settings_path(project: Path) -> Path:
    """`<project>/.pi/pi-extensible-workflows/settings.json` (only its resource policy is used)."""
    return project / ".pi" / WORKFLOWS_DIR_NAME / SETTINGS_FILE_NAME


def global_roles_dir(agent: Path) -> Path:
    return agent / WORKFLOWS_DIR_NAME / "roles"


def project_roles_dir(project: Path) -> Path:
    return project / ".pi" / WORKFLOWS_DIR_NAME / "roles"


def models_registry_path(agent: Path) -> Path:
    """pi's model registry `<agentDir>/models.json`."""
    return agent / MODELS_FILE_NAME


def _xdg_dir(variable: str, fallback: tuple[str, ...], environ: Mapping[str, str] | None) -> Path:
    # The XDG spec says relative values are invalid and must be ignored.
    configured = _env(environ).get(variable)
    if configured and os.path.isabs(configured):
        return Path(configured)
    return home_dir(environ).joinpath(*fallback)


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """piflow's user config: `$XDG_CONFIG_HOME/piflow/config.toml` or `~/.config/piflow/config.toml`."""
    return _xdg_dir("XDG_CONFIG_HOME", (".config",), environ) / "piflow" / "config.toml"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """piflow's state (run store): `$XDG_STATE_HOME/piflow` or `~/.local/state/piflow`."""
    return _xdg_dir("XDG_STATE_HOME", (".local", "state"), environ) / "piflow"
