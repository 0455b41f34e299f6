"""Agent backends and how a run picks one: a default plus optional per-provider choices."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from piflow.errors import WorkflowError

if TYPE_CHECKING:  # the types only: a resume whose agents all replay loads no backend code
    from piflow.engine.backends.base import AgentBackend, AttemptControl, AttemptRequest
    from piflow.engine.environment import LaunchEnvironment
    from piflow.engine.tools.registry import Tool

BACKENDS = ("scripted", "openai", "pi")


class RoutingBackend:
    """Sends each attempt to the backend chosen for its model's provider (`[backends.<provider>]`)."""

    name = "routing"

    def __init__(self, default: AgentBackend, by_provider: Mapping[str, AgentBackend]) -> None:
        self.default = default
        self.by_provider = dict(by_provider)
        self._attempts: dict[str, AgentBackend] = {}

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        backend = self.by_provider.get(request.model.provider, self.default)
        self._attempts[request.agent_id] = backend
        try:
            return await backend.run_attempt(request, control)
        finally:
            self._attempts.pop(request.agent_id, None)

    async def steer(self, agent_id: str, message: str, mode: str) -> str:
        """Steer through the backend running that agent's attempt (`runs.steer`)."""
        backend = self._attempts.get(agent_id)
        steer = getattr(backend, "steer", None)
        if steer is None:
            name = getattr(backend, "name", "agent")
            raise WorkflowError("AGENT_FAILED", f"The {name} backend cannot steer a running child.")
        state: str = await steer(agent_id, message, mode)
        return state


class DeferredBackend:
    """A resumed run's backend, made when an attempt first needs it: a resume whose agents all replay
    never imports it (the openai and pi backends take 55-65 ms to import). Everything else, `steer`
    included, is the made backend's own."""

    name: str
    """The made backend's (read through `__getattr__`)."""

    def __init__(self, make: Callable[[], AgentBackend]) -> None:
        self._make = make

    @cached_property
    def backend(self) -> AgentBackend:
        return self._make()

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        return await self.backend.run_attempt(request, control)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_make", "backend"):  # not the made backend's: no recursion
            raise AttributeError(name)
        return getattr(self.backend, name)


def _single(
    name: str, fixtures: str | None, env: LaunchEnvironment, transcripts: Path, tools: Mapping[str, Tool]
) -> AgentBackend:
    if name == "scripted":
        from piflow.engine.backends.scripted import Fixtures, ScriptedBackend

        return ScriptedBackend(Fixtures.load(fixtures) if fixtures else None)
    if name == "openai":
        from piflow.engine.backends.openai import OpenAIBackend

        return OpenAIBackend(env.registry, transcripts_dir=transcripts, extension_tools=tools)
    if name == "pi":
        from piflow.engine.backends.pi import PiBackend

        return PiBackend(agent_dir=env.agent_dir)
    raise WorkflowError("CONFIG_ERROR", f"Unknown backend: {name} (available: {', '.join(BACKENDS)})")


def create_backend(
    name: str,
    fixtures: str | None,
    env: LaunchEnvironment,
    transcripts: Path,
    extension_tools: Mapping[str, Tool] | None = None,
) -> AgentBackend:
    """The backend of a run: `name` by default, and the project's per-provider overrides.

    `extension_tools` (the installed extensions' `tools`) are offered by the backends whose tool
    runtime runs them (openai); an agent gets the ones its `tools` name.
    """
    tools = dict(extension_tools or {})
    default = _single(name, fixtures, env, transcripts, tools)
    chosen = {provider: backend for provider, backend in env.provider_backends.items() if backend != name}
    if not chosen:
        return default
    built: dict[str, AgentBackend] = {}
    return RoutingBackend(default, {
        provider: built.setdefault(backend, _single(backend, fixtures, env, transcripts, tools))
        for provider, backend in chosen.items()
    })
