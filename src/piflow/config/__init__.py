"""Everything piflow reads about its environment, gathered once per project (`load_config`).

pi's files (agent dir, workflow settings, roles, models.json) and piflow's own (piflow.toml,
the user config) are read here and nowhere else, so the analysis, the engine, the CLI and the
language server all see the same configuration. `Capabilities.from_config()` (in analysis: config
imports nothing above it) turns it into what a script is checked against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from piflow.config.paths import (
    agent_dir,
    global_roles_dir,
    global_settings_path,
    models_registry_path,
    project_roles_dir,
    project_settings_path,
    user_config_path,
)
from piflow.errors import WorkflowError
from piflow.lazy import export_lazily

if TYPE_CHECKING:
    from piflow.config.agent_definitions import AgentCatalog
    from piflow.config.availability import (
        CHILD_AGENT_TOOL,
        DEFAULT_ROOT_TOOLS,
        ModelAvailability,
        model_availability,
        root_tools,
    )
    from piflow.config.model_refs import THINKING_LEVELS, ModelRef, parse_model_reference, resolve_model_reference
    from piflow.config.pi_tools import PiToolList
    from piflow.config.project import ProjectConfig
    from piflow.config.registry import ModelRegistry
    from piflow.config.resources import ResourcePolicy
    from piflow.config.roles import RoleDefinition, RoleSet, parse_role_markdown
    from piflow.config.settings import WorkflowSettings, load_settings, save_model_aliases, validate_model_aliases

__all__ = [
    "CHILD_AGENT_TOOL",
    "DEFAULT_ROOT_TOOLS",
    "THINKING_LEVELS",
    "ModelAvailability",
    "ModelRef",
    "ModelRegistry",
    "PiflowConfig",
    "ProjectConfig",
    "ResourcePolicy",
    "RoleDefinition",
    "RoleSet",
    "WorkflowSettings",
    "load_config",
    "load_settings",
    "model_availability",
    "parse_model_reference",
    "parse_role_markdown",
    "resolve_model_reference",
    "root_tools",
    "save_model_aliases",
    "validate_model_aliases",
]

# Imported on first use (`piflow.lazy`): a resume reads settings, models and roles, never the
# pi-subagents agent definitions, and `piflow.config.files` alone must not load the rest.
export_lazily(
    __name__,
    {
        "CHILD_AGENT_TOOL": "piflow.config.availability",
        "DEFAULT_ROOT_TOOLS": "piflow.config.availability",
        "THINKING_LEVELS": "piflow.config.model_refs",
        "ModelAvailability": "piflow.config.availability",
        "ModelRef": "piflow.config.model_refs",
        "ModelRegistry": "piflow.config.registry",
        "ProjectConfig": "piflow.config.project",
        "ResourcePolicy": "piflow.config.resources",
        "RoleDefinition": "piflow.config.roles",
        "RoleSet": "piflow.config.roles",
        "WorkflowSettings": "piflow.config.settings",
        "load_settings": "piflow.config.settings",
        "model_availability": "piflow.config.availability",
        "parse_model_reference": "piflow.config.model_refs",
        "parse_role_markdown": "piflow.config.roles",
        "resolve_model_reference": "piflow.config.model_refs",
        "root_tools": "piflow.config.availability",
        "save_model_aliases": "piflow.config.settings",
        "validate_model_aliases": "piflow.config.settings",
    },
)

_T = TypeVar("_T")



@dataclass(frozen=True)
class PiflowConfig:
    """The configuration of one project as piflow sees it.

    `project_settings` is None when the project is untrusted (its `.pi/` is then ignored).
    `problems` collects the errors a tolerant load replaced with defaults (empty otherwise).
    """

    cwd: Path
    agent_dir: Path
    project: ProjectConfig
    settings_path: Path
    settings: WorkflowSettings
    project_settings_path: Path
    project_settings: WorkflowSettings | None
    roles: RoleSet
    registry: ModelRegistry
    problems: tuple[WorkflowError, ...] = field(default=())

    @property
    def trusted(self) -> bool:
        return self.project.trusted

    @property
    def project_root(self) -> Path:
        return self.project.project_root

    @property
    def model_aliases(self) -> dict[str, str]:
        """pi's aliases come only from its global settings (spec D) and win; piflow.toml's
        `[model_aliases]` fill in names they leave undefined, so a project can ship the aliases
        its scripts use (the bundled examples run on a machine without any pi settings)."""
        return {**self.project.model_aliases, **(self.settings.model_aliases or {})}

    @cached_property
    def agent_catalog(self) -> AgentCatalog:
        """pi-subagents agents (builtin, user, and the project's when trusted), read on first use:
        only the second dialect needs them. Bad files are `problems`, never errors."""
        from piflow.config.agent_definitions import load_agent_catalog

        return load_agent_catalog(self.project_root, agent_dir=self.agent_dir, trusted=self.trusted)

    @cached_property
    def pi_tools(self) -> PiToolList | None:
        """The tools pi offers this project as last probed, None when unknown or stale (read on first
        use: only runs and checks on the pi backend need them)."""
        from piflow.config.pi_tools import cached_pi_tools

        return cached_pi_tools(self.agent_dir, self.project_root)

    @property
    def resource_policy(self) -> ResourcePolicy:
        """Effective disabled resources: global union trusted project, order kept."""
        from piflow.config.resources import merge_resource_policies

        project = self.project_settings.disabled_agent_resources if self.project_settings else None
        return merge_resource_policies(self.settings.disabled_agent_resources, project)


def load_config(
    cwd: Path | str,
    environ: Mapping[str, str] | None = None,
    *,
    tolerant: bool = False,
    user_file: Path | None = None,
) -> PiflowConfig:
    """Read every configuration source for the project containing `cwd`.

    Strict by default: the first broken file raises its WorkflowError (a launch must not run
    on a half-read configuration). With `tolerant=True` (editor features) each broken source
    falls back to its default and the error is kept in `problems`.
    """
    from piflow.config.project import ProjectConfig, load_project_config
    from piflow.config.registry import ModelRegistry, load_model_registry
    from piflow.config.roles import RoleSet, load_roles
    from piflow.config.settings import WorkflowSettings, load_settings

    start = Path(cwd).resolve()
    problems: list[WorkflowError] = []

    def attempt(load: Callable[[], _T], default: _T) -> _T:
        try:
            return load()
        except WorkflowError as error:
            if not tolerant:
                raise
            problems.append(error)
            return default

    project = attempt(
        lambda: load_project_config(start, environ, user_file or user_config_path(environ)),
        ProjectConfig(project_root=start if start.is_dir() else start.parent),
    )
    agent = agent_dir(environ)
    root = project.project_root
    settings_file = global_settings_path(agent)
    project_settings_file = project_settings_path(root)
    settings = attempt(lambda: load_settings(settings_file, environ), WorkflowSettings())
    project_settings: WorkflowSettings | None = None
    if project.trusted:
        project_settings = attempt(lambda: load_settings(project_settings_file, environ), WorkflowSettings())
    roles = attempt(
        lambda: load_roles(global_roles_dir(agent), project_roles_dir(root) if project.trusted else None),
        RoleSet(),
    )
    registry = attempt(
        lambda: load_model_registry(models_registry_path(agent), environ),
        ModelRegistry(models_registry_path(agent)),
    )
    return PiflowConfig(
        cwd=start,
        agent_dir=agent,
        project=project,
        settings_path=settings_file,
        settings=settings,
        project_settings_path=project_settings_file,
        project_settings=project_settings,
        roles=roles,
        registry=registry,
        problems=tuple(problems),
    )
