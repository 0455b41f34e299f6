"""Agent setup hooks of extensions: trusted code that adjusts every attempt before it starts (spec L.5)."""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from piflow.config.model_refs import THINKING_LEVELS, ModelRef
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.store import AttemptSetup

DEFAULT_PRIORITY = 10


@dataclass(frozen=True)
class AgentSetupHook:
    name: str
    priority: float
    setup: Callable[[dict[str, Any], dict[str, Any]], Any]


def parse_hook(name: str, spec: Any) -> AgentSetupHook:
    """`{priority?, setup}` with a callable `setup` and a finite numeric priority."""
    priority = spec.get("priority", DEFAULT_PRIORITY) if isinstance(spec, Mapping) else None
    if (
        not isinstance(spec, Mapping)
        or set(spec) - {"priority", "setup"}
        or not callable(spec.get("setup"))
        or isinstance(priority, bool)
        or not isinstance(priority, (int, float))
        or not math.isfinite(priority)
    ):
        raise WorkflowError("INVALID_METADATA", f"Invalid agent setup hook: {name}")
    return AgentSetupHook(name, float(priority), spec["setup"])


def ordered(hooks: Mapping[str, AgentSetupHook]) -> list[AgentSetupHook]:
    """Ascending priority, ties by name in code-unit order."""
    return sorted(hooks.values(), key=lambda hook: (hook.priority, hook.name.encode("utf-16-be")))


@dataclass(frozen=True)
class SessionSetup:
    """What an attempt starts with; hooks may change the task, model, thinking, tools and cwd."""

    task: str
    options: dict[str, Any]
    cwd: str
    model: ModelRef
    thinking: str | None
    tools: tuple[str, ...]
    session_label: str
    system_append: str | None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class SetupFailed(WorkflowError):
    """A hook threw: the agent fails without retry, with the hook's own message (spec L.5)."""


def _strings(value: Any) -> tuple[str, ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(item, str) for item in value) else None


def setup_summary(setup: SessionSetup, hooks: Sequence[AgentSetupHook]) -> AttemptSetup:
    """What an attempt records of its set-up: the hooks that ran and what the session started with."""
    from piflow.engine.store import AttemptSetup  # `piflow check` parses hooks without loading the store

    return AttemptSetup(hook_names=tuple(hook.name for hook in hooks), model=setup.model.name,
                        thinking=setup.thinking, tools=tuple(setup.tools), cwd=setup.cwd)


async def apply_hooks(
    hooks: Sequence[AgentSetupHook],
    setup: SessionSetup,
    context: dict[str, Any],
    resolve_model: Callable[[str], ModelRef],
) -> tuple[SessionSetup, AttemptSetup]:
    """Run every hook on a fresh copy of the setup; returns the adjusted setup and its summary.

    A hook may change the call's `options` (model, thinking, tools, cwd: spec L.5) or the session
    input itself (`tools`, `cwd`, `systemPromptAppend`); `options` wins where both changed.
    """
    state: dict[str, Any] = {
        "prompt": setup.task,
        "options": copy.deepcopy(setup.options),
        "sessionInput": {
            "cwd": setup.cwd,
            "model": setup.model.name,
            "tools": list(setup.tools),
            "sessionLabel": setup.session_label,
            "systemPromptAppend": setup.system_append,
            "options": copy.deepcopy(setup.options),
        },
    }
    for hook in hooks:
        try:
            result = hook.setup(state, context)
            if inspect.isawaitable(result):
                await result
        except WorkflowError as exc:
            raise SetupFailed(exc.code, exc.message) from None
        except Exception as exc:  # trusted code, but its failure must fail only this agent
            raise SetupFailed("AGENT_FAILED", str(exc) or f"Agent setup hook {hook.name} failed") from None
    options = _mapping(state.get("options"))
    session = _mapping(state.get("sessionInput"))
    adjusted = setup
    if isinstance(state.get("prompt"), str):
        adjusted = replace(adjusted, task=state["prompt"])
    if options.get("model") not in (None, setup.options.get("model")):
        adjusted = replace(adjusted, model=resolve_model(str(options["model"])))
    if options.get("thinking") in THINKING_LEVELS and options.get("thinking") != setup.options.get("thinking"):
        adjusted = replace(adjusted, thinking=options["thinking"])
    session_tools = _strings(session.get("tools"))
    if session_tools is not None and session_tools != setup.tools:
        adjusted = replace(adjusted, tools=session_tools)
    option_tools = _strings(options.get("tools"))
    if option_tools is not None and options["tools"] != setup.options.get("tools"):
        adjusted = replace(adjusted, tools=option_tools)
    append = session.get("systemPromptAppend")
    if append != setup.system_append and (append is None or isinstance(append, str)):
        adjusted = replace(adjusted, system_append=append)
    cwd = options.get("cwd") if isinstance(options.get("cwd"), str) else session.get("cwd")
    if isinstance(cwd, str) and cwd:
        adjusted = replace(adjusted, cwd=cwd)
    return adjusted, setup_summary(adjusted, hooks)
