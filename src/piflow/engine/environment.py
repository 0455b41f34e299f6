"""What a launch or resume sees of the user's configuration, gathered from `piflow.config`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from piflow.config.project import ProjectConfig, find_project_root, load_project_config
from piflow.config.resources import ResourcePolicy
from piflow.engine.store.location import default_store_path

if TYPE_CHECKING:  # `project_root` and `store_path` come first in an owner process: they stay light
    from piflow.analysis.launch import LaunchContext, RegisteredWorkflow
    from piflow.config import ModelAvailability, ModelRegistry, PiflowConfig


@dataclass(frozen=True)
class LaunchEnvironment:
    """Settings, roles, models and tools of one project at one moment (strictly loaded).

    `models` is the availability on `backend`; `with_backend` re-derives it for a run on another.
    """

    cwd: str
    concurrency: int
    model_aliases: dict[str, str]
    settings_path: str
    project_trusted: bool
    root_tools: frozenset[str]
    backend: str
    fixtures: str | None
    agent_dir: Path
    registry: ModelRegistry
    project: ProjectConfig
    models: ModelAvailability
    backend_configured: bool = False
    workflows: dict[str, RegisteredWorkflow] = field(default_factory=dict)
    resource_policy: ResourcePolicy = field(default_factory=ResourcePolicy)
    """`disabledAgentResources` of the settings (global ∪ trusted project)."""
    extension_tools: frozenset[str] = frozenset()
    """Tool names installed extensions register; `root_tools` includes them where the backend runs them."""
    pi_tools: frozenset[str] | None = None
    """The tools pi offers this project (`config/pi_tools.py`), None when not known yet."""

    @property
    def provider_backends(self) -> dict[str, str]:
        return dict(self.project.provider_backends)

    @property
    def known_models(self) -> frozenset[str]:
        return self.models.known

    @property
    def registry_configured(self) -> bool:
        return self.models.verified

    @property
    def launch_model(self) -> str:
        return self.models.launch_model

    def with_backend(self, backend: str) -> LaunchEnvironment:
        """This environment for a run on `backend` (`piflow run --backend`)."""
        if backend == self.backend:
            return self
        from piflow.config.availability import model_availability, root_tools

        return replace(self, backend=backend, models=model_availability(self.registry, self.project, backend),
                       root_tools=root_tools(backend, self.extension_tools, self.pi_tools))

    def with_extension_tools(self, names: frozenset[str]) -> LaunchEnvironment:
        """This environment with the tools installed extensions register."""
        if not names:
            return self
        from piflow.config.availability import root_tools

        return replace(self, extension_tools=names, root_tools=root_tools(self.backend, names, self.pi_tools))

    def with_pi_tools(self, names: frozenset[str]) -> LaunchEnvironment:
        """This environment with the tools pi was found to offer (a launch on pi probes when the cache is stale)."""
        from piflow.config.availability import root_tools

        return replace(self, pi_tools=names, root_tools=root_tools(self.backend, self.extension_tools, names))

    def launch_context(self) -> LaunchContext:
        from piflow.analysis.launch import LaunchContext

        return LaunchContext(
            cwd=self.cwd,
            available_models=self.models.available,
            root_tools=self.root_tools,
            project_trusted=self.project_trusted,
            model_aliases=self.model_aliases,
            known_models=self.models.known,
            settings_path=self.settings_path,
            agent_dir=self.agent_dir,
            workflows=self.workflows,
            skip_model_availability=not self.models.verified,
        )


def environment_from_config(config: PiflowConfig) -> LaunchEnvironment:
    from piflow.config.availability import model_availability, root_tools

    pi_tools = config.pi_tools.names if config.project.backend == "pi" and config.pi_tools is not None else None
    return LaunchEnvironment(
        cwd=str(config.project_root),
        concurrency=config.settings.concurrency,
        model_aliases=config.model_aliases,
        settings_path=str(config.settings_path),
        project_trusted=config.trusted,
        root_tools=root_tools(config.project.backend, pi_tools=pi_tools),
        pi_tools=pi_tools,
        backend=config.project.backend,
        fixtures=str(config.project.fixtures) if config.project.fixtures else None,
        agent_dir=config.agent_dir,
        registry=config.registry,
        project=config.project,
        models=model_availability(config.registry, config.project),
        resource_policy=config.resource_policy,
        backend_configured=config.project.project_file is not None or config.project.user_file is not None,
    )


def load_environment(cwd: str) -> LaunchEnvironment:
    """Strict: a broken settings, role or registry file stops the launch with its error."""
    from piflow.config import load_config

    return environment_from_config(load_config(cwd))


def project_root(start: str) -> str:
    """The project a path belongs to: the nearest `piflow.toml` directory, else the path itself."""
    root = find_project_root(start)
    return str(root if root is not None else Path(start).resolve())


def store_path(cwd: str, *, tolerant: bool = False) -> Path:
    """The run store of a project: `[piflow] store` from piflow.toml, else the XDG state location.

    A broken piflow.toml (or one choosing a store it may not, outside an untrusted project)
    raises its CONFIG_ERROR: a command would otherwise list another store's runs as if the
    configured one were empty. `tolerant` (the language server, which shows the file's problems
    as diagnostics) uses the default location instead, never the refused one.
    """
    if tolerant:
        from piflow.config import load_config

        config = load_config(cwd, tolerant=True)
        return config.project.store or default_store_path(config.project_root)
    project = load_project_config(cwd)
    return project.store or default_store_path(project.project_root)
