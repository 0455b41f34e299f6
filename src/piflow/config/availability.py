"""Which models and tools a project's scripts may use on a backend: the one answer `piflow check`, the
editor and `piflow run`'s launch validation share, so a script the first two pass is never refused by the last.

A model is *known* when `models.json` lists it. A known model whose provider key is missing from
the environment is still *available* on a backend that reads no key (scripted answers from
fixtures; pi resolves its own credentials), and unavailable only where a run would need the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from piflow.config.project import BackendName, ProjectConfig
from piflow.config.registry import ModelRegistry

__all__ = [
    "CHILD_AGENT_TOOL", "DEFAULT_ROOT_TOOLS", "KEYLESS_BACKENDS", "PI_BUILTIN_TOOLS", "SCRIPTED_MODEL",
    "ModelAvailability", "model_availability", "root_tools",
]

PI_BUILTIN_TOOLS: Final = ("read", "bash", "edit", "write", "grep", "find", "ls")
"""pi's built-in tools (0.80): what pi offers when it cannot be asked. Defined here, not beside the
probing in `pi_tools`, so that a run on another backend never loads the probing."""

CHILD_AGENT_TOOL: Final = "agent"
"""The tool that lets an agent start child agents (spec J.5); only agents that name it get it."""
DEFAULT_ROOT_TOOLS: Final = (*PI_BUILTIN_TOOLS, CHILD_AGENT_TOOL)
"""pi's built-in tools plus `agent`: the root tools of every backend."""
EXTENSION_TOOL_BACKENDS: Final[frozenset[BackendName]] = frozenset({"scripted", "openai"})
"""Backends that offer the tools piflow extensions register: openai runs them in its tool runtime
(scripted answers from fixtures, whatever the tools). pi runs only the tools pi itself has."""

KEYLESS_BACKENDS: Final[frozenset[BackendName]] = frozenset({"scripted", "pi"})
"""Backends that never read a provider's key from piflow's environment."""

SCRIPTED_MODEL: Final = "scripted/default"
"""The launching model when nothing is configured: the scripted backend answers for any model."""


@dataclass(frozen=True)
class ModelAvailability:
    """Models of one configuration on one backend.

    `verified` is False without a model registry: nothing but the launching model is known then,
    and launches skip the availability check (spec B.2 with no registry). `missing_credentials`
    maps every known model whose key is unset to the variable to set, whether or not the backend
    needs it.
    """

    verified: bool
    known: frozenset[str]
    available: frozenset[str]
    launch_model: str
    missing_credentials: Mapping[str, str] = field(default_factory=dict)


def model_availability(
    registry: ModelRegistry, project: ProjectConfig, backend: str | None = None
) -> ModelAvailability:
    """Availability for runs on `backend` (default: the project's), with `[backends.<provider>]` overrides."""
    default = backend or project.backend
    available: list[str] = []
    missing: dict[str, str] = {}
    for provider in registry.providers.values():
        variable = registry.missing_key_variable(provider.name)
        usable = variable is None or project.provider_backends.get(provider.name, default) in KEYLESS_BACKENDS
        for model in provider.models:
            if variable is not None:
                missing[model.ref] = variable
            if usable:
                available.append(model.ref)
    launch_model = project.model or (min(available) if registry.configured and available else SCRIPTED_MODEL)
    known = frozenset(registry.known_models)
    if not registry.configured:
        available.append(launch_model)
        known |= {launch_model}
    return ModelAvailability(registry.configured, known, frozenset(available), launch_model, missing)


def root_tools(
    backend: str, extension_tools: Iterable[str] = (), pi_tools: Iterable[str] | None = None
) -> frozenset[str]:
    """The tools a script's agents may name on runs whose default backend is `backend`.

    `extension_tools` are the names installed piflow extensions register (`tools`); only backends
    that can run them offer them, so a script naming one elsewhere fails with UNKNOWN_TOOL before it
    runs instead of an agent silently lacking it. `pi_tools` are the tools pi offers this project
    (`config/pi_tools.py`: built-ins and pi extension tools, as last probed); on pi they replace
    the built-ins, which stand in while pi has not been asked.
    """
    if backend == "pi" and pi_tools is not None:
        return frozenset(pi_tools) | {CHILD_AGENT_TOOL}
    extra = frozenset(extension_tools) if backend in EXTENSION_TOOL_BACKENDS else frozenset()
    return frozenset(DEFAULT_ROOT_TOOLS) | extra
