"""What the walk records of a workflow call's arguments (`syntax.to_expr`): comments between them
are no arguments, parentheses vanish, and values nested past the depth limit are unknown."""

from __future__ import annotations

from piflow.analysis import ScriptDocument
from piflow.analysis.expressions import ArrayExpr, Expr, ObjectExpr, PropertyExpr, static_value
from piflow.analysis.syntax import MAX_EXPR_DEPTH
from piflow.analysis.walker import WalkConfig


def arguments(text: str) -> tuple[Expr, ...]:
    """The arguments of the script's first workflow call."""
    return ScriptDocument(text).facts(WalkConfig()).calls[0].fact.args


def test_comments_between_arguments_are_not_arguments() -> None:
    args = arguments('agent(/* a */ "task" /* b */, // c\n { model: /* d */ "fast" } /* e */);')
    assert [arg.kind for arg in args] == ["string", "object"]
    assert static_value(args[0]) == "task"
    assert static_value(args[1]) == {"model": "fast"}


def test_parenthesised_values_are_their_contents() -> None:
    args = arguments('agent(("task"), { retries: (2), tools: (["read"]) });')
    assert static_value(args[0]) == "task"
    assert static_value(args[1]) == {"retries": 2, "tools": ["read"]}


def test_each_literal_kind_converts_to_its_value() -> None:
    args = arguments('agent("t", { a: "s", b: 1.5, c: true, d: false, e: null, f: x, g: -1, h: [1, , 2], i: 10n });')
    options = args[1]
    assert isinstance(options, ObjectExpr)
    kinds = {prop.key: prop.value.kind for prop in options.properties if isinstance(prop, PropertyExpr) and prop.value}
    assert kinds == {
        "a": "string",
        "b": "number",
        "c": "boolean",
        "d": "boolean",
        "e": "null",
        "f": "identifier",
        "g": "unary",
        "h": "array",
        "i": "bigint",
    }


def test_values_nested_past_the_depth_limit_are_unknown() -> None:
    depth = MAX_EXPR_DEPTH + 2
    value = arguments('agent("t", ' + "[" * depth + "f()" + "]" * depth + ");")[1]
    for _ in range(MAX_EXPR_DEPTH):
        assert isinstance(value, ArrayExpr)
        inner = value.elements[0]
        assert inner is not None
        value = inner
    assert value.kind == "other"  # (a call this deep is not even named one)
