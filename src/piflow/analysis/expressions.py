"""The expressions static checks look at, and their static evaluation (spec B.1 "Static evaluation rules").

Only the arguments of workflow calls are converted from the parse tree into these small immutable
nodes; everything the rules need to decide (known values, effective properties, `stableName`) is
computed from them, so no rule depends on tree-sitter. Spans are byte offsets relative to the
top-level statement the expression belongs to (so a statement's facts survive edits elsewhere).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from piflow.analysis.jsliterals import js_blank, js_object
from piflow.analysis.records import record
from piflow.jsvalues import JSOpaque, is_plain_json


@record
class Expr:
    """Any expression. `kind` names its syntax in ESTree terms where the rules care:

    `string`, `number`, `boolean`, `null`, `regex`, `bigint` (literals, see `LiteralExpr`),
    `unary` (`UnaryExpr`), `array` (`ArrayExpr`), `object` (`ObjectExpr`), `spread` (`SpreadExpr`),
    `record` (an `ObjectExpr` whose members were not converted: a parallel/pipeline record),
    `identifier` (`IdentifierExpr`), and opaque kinds: `template`, `function`, `class`, `update`,
    `binary`, `logical`, `call`, `member`, `other`.
    """

    kind: str
    start: int
    end: int


@record
class LiteralExpr(Expr):
    value: Any


@record
class IdentifierExpr(Expr):
    name: str


@record
class UnaryExpr(Expr):
    operator: str
    operand: Expr


@record
class SpreadExpr(Expr):
    argument: Expr | None


@record
class ArrayExpr(Expr):
    elements: tuple[Expr | None, ...]
    """`None` is a hole (`[1, , 2]`)."""


@record
class PropertyExpr:
    """One member of an object literal (ESTree `Property`); a spread member is a `SpreadExpr`.

    `key` is the static key (identifier name, string value, or `String(number)`); `None` when the
    key is computed or not a literal.
    """

    start: int
    end: int
    key: str | None
    key_start: int
    key_end: int
    computed: bool
    shorthand: bool
    value: Expr | None


@record
class ObjectExpr(Expr):
    properties: tuple[PropertyExpr | SpreadExpr, ...]


LITERAL_KINDS: Final = frozenset({"string", "number", "boolean", "null", "regex", "bigint"})
_STABLE_NAME_FALSE: Final = LITERAL_KINDS | {
    "array",
    "function",
    "class",
    "template",
    "unary",
    "update",
    "binary",
}


class _Unknown:
    """The result of evaluating an expression that is not statically known."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()

StableName = Literal[True, False] | None
"""`stableName`: True (a non-blank string literal name), False (certainly no name), None (unknown)."""


def static_value(node: Expr | None) -> Any:
    """The JavaScript value of a statically known expression, else `UNKNOWN`.

    Known: literals, unary `+`/`-` on a known number, arrays of known elements without holes or
    spreads, objects whose members are all non-computed `key: knownValue` properties.
    """
    if node is None:
        return UNKNOWN
    if isinstance(node, LiteralExpr):
        return node.value
    if isinstance(node, UnaryExpr):
        operand = static_value(node.operand)
        if node.operator in "+-" and _is_number(operand):
            return -operand if node.operator == "-" else operand
        return UNKNOWN
    if isinstance(node, ArrayExpr):
        values = []
        for element in node.elements:
            value = UNKNOWN if element is None or isinstance(element, SpreadExpr) else static_value(element)
            if value is UNKNOWN:
                return UNKNOWN
            values.append(value)
        return values
    if isinstance(node, ObjectExpr):
        if node.kind == "record":  # members not converted (a parallel/pipeline record)
            return UNKNOWN
        pairs = []
        for prop in node.properties:
            if isinstance(prop, SpreadExpr) or prop.computed or prop.key is None:
                return UNKNOWN
            value = static_value(prop.value)
            if value is UNKNOWN:
                return UNKNOWN
            pairs.append((prop.key, value))
        return js_object(pairs)
    return UNKNOWN


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def effective_property(node: Expr | None, key: str) -> Expr | None:
    """The value of `key` in an object literal, scanning from the last member backwards.

    The last duplicate wins; a spread or computed member met first hides everything before it
    (returns None, as does a missing key or a non-object argument).
    """
    if not isinstance(node, ObjectExpr):
        return None
    for prop in reversed(node.properties):
        if isinstance(prop, SpreadExpr) or prop.computed:
            return None
        if prop.key == key:
            return prop.value
    return None


def effective_member(node: Expr | None, key: str) -> PropertyExpr | None:
    """Like `effective_property` but returns the whole member (for ranges and quick fixes)."""
    if not isinstance(node, ObjectExpr):
        return None
    for prop in reversed(node.properties):
        if isinstance(prop, SpreadExpr) or prop.computed:
            return None
        if prop.key == key:
            return prop
    return None


def effective_members(node: Expr | None, keys: tuple[str, ...]) -> dict[str, PropertyExpr]:
    """`effective_member` for several keys in one backward scan (absent keys are left out)."""
    found: dict[str, PropertyExpr] = {}
    if not isinstance(node, ObjectExpr):
        return found
    wanted = set(keys)
    for prop in reversed(node.properties):
        if isinstance(prop, SpreadExpr) or prop.computed:
            break
        if prop.key in wanted and prop.key not in found:
            found[prop.key] = prop
    return found


def literal_string(node: Expr | None) -> str | None:
    """The value of a string literal, else None (templates and expressions are not literals)."""
    if isinstance(node, LiteralExpr) and node.kind == "string":
        value: str = node.value
        return value
    return None


def static_string(node: Expr | None) -> str | None:
    """The statically known string value of an expression (only string literals qualify)."""
    value = static_value(node)
    return value if isinstance(value, str) else None


def stable_name(node: Expr | None) -> StableName:
    """`stableName(arg0)` of a checkpoint call (spec B.1)."""
    if node is None or (node.kind in _STABLE_NAME_FALSE):
        return False
    if not isinstance(node, ObjectExpr):
        return None
    result: StableName = False
    for prop in node.properties:
        if isinstance(prop, SpreadExpr) or prop.computed:
            result = None
        elif prop.key == "name":
            literal = prop.value if isinstance(prop.value, LiteralExpr) else None
            result = None if literal is None else literal.kind == "string" and not js_blank(literal.value)
    return result


def option_keys(node: Expr | None) -> list[str]:
    """All non-spread, non-computed keys of an object literal in source order (duplicates kept)."""
    if not isinstance(node, ObjectExpr):
        return []
    return [
        prop.key
        for prop in node.properties
        if isinstance(prop, PropertyExpr) and not prop.computed and prop.key is not None
    ]


def json_value(value: Any) -> bool:
    """`jsonValue(v)`: a JSON-compatible value (no functions, regexes, BigInts, non-finite numbers)."""
    return is_plain_json(value)


def regex_value(pattern: str, flags: str) -> JSOpaque:
    return JSOpaque("regexp", {"source": pattern, "flags": flags})


def bigint_literal(value: int) -> JSOpaque:
    return JSOpaque("bigint", str(value))
