"""Go to definition: a role to its `.md` file, a model alias to its line in settings.json, a model to
its entry in models.json; in pi-subagents scripts, an agent name to its definition's `.md` (the
line of its `name:`) and a child's model to its models.json entry."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from piflow.analysis.dialects.subagents import NAME as SUBAGENTS
from piflow.server.base import LanguageFeature, handler
from piflow.server.context import target_at
from piflow.server.documents import DocumentTable
from piflow.server.snapshot import DocumentKind, Snapshot
from piflow.server.subagents_context import subagent_target_at


def _location(path: Path, line: int, character: int) -> types.Location:
    position = types.Position(line, character)
    return types.Location(path.as_uri(), types.Range(position, position))


def subagent_definition_at(snapshot: Snapshot, offset: int) -> types.Location | None:
    target = subagent_target_at(snapshot, offset)
    project = snapshot.project
    if target is None:
        return None
    if target.kind == "agent":
        catalog = project.capabilities.agent_catalog
        agent = catalog.get(target.value) if catalog is not None else None
        if agent is None and catalog is not None:  # a disabled agent still has its file
            agent = catalog.discovered.get(target.value)
        return _location(agent.path, agent.line, 0) if agent is not None and agent.path is not None else None
    if target.kind == "model":
        model = project.model_location(target.value.rsplit(":", 1)[0])
        return _location(*model) if model is not None else None
    return None


def definition_at(snapshot: Snapshot, position: types.Position) -> types.Location | None:
    if snapshot.dialect == SUBAGENTS:
        return subagent_definition_at(snapshot, snapshot.offset(position))
    target = target_at(snapshot, snapshot.offset(position))
    if target is None:
        return None
    project = snapshot.project
    if target.kind == "role":
        found = project.role(target.value)
        return _location(found[1], 0, 0) if found is not None else None
    if target.kind != "model":
        return None
    alias = project.alias_location(target.value)
    if alias is not None:
        return _location(*alias)
    info = project.resolve_model(target.value)
    model = project.model_location(info.resolved.split(":")[0]) if info.resolved else None
    return _location(*model) if model is not None else None


class Definition(LanguageFeature):
    def register(self) -> None:
        self.server.feature(types.TEXT_DOCUMENT_DEFINITION)(handler(self._definition))

    async def _definition(self, params: types.DefinitionParams) -> types.Location | None:
        snapshot = await self.server.get_feature(DocumentTable).current(params.text_document.uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        return await self.server.run_in_thread(definition_at, snapshot, params.position)
