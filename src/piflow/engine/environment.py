"""What a launch or resume sees of the user's configuration, gathered from `piflow.config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from piflow.analysis.launch import LaunchContext, RegisteredWorkflow
from piflow.config import DEFAULT_ROOT_TOOLS, ModelRegistry, PiflowConfig, load_config
from piflow.config.project import find_project_root
from piflow.engine.store import default_store_path

SCRIPTED_MODEL = "scripted/default"
"""The launching model when nothing is configured: the scripted backend answers for any model."""


@dataclass(frozen=True)
class LaunchEnvironment:
    """Settings, roles, models and tools of one project at one moment (strictly loaded)."""

    cwd: str
    concurrency: int
    model_aliases: dict[str, str]
    settings_path: str
    project_trusted: bool
    available_models: frozenset[str]
    known_models: frozenset[str]
    registry_configured: bool
    root_tools: frozenset[str]
    backend: str
    fixtures: str | None
    launch_model: str
    agent_dir: Path
    registry: ModelRegistry
    backend_configured: bool = False
    provider_backends: dict[str, str] = field(default_factory=dict)
    workflows: dict[str, RegisteredWorkflow] = field(default_factory=dict)

    def launch_context(self) -> LaunchContext:
        available = self.available_models if self.registry_configured else self.available_models | {
            self.launch_model
        }
        return LaunchContext(
            cwd=self.cwd,
            available_models=available,
            root_tools=self.root_tools,
            project_trusted=self.project_trusted,
            model_aliases=self.model_aliases,
            known_models=self.known_models | available,
            settings_path=self.settings_path,
            agent_dir=self.agent_dir,
            workflows=self.workflows,
            skip_model_availability=not self.registry_configured,
        )


def environment_from_config(config: PiflowConfig) -> LaunchEnvironment:
    registry = config.registry
    available = frozenset(registry.available_models)
    launch_model = getattr(config.project, "model", None) or (
        sorted(available)[0] if registry.configured and available else SCRIPTED_MODEL
    )
    return LaunchEnvironment(
        cwd=str(config.project_root),
        concurrency=config.settings.concurrency,
        model_aliases=config.model_aliases,
        settings_path=str(config.settings_path),
        project_trusted=config.trusted,
        available_models=available,
        known_models=frozenset(registry.known_models),
        registry_configured=registry.configured,
        root_tools=frozenset(DEFAULT_ROOT_TOOLS),
        backend=config.project.backend,
        fixtures=str(config.project.fixtures) if config.project.fixtures else None,
        launch_model=launch_model,
        agent_dir=config.agent_dir,
        registry=registry,
        backend_configured=config.project.project_file is not None or config.project.user_file is not None,
        provider_backends=dict(config.project.provider_backends),
    )


def load_environment(cwd: str) -> LaunchEnvironment:
    """Strict: a broken settings, role or registry file stops the launch with its error."""
    return environment_from_config(load_config(cwd))


def project_root(start: str) -> str:
    """The project a path belongs to: the nearest `piflow.toml` directory, else the path itself."""
    root = find_project_root(start)
    return str(root if root is not None else Path(start).resolve())


def store_path(cwd: str) -> Path:
    """The run store of a project: `[piflow] store` from piflow.toml, else the XDG state location."""
    config = load_config(cwd, tolerant=True)
    return config.project.store or default_store_path(config.project_root)
