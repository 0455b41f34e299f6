"""Document symbols: the outline of a workflow — phases, parallel/pipeline operations and their
branches, worktrees, conversations, checkpoints and agents (by label, else role, else prompt); in a
pi-subagents script, its children by workflow key (`runs.run` calls, `runs.all` items, lanes stages).

The outline follows the script's shape: a call nests under the parallel, pipeline or withWorktree
call whose source contains it (grouped by task or stage key), and top-level calls nest under the
`phase(...)` before them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from lsprotocol import types

from piflow.analysis.dialects.subagents import NAME as SUBAGENTS
from piflow.server.base import LanguageFeature, handler
from piflow.server.documents import DocumentTable
from piflow.server.snapshot import DocumentKind, Snapshot
from piflow.server.subagents_context import key_sites

CONTAINERS: Final = frozenset({"parallel", "pipeline", "withWorktree"})
KINDS: Final = {
    "phase": types.SymbolKind.Namespace,
    "parallel": types.SymbolKind.Package,
    "pipeline": types.SymbolKind.Package,
    "withWorktree": types.SymbolKind.Module,
    "agent": types.SymbolKind.Function,
    "conversation": types.SymbolKind.Class,
    "checkpoint": types.SymbolKind.Event,
}


def call_title(call: Any) -> str:
    """How a call is named in outlines and progress: label, role, name, or the prompt's start."""
    if call.kind == "agent":
        label = call.label if isinstance(call.label, str) else None
        text = str(label or call.role or call.prompt or "agent")
        return text if len(text) <= 48 else text[:47] + "…"
    return str(call.name or call.kind)


@dataclass
class _Node:
    name: str
    detail: str
    kind: types.SymbolKind
    start: int
    end: int
    selection: tuple[int, int]
    children: list[_Node] = field(default_factory=list)

    def grow(self, child: _Node) -> None:
        self.children.append(child)
        self.start, self.end = min(self.start, child.start), max(self.end, child.end)


def outline(snapshot: Snapshot) -> list[_Node]:
    if snapshot.dialect == SUBAGENTS:
        return [_Node(site.name, site.via, types.SymbolKind.Function, site.start, site.end, (site.start, site.end))
                for site in sorted(key_sites(snapshot), key=lambda site: site.start)]
    roots: list[_Node] = []
    phase: _Node | None = None
    open_containers: list[tuple[Any, _Node, dict[str, _Node]]] = []
    for call in snapshot.calls or ():
        start, end = snapshot.body_span(call.start, call.end)
        while open_containers and snapshot.body_span(open_containers[-1][0].start, open_containers[-1][0].end)[1] < end:
            open_containers.pop()
        detail = call.kind if call.kind != "agent" else " · ".join(
            ["agent", *(f"{key} {value}" for key, value in (("role", call.role), ("model", call.model)) if value)]
        )
        kind = KINDS.get(call.kind, types.SymbolKind.Function)
        node = _Node(call_title(call), detail, kind, start, end, (start, end))
        if open_containers:
            container, container_node, branches = open_containers[-1]
            key = call.structure[-1].key if call.structure and container.kind != "withWorktree" else None
            if key is None:
                container_node.children.append(node)
            else:
                if key not in branches:
                    role = "stage" if container.kind == "pipeline" else "task"
                    branches[key] = _Node(key, role, types.SymbolKind.Field, start, end, (start, end))
                    container_node.children.append(branches[key])
                branches[key].grow(node)
        elif call.kind == "phase":
            phase = node
            roots.append(node)
        elif phase is not None:
            phase.grow(node)
        else:
            roots.append(node)
        if call.kind in CONTAINERS:
            open_containers.append((call, node, {}))
    return roots


def _document_symbol(snapshot: Snapshot, node: _Node) -> types.DocumentSymbol:
    return types.DocumentSymbol(
        name=node.name or "(unnamed)",
        detail=node.detail,
        kind=node.kind,
        range=snapshot.range(node.start, node.end),
        selection_range=snapshot.range(*node.selection),
        children=[_document_symbol(snapshot, child) for child in node.children],
    )


def _flat(snapshot: Snapshot, nodes: list[_Node], container: str | None) -> list[types.SymbolInformation]:
    found = []
    for node in nodes:
        location = types.Location(snapshot.uri, snapshot.range(node.start, node.end))
        found.append(types.SymbolInformation(location=location, name=node.name or "(unnamed)", kind=node.kind,
                                             container_name=container))
        found.extend(_flat(snapshot, node.children, node.name))
    return found


def document_symbols(
    snapshot: Snapshot, hierarchical: bool
) -> list[types.DocumentSymbol] | list[types.SymbolInformation]:
    nodes = outline(snapshot)
    if hierarchical:
        return [_document_symbol(snapshot, node) for node in nodes]
    return _flat(snapshot, nodes, None)


class Symbols(LanguageFeature):
    def register(self) -> None:
        self.server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(handler(self._symbols))

    async def _symbols(
        self, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol] | list[types.SymbolInformation] | None:
        snapshot = await self.server.get_feature(DocumentTable).current(params.text_document.uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        hierarchical = self.server.client_supports("text_document.document_symbol.hierarchical_document_symbol_support")
        return await self.server.run_in_thread(document_symbols, snapshot, hierarchical)
