"""What a position in a script refers to: a primitive, an option key, a model, a role or a tool.

Hover, go-to-definition and inlay hints ask the same question of a snapshot's parse tree, so the
answer is computed here once. Only direct calls count, as analysis and the worker count them
(`piflow.analysis.calls`): the second argument's object literal of `agent`/`conversation` holds the
agent options, the first of `checkpoint` its fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from tree_sitter import Node

from piflow.analysis.calls import call_of_callee, called_name, callee_name
from piflow.analysis.jsliterals import string_value
from piflow.analysis.option_keys import AGENT_OPTIONS, OPTION_OBJECTS, OptionObject
from piflow.server.docs import PRIMITIVES
from piflow.server.snapshot import Snapshot

TargetKind = Literal["primitive", "option", "model", "role", "tool", "thinking"]
AGENT_CALLS: Final = frozenset({"agent", "conversation"})
_VALUE_KEYS: Final[dict[str, TargetKind]] = {"model": "model", "role": "role", "thinking": "thinking"}


@dataclass(frozen=True)
class Target:
    """The thing at a position; `start`/`end` are the byte span of its node (quotes included)."""

    kind: TargetKind
    value: str
    start: int
    end: int
    owner: OptionObject | None = None
    """For an option key: the option object it belongs to."""


def option_object(node: Node | None) -> OptionObject | None:
    """The option object a literal is, when it is the options argument of a direct primitive call."""
    if node is None or node.type != "object":
        return None
    arguments = node.parent
    if arguments is None or arguments.type != "arguments" or arguments.parent is None:
        return None
    owner = OPTION_OBJECTS.get(called_name(arguments.parent) or "")
    if owner is None:
        return None
    named = [child for child in arguments.named_children if child.type != "comment"]
    return owner if len(named) > owner.argument and named[owner.argument].id == node.id else None


def options_object(node: Node | None) -> bool:
    """Whether `node` is the options object literal of a direct agent/conversation call."""
    return option_object(node) is AGENT_OPTIONS


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _string(node: Node) -> str | None:
    if node.type != "string":
        return None
    return string_value(_text(node))


def _pair_key(pair: Node) -> str | None:
    key = pair.child_by_field_name("key")
    if key is None:
        return None
    if key.type == "string":
        return _string(key)
    return _text(key) if key.type == "property_identifier" else None


def node_at(snapshot: Snapshot, offset: int) -> Node | None:
    """The named node at a byte offset of a script; inside a string, the string itself."""
    if snapshot.tree is None:
        return None
    node = snapshot.tree.root_node.named_descendant_for_byte_range(offset, offset)
    if node is not None and node.type in ("string_fragment", "escape_sequence") and node.parent is not None:
        node = node.parent
    return node


def target_at(snapshot: Snapshot, offset: int) -> Target | None:
    """The primitive, option key or option value at a byte offset of a script."""
    node = node_at(snapshot, offset)
    if node is None:
        return None
    parent = node.parent
    if node.type == "identifier" and call_of_callee(node) is not None:
        name = callee_name(node)
        if name is not None and name in PRIMITIVES:
            return Target("primitive", name, node.start_byte, node.end_byte)
    if node.type == "property_identifier" and parent is not None and parent.type == "pair":
        key = _text(node)
        owner = option_object(parent.parent)
        if owner is not None and key in owner.keys:
            return Target("option", key, node.start_byte, node.end_byte, owner)
    value = _string(node)
    if value is None or parent is None:
        return None
    if parent.type == "pair" and parent.child_by_field_name("value") == node and options_object(parent.parent):
        kind = _VALUE_KEYS.get(_pair_key(parent) or "")
        return Target(kind, value, node.start_byte, node.end_byte) if kind else None
    holder = parent.parent
    in_tools = parent.type == "array" and holder is not None and holder.type == "pair" and _pair_key(holder) == "tools"
    if in_tools and holder is not None and options_object(holder.parent):
        return Target("tool", value, node.start_byte, node.end_byte)
    return None


def model_values(snapshot: Snapshot) -> Iterator[Target]:
    """Every static `model: "..."` of an agent/conversation call, in source order."""
    if snapshot.tree is None:
        return
    for call in snapshot.calls or ():
        if call.kind not in AGENT_CALLS or call.model is None:
            continue
        start, end = snapshot.body_span(call.start, call.end)
        node = snapshot.tree.root_node.descendant_for_byte_range(start, end)
        arguments = node.child_by_field_name("arguments") if node is not None else None
        options = [child for child in arguments.named_children if child.type != "comment"] if arguments else []
        if len(options) < 2 or options[1].type != "object":
            continue
        for pair in reversed(options[1].named_children):  # the effective (last) `model` key
            if pair.type == "pair" and _pair_key(pair) == "model":
                value = pair.child_by_field_name("value")
                if value is not None and _string(value) is not None:
                    yield Target("model", _string(value) or "", value.start_byte, value.end_byte)
                break
