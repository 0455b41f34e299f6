"""Hover: what a primitive or an option key does, what a model reference resolves to, what a role is;
in pi-subagents scripts, what a `runs.*` method or params key does (with the version that added
it), what an agent definition is and what a child's model string resolves to."""

from __future__ import annotations

from lsprotocol import types

from piflow.analysis.dialects.subagents import NAME as SUBAGENTS
from piflow.analysis.dialects.subagents_children import child_models
from piflow.analysis.option_keys import option_markdown
from piflow.errors import WorkflowError
from piflow.server.base import LanguageFeature, handler
from piflow.server.context import Target, target_at
from piflow.server.docs import (
    PRIMITIVES,
    SUBAGENT_GLOBALS,
    THINKING_DOCS,
    agent_markdown,
    global_markdown,
    param_markdown,
    primitive_markdown,
)
from piflow.server.documents import DocumentTable
from piflow.server.projects import Project
from piflow.server.snapshot import DocumentKind, Snapshot
from piflow.server.subagents_context import SubagentTarget, subagent_target_at


def model_markdown(project: Project, requested: str) -> str:
    info = project.resolve_model(requested)
    lines = []
    if info.alias_target is not None:
        lines.append(f"**`{requested}`** → `{info.alias_target}` (model alias, {project.capabilities.settings_path})")
    else:
        lines.append(f"**`{requested}`**" + (f" → `{info.resolved}`" if info.resolved not in (None, requested) else ""))
    if info.error is not None:
        lines.append(f"⚠ {info.error}")
    elif not info.verified:
        lines.append("Availability cannot be verified: no model registry (`models.json`) is configured.")
    elif info.available:
        lines.append("✓ available")
    else:
        lines.append("✗ not available: the model or its provider's API key is not configured")
    registry = project.config.registry if project.config is not None else None
    model = registry.model(info.resolved.split(":")[0]) if registry is not None and info.resolved else None
    if model is not None:
        details = [f"name: {model.name}"]
        if model.context_window:
            details.append(f"context: {model.context_window:,} tokens")
        if model.cost.input or model.cost.output:
            details.append(f"cost: ${model.cost.input:g} in / ${model.cost.output:g} out per Mtok")
        lines.append(" · ".join(details))
    return "\n\n".join(lines)


def role_markdown(project: Project, name: str) -> str:
    found = project.role(name)
    if found is None:
        known = ", ".join(f"`{role}`" for role in sorted(project.capabilities.agent_types)) or "none"
        return f"**role `{name}`** — unknown. Roles: {known}"
    role, path = found
    lines = [f"**role `{name}`**" + (f" — {role.description}" if role.description else "")]
    facts = []
    if role.model:
        facts.append(f"model: `{role.model}`" + (f" (thinking {role.thinking})" if role.thinking else ""))
    elif role.thinking:
        facts.append(f"thinking: {role.thinking}")
    facts.append("tools: " + (", ".join(f"`{tool}`" for tool in role.tools) if role.tools is not None else "all"))
    lines.append(" · ".join(facts))
    lines.append(f"[{path.name}]({path.as_uri()})")
    return "\n\n".join(lines)


def tool_markdown(project: Project, name: str) -> str:
    if name in project.capabilities.tools:
        return f"**tool `{name}`** — available to workflow agents"
    known = ", ".join(f"`{tool}`" for tool in sorted(project.capabilities.tools))
    return f"**tool `{name}`** — not available. Tools: {known}"


def agent_definition_markdown(project: Project, name: str) -> str:
    catalog = project.capabilities.agent_catalog
    agent = catalog.get(name) if catalog is not None else None
    if agent is not None:
        return agent_markdown(agent)
    if catalog is not None and catalog.is_disabled(name):
        return f"**agent `{name}`** — disabled by `subagents.agentOverrides` in pi's settings.json"
    known = ", ".join(f"`{agent}`" for agent in sorted(catalog.names)) if catalog is not None else ""
    return f"**agent `{name}`** — unknown. Agents: {known or 'none'}"


def child_model_markdown(project: Project, requested: str) -> str:
    """A child's `provider/id[:thinking]` as spec B resolves it: the model, its thinking, the registry entry."""
    if requested.strip() == "inherit":
        return "**`inherit`** — the child uses the parent's model"
    models = child_models(project.capabilities)
    known = models.known
    try:
        model, thinking = models.resolve(requested)
    except WorkflowError as error:
        return f"**`{requested}`**\n\n⚠ {error.message}"
    lines = [f"**`{requested}`**" + (f" → `{model}`" if model != requested else "")
             + (f" · thinking {thinking}" if thinking else "")]
    if known is None:
        lines.append("Availability cannot be verified: no model registry (`models.json`) is configured.")
    registry = project.config.registry if project.config is not None else None
    entry = registry.model(model) if registry is not None else None
    if entry is not None:
        lines.append(f"name: {entry.name}")
    return "\n\n".join(lines)


def subagent_markdown(snapshot: Snapshot, target: SubagentTarget) -> str:
    if target.kind == "global":
        return global_markdown(SUBAGENT_GLOBALS[target.value])
    if target.kind == "agent":
        return agent_definition_markdown(snapshot.project, target.value)
    if target.kind == "model":
        return child_model_markdown(snapshot.project, target.value)
    assert target.params is not None
    return param_markdown(target.params, target.key or target.value)


def markdown_for(snapshot: Snapshot, target: Target) -> str:
    project = snapshot.project
    if target.kind == "primitive":
        return primitive_markdown(PRIMITIVES[target.value])
    if target.kind == "option" and target.owner is not None:
        return option_markdown(target.owner, target.value)
    if target.kind == "model":
        return model_markdown(project, target.value)
    if target.kind == "role":
        return role_markdown(project, target.value)
    if target.kind == "tool":
        return tool_markdown(project, target.value)
    return f"**thinking `{target.value}`** — {THINKING_DOCS.get(target.value, 'not a thinking level')}"


def hover_at(snapshot: Snapshot, position: types.Position, markdown: bool) -> types.Hover | None:
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    offset = snapshot.offset(position)
    if snapshot.dialect == SUBAGENTS:
        found = subagent_target_at(snapshot, offset)
        if found is None:
            return None
        return types.Hover(types.MarkupContent(kind, subagent_markdown(snapshot, found)),
                           snapshot.range(found.start, found.end))
    target = target_at(snapshot, offset)
    if target is None:
        return None
    content = types.MarkupContent(kind, markdown_for(snapshot, target))
    return types.Hover(content, snapshot.range(target.start, target.end))


class Hover(LanguageFeature):
    def register(self) -> None:
        self.server.feature(types.TEXT_DOCUMENT_HOVER)(handler(self._hover))

    async def _hover(self, params: types.HoverParams) -> types.Hover | None:
        snapshot = await self.server.get_feature(DocumentTable).current(params.text_document.uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        formats = self.server.client_capabilities.text_document
        hover = formats.hover if formats is not None else None
        markdown = hover is None or not hover.content_format or types.MarkupKind.Markdown in hover.content_format
        return await self.server.run_in_thread(hover_at, snapshot, params.position, markdown)
