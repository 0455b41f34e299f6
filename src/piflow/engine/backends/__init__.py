"""Agent backends and how a run picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from piflow.engine.backends.base import AgentBackend
from piflow.engine.backends.scripted import Fixtures, ScriptedBackend
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.environment import LaunchEnvironment

BACKENDS = ("scripted",)


def create_backend(name: str, fixtures: str | None, env: LaunchEnvironment) -> AgentBackend:
    """The backend a run uses; `fixtures` only matters to `scripted`."""
    if name == "scripted":
        return ScriptedBackend(Fixtures.load(fixtures) if fixtures else None)
    raise WorkflowError("CONFIG_ERROR", f"Unknown backend: {name} (available: {', '.join(BACKENDS)})")
