"""What a position in a pi-subagents script refers to: a `runs.*`/`state.*` method or `emit`, a key of
a params object, an agent name, a child's model, or an enumerated value (steer mode, context, …);
and where the script launches children of which keys (`key_sites`, for run inlay hints).

The pi-subagents counterpart of `context.target_at`, read from the snapshot's parse tree by hover
and go-to-definition. Only direct calls on the globals count (`runs.run(...)`, not an alias of
`runs`), as the dialect's analysis counts them; the params objects are those `completion` offers
keys for (`docs.py` holds their keys).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from tree_sitter import Node

from piflow.analysis.jsliterals import string_value
from piflow.server.context import node_at
from piflow.server.docs import (
    ALL_ITEM,
    CHILD_PARAMS,
    HOST_PARAMS,
    LANE,
    STAGE,
    STEER_OPTIONS,
    SUBAGENT_GLOBALS,
    ParamObject,
)
from piflow.server.snapshot import Snapshot

SubagentTargetKind = Literal["global", "param", "agent", "model", "value"]
_ARGUMENT_PARAMS: Final[dict[tuple[str, int], ParamObject]] = {
    ("runs.run", 1): CHILD_PARAMS, ("runs.host", 1): HOST_PARAMS, ("runs.steer", 2): STEER_OPTIONS,
}
_ARRAY_PARAMS: Final[dict[str, ParamObject]] = {"runs.all": ALL_ITEM, "runs.lanes": LANE}


@dataclass(frozen=True)
class SubagentTarget:
    """The thing at a position; `start`/`end` are the byte span of its node (quotes included)."""

    kind: SubagentTargetKind
    value: str
    start: int
    end: int
    params: ParamObject | None = None
    """For a key or an enumerated value: the params object it belongs to."""
    key: str | None = None
    """For an enumerated value: its key."""


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _named(node: Node) -> list[Node]:
    return [child for child in node.named_children if child.type != "comment"]


def _member_name(callee: Node | None) -> str | None:
    """`runs.run` / `state.set` for a callee `runs.run`, `state.set`; None otherwise."""
    if callee is None or callee.type != "member_expression":
        return None
    obj, prop = callee.child_by_field_name("object"), callee.child_by_field_name("property")
    if obj is None or prop is None or obj.type != "identifier" or prop.type != "property_identifier":
        return None
    name = f"{_text(obj)}.{_text(prop)}"
    return name if name in SUBAGENT_GLOBALS else None


def _argument_of(node: Node) -> tuple[str, int] | None:
    """`(runs.<method>, index)` when `node` is an argument of a direct `runs.*` call."""
    arguments = node.parent
    if arguments is None or arguments.type != "arguments" or arguments.parent is None:
        return None
    name = _member_name(arguments.parent.child_by_field_name("function"))
    if name is None:
        return None
    index = next((i for i, child in enumerate(_named(arguments)) if child.id == node.id), -1)
    return name, index


def _pair_key(pair: Node) -> str | None:
    key = pair.child_by_field_name("key")
    if key is None:
        return None
    if key.type == "string":
        return string_value(_text(key))
    return _text(key) if key.type == "property_identifier" else None


def params_object(node: Node | None) -> ParamObject | None:
    """The params object a literal is: `runs.run`/`runs.host` params, `runs.steer` options, a
    `runs.all` item, a `runs.lanes` lane or one of its stages."""
    if node is None or node.type != "object" or node.parent is None:
        return None
    argument = _argument_of(node)
    if argument is not None:
        return _ARGUMENT_PARAMS.get(argument)
    array = node.parent
    if array.type != "array":
        return None
    argument = _argument_of(array)
    if argument is not None:
        return _ARRAY_PARAMS.get(argument[0]) if argument[1] == 0 else None
    pair = array.parent
    if pair is not None and pair.type == "pair" and _pair_key(pair) == "stages" and pair.child_by_field_name(
        "value"
    ) == array:
        return STAGE if params_object(pair.parent) is LANE else None
    return None


def subagent_target_at(snapshot: Snapshot, offset: int) -> SubagentTarget | None:
    """The method, params key or value at a byte offset of a pi-subagents script."""
    node = node_at(snapshot, offset)
    if node is None:
        return None
    parent = node.parent
    if parent is None:
        return None
    if node.type == "property_identifier" and parent.type == "member_expression":
        name = _member_name(parent)
        return SubagentTarget("global", name, node.start_byte, node.end_byte) if name else None
    if node.type == "identifier" and _text(node) == "emit" and parent.type == "call_expression" \
            and parent.child_by_field_name("function") == node:
        return SubagentTarget("global", "emit", node.start_byte, node.end_byte)
    if node.type == "property_identifier" and parent.type == "pair":
        owner = params_object(parent.parent)
        name = _text(node)
        if owner is not None and name in owner.keys:
            return SubagentTarget("param", name, node.start_byte, node.end_byte, owner)
        return None
    if node.type != "string" or parent.type != "pair" or parent.child_by_field_name("value") != node:
        return None
    owner = params_object(parent.parent)
    key = _pair_key(parent)
    value = string_value(_text(node))
    if owner is None or key is None or value is None or key not in owner.keys:
        return None
    if key == "agent":
        return SubagentTarget("agent", value, node.start_byte, node.end_byte)
    if key == "model":
        return SubagentTarget("model", value, node.start_byte, node.end_byte)
    if owner.keys[key].values:
        return SubagentTarget("value", value, node.start_byte, node.end_byte, owner, key)
    return None


@dataclass(frozen=True)
class KeySite:
    """A place that launches children: a `runs.run` call, a `runs.all` item or a lanes stage.

    `pattern` matches the workflow keys it launches (a template literal matches every key its
    substitutions can make); `name` is the key as written (a template without its backticks);
    `start`/`end` are the byte span of the launch.
    """

    pattern: re.Pattern[str]
    name: str
    via: str
    """`runs.run`, `runs.all item` or `runs.lanes stage`."""
    start: int
    end: int


def _key_pattern(node: Node | None) -> str | None:
    """A regex for the keys a key expression makes: a string exactly, a template literal with any
    text for each substitution; None for anything else (a variable, a call)."""
    if node is None:
        return None
    if node.type == "string":
        value = string_value(_text(node))
        return None if value is None else re.escape(value)
    if node.type != "template_string":
        return None
    parts = []
    for child in node.named_children:
        if child.type == "string_fragment":
            parts.append(re.escape(_text(child)))
        elif child.type == "template_substitution":
            parts.append(".+?")
        elif child.type == "escape_sequence":
            parts.append(re.escape(string_value(f'"{_text(child)}"') or ""))
    return "".join(parts)


def _key_name(node: Node) -> str:
    text = _text(node)
    return (string_value(text) or text) if node.type == "string" else text[1:-1]


def _pairs(node: Node) -> dict[str, Node]:
    """The key → value of an object literal's plain pairs (the last one wins, as in JavaScript)."""
    found = {}
    for pair in node.named_children:
        if pair.type == "pair":
            key, value = _pair_key(pair), pair.child_by_field_name("value")
            if key is not None and value is not None:
                found[key] = value
    return found


def _descendants(node: Node, kind: str) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == kind:
            yield current
        stack.extend(reversed(current.named_children))


def _child_objects(argument: Node) -> Iterator[tuple[Node, dict[str, Node]]]:
    """The object literals in a `runs.all`/`runs.lanes` argument that are items (a `key` beside
    child params), wherever they are built (an array literal, a `.map` callback)."""
    for node in _descendants(argument, "object"):
        pairs = _pairs(node)
        if "key" in pairs:
            yield node, pairs


def key_sites(snapshot: Snapshot) -> list[KeySite]:
    """Where the script launches children, in source order (see `KeySite`)."""
    if snapshot.tree is None:
        return []
    sites: list[KeySite] = []

    def add(pattern: str | None, key: Node, via: str, launch: Node, prefix: str = "") -> None:
        if pattern is not None:
            sites.append(KeySite(re.compile(pattern), prefix + _key_name(key), via, launch.start_byte, launch.end_byte))

    for call in _descendants(snapshot.tree.root_node, "call_expression"):
        name = _member_name(call.child_by_field_name("function"))
        arguments = call.child_by_field_name("arguments")
        args = _named(arguments) if arguments is not None and name is not None else []
        if not args:
            continue
        if name == "runs.run":
            add(_key_pattern(args[0]), args[0], name, call)
        elif name == "runs.all":
            for item, pairs in _child_objects(args[0]):
                if pairs.keys() & {"agent", "task", "resume"}:
                    add(_key_pattern(pairs["key"]), pairs["key"], "runs.all item", item)
        elif name == "runs.lanes":
            for _, pairs in _child_objects(args[0]):
                lane, stages = _key_pattern(pairs["key"]), pairs.get("stages")
                if lane is None or stages is None or stages.type != "array":
                    continue
                for stage in stages.named_children:
                    key = _pairs(stage).get("key") if stage.type == "object" else None
                    stage_key = _key_pattern(key)
                    if key is not None and stage_key is not None:
                        add(rf"{lane}\.{stage_key}", key, "runs.lanes stage", stage, _key_name(pairs["key"]) + ".")
    return sites
