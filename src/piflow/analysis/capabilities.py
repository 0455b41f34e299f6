"""What a script may reference: available models, tools, roles, aliases (the preflight's `caps`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from piflow.config import PiflowConfig, model_availability, root_tools
from piflow.config.roles import RoleDefinition

if TYPE_CHECKING:
    from piflow.config.agent_definitions import AgentCatalog


@dataclass(frozen=True)
class Capabilities:
    """Sets of `provider/model` ids, tool names and role names a script is checked against.

    `known_models` (for bare-id resolution) defaults to `models`. `verified_models` is False
    when no model registry is configured: unknown models are then reported at information
    severity by `analyze` instead of as errors (preflight still follows the reference).
    `missing_credentials` (known model -> unset key variable) and `roles` (the definitions behind
    `agent_types`) let the editor say what a launch would refuse and why; preflight ignores them.
    """

    models: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()
    agent_types: frozenset[str] = frozenset()
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    known_models: frozenset[str] | None = None
    settings_path: str | None = None
    skip_model_availability: bool = False
    verified_models: bool = True
    missing_credentials: Mapping[str, str] = field(default_factory=dict)
    roles: Mapping[str, RoleDefinition] = field(default_factory=dict)
    launch_model: str | None = None
    """The parent's model: pi-subagents' bare model ids prefer its provider."""
    agents: AgentCatalog | Callable[[], AgentCatalog] | None = field(default=None, compare=False, repr=False)
    """pi-subagents agents, or how to read them on first use (only that dialect's rules need them)."""

    @property
    def agent_catalog(self) -> AgentCatalog | None:
        return self.agents() if callable(self.agents) else self.agents

    @classmethod
    def create(
        cls,
        models: Iterable[str] = (),
        tools: Iterable[str] = (),
        agent_types: Iterable[str] = (),
        model_aliases: Mapping[str, str] | None = None,
        known_models: Iterable[str] | None = None,
        settings_path: str | None = None,
        skip_model_availability: bool = False,
        verified_models: bool = True,
        missing_credentials: Mapping[str, str] | None = None,
        roles: Mapping[str, RoleDefinition] | None = None,
        launch_model: str | None = None,
        agents: AgentCatalog | Callable[[], AgentCatalog] | None = None,
    ) -> Capabilities:
        return cls(
            models=frozenset(models),
            tools=frozenset(tools),
            agent_types=frozenset(agent_types),
            model_aliases=dict(model_aliases or {}),
            known_models=None if known_models is None else frozenset(known_models),
            settings_path=settings_path,
            skip_model_availability=skip_model_availability,
            verified_models=verified_models,
            missing_credentials=dict(missing_credentials or {}),
            roles=dict(roles or {}),
            launch_model=launch_model,
            agents=agents,
        )

    @classmethod
    def from_config(
        cls,
        config: PiflowConfig,
        tools: Iterable[str] | None = None,
        backend: str | None = None,
        extension_tools: Iterable[str] = (),
    ) -> Capabilities:
        """What a script of this project may reference on `backend` (default: the configured one).

        The tools are `root_tools` (what a launch on that backend allows) unless `tools` says
        otherwise; `extension_tools` are the tool names installed extensions register.

        The models come from `model_availability`, as for a launch. Without a model registry
        nothing can be verified: `verified_models` is False, so analysis reports unknown models as
        "cannot verify" instead of errors.
        """
        models = model_availability(config.registry, config.project, backend)
        backend = backend or config.project.backend
        pi_tools = config.pi_tools.names if backend == "pi" and config.pi_tools is not None else None
        return cls.create(
            models=models.available,
            tools=root_tools(backend, extension_tools, pi_tools) if tools is None else tools,
            agent_types=config.roles.names,
            model_aliases=config.model_aliases,
            known_models=models.known,
            settings_path=str(config.settings_path),
            verified_models=models.verified,
            missing_credentials=models.missing_credentials,
            roles=config.roles.roles,
            launch_model=models.launch_model,
            agents=lambda: config.agent_catalog,
        )

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Capabilities:
        """Build from the wire shape `{models, tools, agentTypes, modelAliases?, knownModels?, ...}`."""
        return cls.create(
            models=obj.get("models") or (),
            tools=obj.get("tools") or (),
            agent_types=obj.get("agentTypes") or (),
            model_aliases=obj.get("modelAliases") or {},
            known_models=obj.get("knownModels"),
            settings_path=obj.get("settingsPath"),
            skip_model_availability=bool(obj.get("skipModelAvailability", False)),
        )

    @property
    def resolvable_models(self) -> frozenset[str]:
        """Models a bare id may resolve to."""
        return self.models if self.known_models is None else self.known_models

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "models": sorted(self.models),
            "tools": sorted(self.tools),
            "agentTypes": sorted(self.agent_types),
        }
        if self.model_aliases:
            data["modelAliases"] = dict(self.model_aliases)
        if self.known_models is not None:
            data["knownModels"] = sorted(self.known_models)
        if self.settings_path is not None:
            data["settingsPath"] = self.settings_path
        if self.skip_model_availability:
            data["skipModelAvailability"] = True
        return data
