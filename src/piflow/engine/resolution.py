"""Turning an `agent()` call's options into what runs: role, model, thinking, tools (spec A.4, J.2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from piflow.analysis.agent_options import CORE_OPTION_KEYS, ROLE_CONFLICT, option_problem
from piflow.config import CHILD_AGENT_TOOL
from piflow.config.model_refs import ModelRef, parse_model_reference, resolve_model_reference, unknown_alias_error
from piflow.config.resources import ResourcePolicy, merge_resource_policies, resource_policy_from_json
from piflow.errors import WorkflowError


def validate_agent_options(options: Any, noun: str = "agent") -> dict[str, Any]:
    """The host checks of the core option keys, in the reference's order (A.4)."""
    if not isinstance(options, dict):
        raise WorkflowError("INVALID_METADATA", f"{noun} options must be a JSON object")
    for key in CORE_OPTION_KEYS:
        problem = option_problem(key, options[key]) if key in options else None
        if problem is not None:
            raise WorkflowError(*problem)
    if isinstance(options.get("role"), str) and any(k in options for k in ("model", "thinking", "tools")):
        raise WorkflowError("INVALID_METADATA", ROLE_CONFLICT)
    return options


@dataclass(frozen=True)
class RoleSpec:
    """What a role fixes for its agents (from the launch snapshot)."""

    prompt: str
    model: str | None = None
    thinking: str | None = None
    tools: tuple[str, ...] | None = None
    description: str | None = None
    resources: ResourcePolicy | None = None
    """The role's `disabledAgentResources`, merged into the policy of its agents only (spec D)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoleSpec:
        tools = data.get("tools")
        return cls(
            prompt=data.get("prompt", ""),
            model=data.get("model"),
            thinking=data.get("thinking"),
            tools=None if tools is None else tuple(tools),
            description=data.get("description"),
            resources=resource_policy_from_json(data.get("disabledAgentResources")),
        )


@dataclass(frozen=True)
class ResolutionContext:
    """What resolution may use: the run's snapshot, current aliases and the launching defaults."""

    roles: Mapping[str, RoleSpec]
    root_tools: tuple[str, ...]
    known_models: frozenset[str]
    launch_model: str
    aliases: Mapping[str, str] = field(default_factory=dict)
    blocked_aliases: Mapping[str, str] = field(default_factory=dict)
    settings_path: str | None = None
    launch_thinking: str | None = None
    """The launching level agents inherit (J.2); by default the launching model's `:thinking` suffix."""
    verify_models: bool = True
    resource_policy: ResourcePolicy = field(default_factory=ResourcePolicy)
    """`disabledAgentResources` of the settings (global, and the trusted project's), read at this execution."""

    @property
    def inherited_thinking(self) -> str | None:
        if self.launch_thinking is not None:
            return self.launch_thinking
        try:
            return parse_model_reference(self.aliases.get(self.launch_model, self.launch_model)).thinking
        except WorkflowError:  # a bare launching model id has no level to inherit
            return None


@dataclass(frozen=True)
class AgentSpec:
    """A resolved agent: everything its attempts need, plus how it is shown."""

    display_name: str
    label: str | None
    role: str | None
    requested_model: str | None
    model: ModelRef
    thinking: str | None
    tools: tuple[str, ...]
    system_append: str | None
    output_schema: dict[str, Any] | None
    retries: int
    timeout_ms: int | None
    options: dict[str, Any]
    fallback_models: tuple[ModelRef, ...] = ()
    resources: ResourcePolicy = field(default_factory=ResourcePolicy)
    """Skills and extensions this agent's sessions must not load (settings ∪ role, spec D)."""
    """Models to move to, in order, when an attempt fails with a provider failure (an agent's
    `fallbackModels`, SUBAGENTS_SPEC B); other failures never switch the model."""

    @property
    def model_text(self) -> str:
        return self.model.name if self.thinking is None else f"{self.model.name}:{self.thinking}"


def resolve_model(requested: str, ctx: ResolutionContext) -> ModelRef:
    """A model reference as this run may use it: aliases (blocked ones refused), bare ids, availability."""
    if requested in ctx.blocked_aliases and requested not in ctx.aliases:
        raise unknown_alias_error(requested, ctx.blocked_aliases[requested], ctx.settings_path)
    ref = resolve_model_reference(requested, ctx.aliases, ctx.known_models, ctx.settings_path)
    if ctx.verify_models and ref.name not in ctx.known_models:
        if requested in ctx.aliases:
            raise unknown_alias_error(requested, ref.name, ctx.settings_path)
        raise WorkflowError("UNKNOWN_MODEL", f"Unknown model: {ref.name}")
    return ref


def default_tools(root_tools: tuple[str, ...]) -> tuple[str, ...]:
    """An agent's tools when neither it nor its role names any: the root tools but `agent`, which
    only an agent that asks for it gets (children cost budget; pi has no such tool)."""
    return tuple(tool for tool in root_tools if tool != CHILD_AGENT_TOOL)


def resolve_agent(
    options: dict[str, Any], ctx: ResolutionContext, noun: str = "agent", inherited: tuple[str, ...] | None = None
) -> AgentSpec:
    """Validate and resolve one call's options (J.2 order: role, tools, model, thinking).

    `inherited` is a parent agent's tools: a child's default, and the boundary its tools stay in.
    """
    validate_agent_options(options, noun)
    role_name = options.get("role")
    role: RoleSpec | None = None
    if role_name is not None:
        role = ctx.roles.get(role_name)
        if role is None:
            raise WorkflowError("UNKNOWN_AGENT_TYPE", f"Unknown agent role: {role_name}")
    explicit_tools = options.get("tools")
    tools = tuple(explicit_tools) if explicit_tools is not None else (
        role.tools if role is not None and role.tools is not None
        else inherited if inherited is not None else default_tools(ctx.root_tools)
    )
    for tool in tools:
        if tool not in ctx.root_tools:
            raise WorkflowError("UNKNOWN_TOOL", f"Tool is outside the launching session boundary: {tool}")
        if inherited is not None and tool not in inherited:
            raise WorkflowError("UNKNOWN_TOOL", f"Child tool escalates parent boundary: {tool}")
    requested = options.get("model") or (role.model if role is not None else None) or ctx.launch_model
    model = resolve_model(requested, ctx)
    alias_thinking = None
    if requested in ctx.aliases:
        alias_thinking = parse_model_reference(ctx.aliases[requested]).thinking
    literal_thinking = model.thinking if requested not in ctx.aliases else None
    thinking = (
        options.get("thinking")
        or alias_thinking
        or (role.thinking if role is not None else None)
        or literal_thinking
        or ctx.inherited_thinking
    )
    label = options.get("label")
    label = label.strip() if isinstance(label, str) else None
    return AgentSpec(
        display_name=label or role_name or model.model,
        label=label,
        role=role_name,
        requested_model=requested if requested in ctx.aliases else None,
        model=ModelRef(model.provider, model.model),
        thinking=thinking,
        tools=tools,
        system_append=role.prompt if role is not None and role.prompt else None,
        output_schema=options.get("outputSchema"),
        retries=int(options.get("retries", 0)),
        timeout_ms=None if options.get("timeoutMs") is None else int(options["timeoutMs"]),
        options=options,
        resources=merge_resource_policies(ctx.resource_policy, role.resources if role is not None else None),
    )
