"""The tree-sitter adapter: the JavaScript grammar, node kinds, and conversion of argument nodes to `Expr`.

Everything tree-sitter specific lives here and in `walker.py`; rules see only `Expr` and facts.
Node kinds are compared by numeric id (a grammar may give one name several ids, hence the sets).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final

import tree_sitter_javascript
from tree_sitter import Language, Node, Parser

from piflow.analysis.expressions import (
    ArrayExpr,
    Expr,
    IdentifierExpr,
    LiteralExpr,
    ObjectExpr,
    PropertyExpr,
    SpreadExpr,
    UnaryExpr,
    bigint_literal,
    regex_value,
)
from piflow.analysis.jsliterals import (
    bigint_value,
    identifier_name,
    js_number_to_string,
    number_value,
    string_value,
)

LANGUAGE: Final = Language(tree_sitter_javascript.language())


def new_parser() -> Parser:
    """A parser for the JavaScript grammar (parsers are not thread-safe: one per document)."""
    return Parser(LANGUAGE)


def _ids(*names: str) -> frozenset[int]:
    wanted = set(names)
    return frozenset(
        kind
        for kind in range(LANGUAGE.node_kind_count)
        if LANGUAGE.node_kind_is_named(kind) and LANGUAGE.node_kind_for_id(kind) in wanted
    )


def _field(name: str) -> int:
    field = LANGUAGE.field_id_for_name(name)
    assert field is not None, name
    return field


class K:
    """Node kind ids by ESTree-ish role."""

    PROGRAM: Final = _ids("program")
    COMMENT: Final = _ids("comment")
    HTML_COMMENT: Final = _ids("html_comment")
    HASH_BANG: Final = _ids("hash_bang_line")
    CALL: Final = _ids("call_expression")
    NEW: Final = _ids("new_expression")
    ARGUMENTS: Final = _ids("arguments")
    TEMPLATE: Final = _ids("template_string")
    PAREN: Final = _ids("parenthesized_expression")
    IDENTIFIER: Final = _ids("identifier")
    UNDEFINED: Final = _ids("undefined")
    PROPERTY_IDENTIFIER: Final = _ids("property_identifier")
    SHORTHAND: Final = _ids("shorthand_property_identifier")
    SHORTHAND_PATTERN: Final = _ids("shorthand_property_identifier_pattern")
    LABEL: Final = _ids("statement_identifier")
    PRIVATE_NAME: Final = _ids("private_property_identifier")
    STRING: Final = _ids("string")
    NUMBER: Final = _ids("number")
    TRUE: Final = _ids("true")
    FALSE: Final = _ids("false")
    NULL: Final = _ids("null")
    REGEX: Final = _ids("regex")
    OBJECT: Final = _ids("object")
    ARRAY: Final = _ids("array")
    PAIR: Final = _ids("pair")
    PAIR_PATTERN: Final = _ids("pair_pattern")
    OBJECT_ASSIGNMENT_PATTERN: Final = _ids("object_assignment_pattern")
    METHOD: Final = _ids("method_definition")
    SPREAD: Final = _ids("spread_element")
    REST: Final = _ids("rest_pattern")
    COMPUTED_KEY: Final = _ids("computed_property_name")
    UNARY: Final = _ids("unary_expression")
    UPDATE: Final = _ids("update_expression")
    BINARY: Final = _ids("binary_expression")
    AWAIT: Final = _ids("await_expression")
    YIELD: Final = _ids("yield_expression")
    MEMBER: Final = _ids("member_expression", "subscript_expression")
    OPTIONAL_CHAIN: Final = _ids("optional_chain")
    ASSIGNMENT: Final = _ids("assignment_expression", "augmented_assignment_expression")
    FUNCTION_EXPRESSION: Final = _ids("function_expression", "generator_function")
    FUNCTION_DECLARATION: Final = _ids("function_declaration", "generator_function_declaration")
    ARROW: Final = _ids("arrow_function")
    FUNCTIONS: Final = FUNCTION_EXPRESSION | FUNCTION_DECLARATION | ARROW | METHOD
    CLASS: Final = _ids("class", "class_declaration")
    CLASS_BODY: Final = _ids("class_body")
    FIELD: Final = _ids("field_definition")
    STATIC_BLOCK: Final = _ids("class_static_block")
    FORMAL_PARAMETERS: Final = _ids("formal_parameters")
    STATEMENT_BLOCK: Final = _ids("statement_block")
    LEXICAL_DECLARATION: Final = _ids("lexical_declaration")
    VARIABLE_DECLARATION: Final = _ids("variable_declaration")
    USING_DECLARATION: Final = _ids("using_declaration")
    DECLARATOR: Final = _ids("variable_declarator")
    ASSIGNMENT_PATTERN: Final = _ids("assignment_pattern")
    OBJECT_PATTERN: Final = _ids("object_pattern")
    ARRAY_PATTERN: Final = _ids("array_pattern")
    CATCH: Final = _ids("catch_clause")
    TRY: Final = _ids("try_statement")
    FOR: Final = _ids("for_statement", "for_in_statement")
    LOOPS: Final = _ids("for_statement", "for_in_statement", "while_statement", "do_statement")
    SWITCH: Final = _ids("switch_statement")
    SWITCH_BODY: Final = _ids("switch_body")
    LABELED: Final = _ids("labeled_statement")
    BREAK: Final = _ids("break_statement")
    CONTINUE: Final = _ids("continue_statement")
    RETURN: Final = _ids("return_statement")
    WITH: Final = _ids("with_statement")
    IMPORT_STATEMENT: Final = _ids("import_statement")
    EXPORT_STATEMENT: Final = _ids("export_statement")
    META_PROPERTY: Final = _ids("meta_property")
    JSX: Final = _ids("jsx_element", "jsx_self_closing_element")
    DECORATOR: Final = _ids("decorator")
    EXPRESSION_STATEMENT: Final = _ids("expression_statement")
    SEQUENCE: Final = _ids("sequence_expression")
    TERNARY: Final = _ids("ternary_expression")


class F:
    """Field ids."""

    FUNCTION: Final = _field("function")
    ARGUMENTS: Final = _field("arguments")
    KEY: Final = _field("key")
    VALUE: Final = _field("value")
    NAME: Final = _field("name")
    LEFT: Final = _field("left")
    RIGHT: Final = _field("right")
    OPERATOR: Final = _field("operator")
    ARGUMENT: Final = _field("argument")
    OBJECT: Final = _field("object")
    PROPERTY: Final = _field("property")
    BODY: Final = _field("body")
    PARAMETERS: Final = _field("parameters")
    PARAMETER: Final = _field("parameter")
    HANDLER: Final = _field("handler")
    FINALIZER: Final = _field("finalizer")
    LABEL: Final = _field("label")
    DECLARATION: Final = _field("declaration")
    PATTERN: Final = _field("pattern")
    FLAGS: Final = _field("flags")


MAX_EXPR_DEPTH: Final = 64
"""Object/array nesting converted for static evaluation; deeper values count as unknown."""


def node_text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


def unwrap_parens(node: Node) -> Node:
    """acorn drops parentheses: `(agent)` is the identifier `agent`. A sequence stays a sequence."""
    while node.kind_id in K.PAREN:
        inner = [child for child in node.named_children if child.kind_id not in K.COMMENT]
        if len(inner) != 1:
            return node
        node = inner[0]
    return node


def named_items(node: Node) -> list[Node]:
    """Named children without comments (arguments, elements, members)."""
    children = node.named_children  # (a new list: callers may keep it)
    if K.COMMENT.isdisjoint(map(_KIND_ID, children)):  # (no comment, almost always: tested in C)
        return children
    return [child for child in children if child.kind_id not in K.COMMENT]


_KIND_ID: Final = attrgetter("kind_id")


_ASYNC_KEYWORD: Final = LANGUAGE.id_for_node_kind("async", False)
_STAR: Final = LANGUAGE.id_for_node_kind("*", False)
_COMMA: Final = frozenset(
    kind
    for kind in range(LANGUAGE.node_kind_count)
    if not LANGUAGE.node_kind_is_named(kind) and LANGUAGE.node_kind_for_id(kind) == ","
)
NAMED_KINDS: Final = frozenset(
    {kind for kind in range(LANGUAGE.node_kind_count) if LANGUAGE.node_kind_is_named(kind)}
    | {LANGUAGE.id_for_node_kind("ERROR", True)}
)
"""`node.kind_id in NAMED_KINDS` is `node.is_named`, ten times faster (ERROR included)."""


def function_flags(node: Node) -> tuple[bool, bool]:
    """Whether a function-like node is async (an `async` keyword before its first named child) and
    whether it is a generator (a `*` token among its children)."""
    asynchronous: bool | None = None
    generator = False
    for child in node.children:
        kind = child.kind_id
        if kind == _STAR:
            generator = True
        elif asynchronous is None:
            if kind == _ASYNC_KEYWORD:
                asynchronous = True
            elif kind in NAMED_KINDS and kind not in K.COMMENT:
                asynchronous = False
    return bool(asynchronous), generator


def property_key(data: bytes, key: Node) -> tuple[str | None, bool]:
    """The static key of an object member and whether it is computed."""
    kind = key.kind_id
    if kind in K.COMPUTED_KEY:
        return None, True
    if kind in K.STRING:
        return string_value(node_text(data, key)), False
    if kind in K.NUMBER:
        raw = node_text(data, key)
        if raw.endswith("n"):
            return str(bigint_value(raw)), False
        return js_number_to_string(number_value(raw)), False
    if kind in K.PRIVATE_NAME:
        return None, False
    return identifier_name(node_text(data, key)), False


def to_expr(data: bytes, node: Node, base: int, depth: int = 0) -> Expr:
    """Convert an expression node to `Expr` (spans relative to `base`)."""
    kind = node.kind_id
    convert = _CONVERSIONS.get(kind, _OPAQUE)
    if convert == _PARENTHESES:
        node = unwrap_parens(node)
        kind = node.kind_id
        convert = _CONVERSIONS.get(kind, _OPAQUE)
    start_byte = node.start_byte
    end_byte = node.end_byte
    start = start_byte - base
    end = end_byte - base
    if convert == _STRING_LITERAL:
        return LiteralExpr("string", start, end, _string_value(data, start_byte, end_byte))
    if convert == _IDENTIFIER_REFERENCE:
        return IdentifierExpr(
            "identifier", start, end, identifier_name(data[start_byte:end_byte].decode(_UTF8, _SURROGATES))
        )
    if convert == _NUMBER_LITERAL:
        raw = data[start_byte:end_byte].decode(_UTF8, _SURROGATES)
        if raw.endswith("n"):
            return LiteralExpr("bigint", start, end, bigint_literal(bigint_value(raw)))
        return LiteralExpr("number", start, end, number_value(raw))
    if convert in (_TRUE_LITERAL, _FALSE_LITERAL):
        return LiteralExpr("boolean", start, end, convert == _TRUE_LITERAL)
    if convert == _NULL_LITERAL:
        return LiteralExpr("null", start, end, None)
    if convert == _REGEX_LITERAL:
        pattern = node.child_by_field_id(F.PATTERN)
        flags = node.child_by_field_id(F.FLAGS)
        return LiteralExpr(
            "regex",
            start,
            end,
            regex_value(node_text(data, pattern) if pattern else "", node_text(data, flags) if flags else ""),
        )
    if depth >= MAX_EXPR_DEPTH:
        return Expr("other", start, end)
    if convert == _OPAQUE:
        return Expr(_opaque_kind(node), start, end)
    if convert == _OBJECT_LITERAL:
        return ObjectExpr("object", start, end, _object_members(data, node, base, depth))
    if convert == _ARRAY_LITERAL:
        return ArrayExpr("array", start, end, _array_elements(data, node, base, depth))
    if convert == _UNARY_EXPRESSION:
        operator = node.child_by_field_id(F.OPERATOR)
        operand = node.child_by_field_id(F.ARGUMENT)
        if operator is None or operand is None:
            return Expr("other", start, end)
        return UnaryExpr("unary", start, end, operator.type, to_expr(data, operand, base, depth + 1))
    items = named_items(node)  # a spread element
    return SpreadExpr("spread", start, end, to_expr(data, items[0], base, depth + 1) if items else None)


# How `to_expr` converts each node kind (one dictionary lookup instead of a chain of set tests).
(
    _OPAQUE,
    _PARENTHESES,
    _STRING_LITERAL,
    _IDENTIFIER_REFERENCE,
    _NUMBER_LITERAL,
    _TRUE_LITERAL,
    _FALSE_LITERAL,
    _NULL_LITERAL,
    _REGEX_LITERAL,
    _OBJECT_LITERAL,
    _ARRAY_LITERAL,
    _UNARY_EXPRESSION,
    _SPREAD_ELEMENT,
) = range(13)
_CONVERSIONS: Final = {
    kind: conversion
    for kinds, conversion in (
        (K.PAREN, _PARENTHESES),
        (K.STRING, _STRING_LITERAL),
        (K.IDENTIFIER | K.UNDEFINED, _IDENTIFIER_REFERENCE),
        (K.NUMBER, _NUMBER_LITERAL),
        (K.TRUE, _TRUE_LITERAL),
        (K.FALSE, _FALSE_LITERAL),
        (K.NULL, _NULL_LITERAL),
        (K.REGEX, _REGEX_LITERAL),
        (K.OBJECT, _OBJECT_LITERAL),
        (K.ARRAY, _ARRAY_LITERAL),
        (K.UNARY, _UNARY_EXPRESSION),
        (K.SPREAD, _SPREAD_ELEMENT),
    )
    for kind in kinds
}


_UTF8: Final = "utf-8"
_SURROGATES: Final = "surrogatepass"
_SPREAD: Final = K.SPREAD
_COMMENT: Final = K.COMMENT
_PAIR: Final = K.PAIR
_SHORTHAND: Final = K.SHORTHAND
_METHOD: Final = K.METHOD
_PROPERTY_IDENTIFIER: Final = K.PROPERTY_IDENTIFIER
_KEY: Final = F.KEY
_VALUE: Final = F.VALUE
_NAME: Final = F.NAME


def _string_value(data: bytes, start: int, end: int) -> str:
    """`string_value` of the string literal token at `data[start:end]`, without decoding it twice
    when the quotes are single bytes and nothing is escaped (almost always)."""
    if end - start >= 2 and data[start] < 0x80 and data[end - 1] < 0x80:
        inner = data[start + 1 : end - 1]
        if inner.find(b"\\") < 0:
            return inner.decode(_UTF8, _SURROGATES)
    return string_value(data[start:end].decode(_UTF8, _SURROGATES))


def _opaque_kind(node: Node) -> str:
    kind = node.kind_id
    if kind in K.TEMPLATE:
        return "template"
    if kind in K.FUNCTION_EXPRESSION or kind in K.ARROW:
        return "function"
    if kind in K.CLASS:
        return "class"
    if kind in K.UPDATE:
        return "update"
    if kind in K.BINARY:
        operator = node.child_by_field_id(F.OPERATOR)
        return "logical" if operator is not None and operator.type in ("&&", "||", "??") else "binary"
    if kind in K.CALL:
        arguments = node.child_by_field_id(F.ARGUMENTS)
        return "tagged-template" if arguments is not None and arguments.kind_id in K.TEMPLATE else "call"
    if kind in K.MEMBER:
        return "member"
    return "other"


def _array_elements(data: bytes, node: Node, base: int, depth: int) -> tuple[Expr | None, ...]:
    elements: list[Expr | None] = []
    expecting = True  # after `[` or `,` an element may start; another `,` makes a hole
    for child in node.children:
        kind = child.kind_id
        if kind in _COMMENT:
            continue
        if kind not in NAMED_KINDS:
            if kind in _COMMA:
                if expecting:
                    elements.append(None)
                expecting = True
            continue
        elements.append(to_expr(data, child, base, depth + 1))
        expecting = False
    return tuple(elements)


def _object_members(data: bytes, node: Node, base: int, depth: int) -> tuple[PropertyExpr | SpreadExpr, ...]:
    members: list[PropertyExpr | SpreadExpr] = []
    append = members.append
    for child in node.named_children:
        kind = child.kind_id
        if kind in _PAIR:
            parts = child.children  # (cheaper than asking for two fields)
            if len(parts) == 3 and not child.has_error:  # `key: value`, no comment or error between
                key = parts[0]
                value: Node | None = parts[2]
            else:
                found = child.child_by_field_id(_KEY)
                if found is None:
                    continue
                key, value = found, child.child_by_field_id(_VALUE)
            key_start = key.start_byte
            key_end = key.end_byte
            if key.kind_id in _PROPERTY_IDENTIFIER:  # the common `name: value`
                name: str | None = identifier_name(data[key_start:key_end].decode(_UTF8, _SURROGATES))
                computed = False
            else:
                name, computed = property_key(data, key)
            append(
                PropertyExpr(
                    child.start_byte - base,
                    child.end_byte - base,
                    name,
                    key_start - base,
                    key_end - base,
                    computed,
                    False,
                    to_expr(data, value, base, depth + 1) if value is not None else None,
                )
            )
            continue
        if kind in _COMMENT:
            continue
        start = child.start_byte - base
        end = child.end_byte - base
        if kind in _SPREAD:
            append(to_expr(data, child, base, depth + 1))  # type: ignore[arg-type]
        elif kind in _SHORTHAND:
            name = identifier_name(node_text(data, child))
            append(
                PropertyExpr(start, end, name, start, end, False, True, IdentifierExpr("identifier", start, end, name))
            )
        elif kind in _METHOD:
            method_name = child.child_by_field_id(_NAME)
            if method_name is None:
                continue
            name, computed = property_key(data, method_name)
            append(
                PropertyExpr(
                    start,
                    end,
                    name,
                    method_name.start_byte - base,
                    method_name.end_byte - base,
                    computed,
                    False,
                    Expr("function", start, end),
                )
            )
        else:
            append(PropertyExpr(start, end, None, start, end, True, False, Expr("other", start, end)))
    return tuple(members)
