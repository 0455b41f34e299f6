"""The facts only pi-subagents' rules use: `runs.<method>(...)`, `state.set(...)` and `emit(...)`
calls, and `const r = await runs.all([...])` bindings at the top level.

Gathered during the shared statement walk (`walker.DialectFacts`), so the pi-extensible-workflows
dialect, whose rules never look at them, does not pay for them.
"""

from __future__ import annotations

import re
from typing import Final

from tree_sitter import Node

from piflow.analysis.calls import callee_name
from piflow.analysis.expressions import ArrayExpr, Expr, ObjectExpr, PropertyExpr, literal_string
from piflow.analysis.jsliterals import identifier_name
from piflow.analysis.records import record
from piflow.analysis.syntax import F, K, named_items, node_text, to_expr
from piflow.analysis.walker import DialectFacts

_RUNS_TARGETS: Final = frozenset({"runs", "state"})
KEY_GRAMMAR: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""Workflow, state, lane and stage keys (A.3)."""


@record
class MemberCall:
    """A call `runs.<method>(...)`, `state.set(...)` or `emit(...)`.

    `observed`: the call's promise is awaited, returned, or otherwise used (not a bare statement).
    """

    target: str
    start: int
    end: int
    callee_start: int
    callee_end: int
    args: tuple[Expr, ...]
    observed: bool

    def arg(self, index: int) -> Expr | None:
        return self.args[index] if index < len(self.args) else None


@record
class RunsAllBinding:
    """`const r = await runs.all([...])` at the top level with the literal keys of its items."""

    name: str
    keys: tuple[str, ...]
    start: int
    end: int


class SubagentsFacts(DialectFacts):
    def __init__(self, data: bytes, base: int) -> None:
        super().__init__(data, base)
        self._calls: list[MemberCall] = []

    def call(self, node: Node, start: int, callee: Node, arguments: Node) -> None:
        if callee.kind_id in K.IDENTIFIER:
            target = "emit" if callee_name(callee) == "emit" else None
        else:
            target = _member_path(self.data, callee) if callee.kind_id in K.MEMBER else None
        if target is None:
            return
        parent = node.parent
        # `await (runs.run)(...)` (`start` past the node's: its `await`) is observed
        observed = start != node.start_byte or parent is None or parent.kind_id not in K.EXPRESSION_STATEMENT
        base = self.base
        self._calls.append(
            MemberCall(
                target,
                start - base,
                node.end_byte - base,
                callee.start_byte - base,
                callee.end_byte - base,
                tuple(to_expr(self.data, item, base) for item in named_items(arguments)),
                observed,
            )
        )

    def finish(self, statement: Node | None) -> tuple[object, ...]:
        binding = self._runs_all_binding(statement) if statement is not None else []
        return (*self._calls, *binding)

    def _runs_all_binding(self, statement: Node) -> list[RunsAllBinding]:
        if statement.kind_id not in K.LEXICAL_DECLARATION:
            return []
        found = []
        for declarator in named_items(statement):
            name = declarator.child_by_field_id(F.NAME)
            value = declarator.child_by_field_id(F.VALUE)
            if name is None or value is None or name.kind_id not in K.IDENTIFIER or value.kind_id not in K.AWAIT:
                continue
            awaited = next(iter(named_items(value)), None)
            call = self._call_at(awaited)
            if call is None or call.target != "runs.all":
                continue
            items = call.arg(0)
            if not isinstance(items, ArrayExpr):
                continue
            keys = tuple(
                key
                for item in items.elements
                if isinstance(item, ObjectExpr)
                for prop in item.properties
                if isinstance(prop, PropertyExpr) and prop.key == "key"
                for key in [literal_string(prop.value)]
                if key is not None
            )
            bound = identifier_name(node_text(self.data, name))
            start, end = declarator.start_byte - self.base, declarator.end_byte - self.base
            found.append(RunsAllBinding(bound, keys, start, end))
        return found

    def _call_at(self, node: Node | None) -> MemberCall | None:
        if node is None:
            return None
        start = node.start_byte - self.base
        return next((call for call in self._calls if call.start == start), None)


def _member_path(data: bytes, node: Node) -> str | None:
    """`runs.run` / `state.set` for a member callee on those objects, else None."""
    obj = node.child_by_field_id(F.OBJECT)
    prop = node.child_by_field_id(F.PROPERTY)
    if obj is None or prop is None or obj.kind_id not in K.IDENTIFIER or prop.kind_id not in K.PROPERTY_IDENTIFIER:
        return None
    target = identifier_name(node_text(data, obj))
    if target not in _RUNS_TARGETS:
        return None
    return f"{target}.{identifier_name(node_text(data, prop))}"
