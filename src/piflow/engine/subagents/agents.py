"""The agent definitions a pi-subagents run is pinned to: saved in its launch snapshot, read on resume.

A run resolves its children against the catalog it was launched with (as the first dialect does
with roles), so editing an agent's `.md` while a run is interrupted cannot change what a resumed
child is: the snapshot keeps every enabled definition and the settings that resolution reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from piflow.config.agent_definitions import (
    AgentCatalog,
    AgentDefinition,
    ChildModel,
    SubagentSettings,
    resolve_child_model,
)
from piflow.config.availability import ModelAvailability
from piflow.engine.resolution import ResolutionContext
from piflow.errors import WorkflowError


def catalog_json(catalog: AgentCatalog) -> dict[str, Any]:
    """The snapshot form of a catalog: enabled definitions, disabled names, the settings children use."""
    settings = catalog.settings
    return {
        "definitions": {
            name: {
                "description": agent.description,
                "systemPrompt": agent.system_prompt,
                "model": agent.model,
                "thinking": agent.thinking,
                "maxThinking": agent.max_thinking,
                "tools": None if agent.tools is None else list(agent.tools),
                "fallbackModels": list(agent.fallback_models),
                "aliases": list(agent.aliases),
                "source": agent.source,
                "path": None if agent.path is None else str(agent.path),
                "overridden": list(agent.overridden),
            }
            for name, agent in catalog.definitions.items()
        },
        "disabled": sorted(catalog.disabled),
        "settings": {
            "defaultModel": settings.default_model,
            "maxSubagentSpawnsPerRun": settings.max_subagent_spawns_per_run,
            "maxSubagentSpawnsPerSession": settings.max_subagent_spawns_per_session,
            "globalConcurrencyLimit": settings.global_concurrency_limit,
        },
    }


def _definition(name: str, data: Mapping[str, Any]) -> AgentDefinition:
    tools = data.get("tools")
    path = data.get("path")
    return AgentDefinition(
        name=name,
        description=data.get("description"),
        system_prompt=data.get("systemPrompt") or "",
        model=data.get("model"),
        thinking=data.get("thinking"),
        tools=None if tools is None else tuple(tools),
        fallback_models=tuple(data.get("fallbackModels") or ()),
        source=data.get("source") or "builtin",
        path=None if path is None else Path(path),
        aliases=tuple(data.get("aliases") or ()),
        max_thinking=data.get("maxThinking"),
        overridden=tuple(data.get("overridden") or ()),
    )


@dataclass(frozen=True)
class SnapshotAgents:
    """The catalog of one run, with the model availability its children resolve against."""

    catalog: AgentCatalog
    availability: ModelAvailability

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any], resolution: ResolutionContext) -> SnapshotAgents:
        settings = data.get("settings") or {}
        catalog = AgentCatalog(
            definitions={name: _definition(name, agent) for name, agent in (data.get("definitions") or {}).items()},
            disabled=frozenset(data.get("disabled") or ()),
            settings=SubagentSettings(
                default_model=settings.get("defaultModel"),
                max_subagent_spawns_per_run=settings.get("maxSubagentSpawnsPerRun") or 64,
                max_subagent_spawns_per_session=settings.get("maxSubagentSpawnsPerSession"),
                global_concurrency_limit=settings.get("globalConcurrencyLimit"),
            ),
        )
        known = resolution.known_models
        availability = ModelAvailability(resolution.verify_models, known, known, resolution.launch_model, {})
        return cls(catalog, availability)

    @property
    def settings(self) -> SubagentSettings:
        return self.catalog.settings

    def definition(self, name: str) -> AgentDefinition:
        """The enabled agent `name`; UNKNOWN_AGENT_TYPE naming the way out when there is none."""
        found = self.catalog.get(name)
        if found is not None:
            return found
        if name in self.catalog.disabled:
            raise WorkflowError("UNKNOWN_AGENT_TYPE", f"Agent '{name}' is disabled by subagents.agentOverrides "
                                "in pi's settings.json; enable it or use another agent.")
        known = ", ".join(sorted(self.catalog.definitions)) or "none"
        raise WorkflowError("UNKNOWN_AGENT_TYPE", f"Unknown agent '{name}'. Known agents: {known} "
                            "(piflow doctor lists them and where each is defined).")

    def model(self, requested: str | None, definition: AgentDefinition) -> ChildModel:
        """The child's model and thinking (spec B precedence; UNKNOWN_MODEL with the spec's message)."""
        return resolve_child_model(requested, definition, catalog=self.catalog, availability=self.availability)
