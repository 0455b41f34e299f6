"""One walk over a top-level statement: workflow calls, notable identifiers and syntax errors.

The walk follows the reference's view of the tree (acorn ESTree): parentheses are transparent,
`x.agent()` is not a call of `agent`, a tagged template is not a call. Besides the facts rules
need, it reports the syntax errors tree-sitter accepts but acorn (strict module code) rejects —
a practical subset of JavaScript's early errors, with acorn's messages — so the editor sees them
while typing; the engine compile (`engine_check`) remains the authority before a run.

Speed (DESIGN section 11): the walk is a tree cursor dispatching on a table indexed by node kind.
Checks that need a marker in the statement's text (`_markers`: an escape, `__proto__`, `**`...)
are left out of the table when it is absent, and the arguments of a workflow call that convert to
plain literals (`StatementWalker._inert`) are not walked again: neither can find anything there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from tree_sitter import Node

from piflow.analysis.expressions import (
    ArrayExpr,
    Expr,
    IdentifierExpr,
    LiteralExpr,
    ObjectExpr,
    PropertyExpr,
    SpreadExpr,
    literal_string,
    static_string,
)
from piflow.analysis.facts import (
    PRIMITIVES,
    AsyncFunction,
    CallFact,
    Declaration,
    Execution,
    MemberCall,
    NameUse,
    RegexLiteral,
    RunsAllBinding,
    StatementFacts,
    StructureScope,
    SyntaxIssue,
    TopLevelReturn,
)
from piflow.analysis.jsliterals import identifier_name
from piflow.analysis.syntax import (
    LANGUAGE,
    F,
    K,
    function_flags,
    named_items,
    node_text,
    property_key,
    to_expr,
    unwrap_parens,
)

INTERNAL_NAMES: Final = (
    ("__pi_extensible_workflows_agent", "agent"),
    ("__pi_extensible_workflows_conversation", "conversation"),
    ("__pi_extensible_workflows_withWorktree", "withWorktree"),
)
_INTERNAL: Final = frozenset(name for name, _ in INTERNAL_NAMES)
DIRECT_ONLY: Final = ("withWorktree", "conversation")
_STRICT_RESERVED: Final = frozenset(
    {"implements", "interface", "let", "package", "private", "protected", "public", "static", "yield"}
)
_WATCHED: Final = _INTERNAL | frozenset(DIRECT_ONLY) | _STRICT_RESERVED | {"await"}
_WATCHED_BYTES: Final = frozenset(name.encode() for name in _WATCHED)
_PRIMITIVE_SET: Final = frozenset(PRIMITIVES)
_CALL_NAMES: Final = {name.encode(): name for name in (*PRIMITIVES, "emit")}
"""The callee names `_call` looks for, by their unescaped source text."""
_RUNS_TARGETS: Final = frozenset({"runs", "state"})
_OCTAL_ESCAPE: Final = re.compile(rb"\\(?:(0[0-9]|[1-7])|([89]))|\\.", re.DOTALL)
_REGEX_FLAGS: Final = frozenset("dgimsuyv")
_HOLE: Final = re.compile(rb"[(,]\s*(?:/\*.*?\*/\s*)*,", re.DOTALL)
_NAME_KINDS: Final = K.IDENTIFIER | K.SHORTHAND | K.SHORTHAND_PATTERN | K.PROPERTY_IDENTIFIER | K.LABEL

# What a statement's text contains, for the checks that cannot fire without it (`_markers`).
_BACKSLASH: Final = 1  # escapes in strings, templates and identifiers
_PROTO: Final = 2  # `__proto__` keys
_HOLE_MARK: Final = 4  # an empty argument, `f(a,,b)`
_HASH: Final = 8  # private names
_POWER: Final = 16  # `**`
_DELETE: Final = 32  # `delete`
_REST_MARK: Final = 64  # `...` (a comma after a rest element)
_HTML_COMMENT_MARK: Final = 128  # `<!--` or `-->`, an HTML-like comment (anywhere, like comments)
_WHITESPACE: Final = b" \t\n\r\v\f"  # `\s` in a bytes pattern
_QUOTES: Final = frozenset(b"\"'")
_DIGITS: Final = frozenset(b"0123456789")
_ZERO: Final = ord("0")


def _markers(data: bytes, start: int, end: int) -> int:
    """The markers (above) found in `data[start:end]`: each is a necessary condition of a check.

    Searched with the whitespace removed, which can only add matches (`_HOLE` without comments is
    `(,` or `,,` then).
    """
    tokens = data[start:end].translate(None, _WHITESPACE)
    find = tokens.find
    found = 0
    if find(b"\\") >= 0:
        found |= _BACKSLASH
    if find(b"__proto__") >= 0:
        found |= _PROTO
    if find(b"#") >= 0:
        found |= _HASH
    if find(b"**") >= 0:
        found |= _POWER
    if find(b"delete") >= 0:
        found |= _DELETE
    if find(b"...") >= 0:
        found |= _REST_MARK
    if find(b"<!--") >= 0 or find(b"-->") >= 0:
        found |= _HTML_COMMENT_MARK
    if find(b",,") >= 0 or find(b"(,") >= 0 or (find(b"/*") >= 0 and _HOLE.search(data, start, end)):
        found |= _HOLE_MARK
    return found


def _name(node: Node) -> bool:
    """The table entry of identifier kinds (a marker: `_walk` checks them inline)."""
    return False


def _leaf(node: Node) -> bool:
    """The handler of nodes with nothing to check, inside or out (the walk does not descend)."""
    return False


@dataclass(frozen=True, slots=True)
class WalkConfig:
    """How the statement's code is parsed by the dialect's reference.

    `strict`: strict-mode code. `module`: the top level is an ES module's (functions declared at
    the top level are lexical; `import`/`export` are module syntax the body compile rejects).
    """

    strict: bool = True
    module: bool = True


_Table = list[Callable[[Node], bool] | None]


@dataclass(slots=True)
class _Scope:
    var_scope: bool
    function_scope: bool
    simple_catch: str | None = None
    lexical: set[str] = field(default_factory=set)
    vars: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class _Function:
    arrow: bool
    is_async: bool
    generator: bool
    static_block: bool = False


@dataclass(frozen=True, slots=True)
class _Jump:
    kind: str  # "loop" | "switch" | "label" | "boundary"
    name: str | None = None
    loop_label: bool = False


_FUNCTION_FRAMES: Final = {
    (arrow, asynchronous, generator): _Function(arrow, asynchronous, generator)
    for arrow in (False, True)
    for asynchronous in (False, True)
    for generator in (False, True)
}
_STATIC_BLOCK: Final = _Function(False, False, False, static_block=True)
_BOUNDARY: Final = _Jump("boundary")
_LOOP: Final = _Jump("loop")
_SWITCH: Final = _Jump("switch")


class StatementWalker:
    """Collects `StatementFacts` for one top-level statement (spans relative to its start)."""

    def __init__(self, data: bytes, config: WalkConfig) -> None:
        self.data = data
        self.config = config
        self.base = 0
        self._handlers: dict[int, Callable[[Node], bool]] = {}
        self._gated: list[tuple[frozenset[int], Callable[[Node], bool], int, bool]] = []
        self._tables: dict[int, _Table] = {}
        self._register()

    def _register(self) -> None:
        table: list[tuple[frozenset[int], Callable[[Node], bool]]] = [
            (K.CALL, self._call),
            (K.ASSIGNMENT, self._assignment),
            (K.UPDATE, self._update),
            (K.JSX, self._unexpected_here),
            (K.HTML_COMMENT, self._unexpected_here),
            (K.DECORATOR, self._decorator),
            (K.IMPORT_STATEMENT, self._import_statement),
            (K.EXPORT_STATEMENT, self._export_statement),
            (K.META_PROPERTY, self._meta_property),
            (K.NUMBER, self._number),
            (K.REGEX, self._regex),
            (K.WITH, self._with),
            (K.TRY, self._try),
            (K.BREAK, self._break),
            (K.CONTINUE, self._continue),
            (K.LOOPS, self._loop),
            (K.SWITCH, self._switch),
            (K.SWITCH_BODY, self._block),
            (K.LABELED, self._labeled),
            (K.FUNCTIONS, self._function),
            (K.CLASS, self._class),
            (K.STATIC_BLOCK, self._static_block),
            (K.STATEMENT_BLOCK, self._block),
            (K.CATCH, self._catch),
            (K.LEXICAL_DECLARATION, self._lexical_declaration),
            (K.VARIABLE_DECLARATION, self._variable_declaration),
            (K.USING_DECLARATION, self._using_declaration),
            (K.PAIR | K.PAIR_PATTERN | K.OBJECT_ASSIGNMENT_PATTERN, self._property),
            (K.AWAIT, self._await),
            (K.YIELD, self._yield),
            (K.RETURN, self._return),
        ]
        for kinds, handler in table:
            for kind in kinds:
                self._handlers[kind] = handler
        # Checks that can only report something when the statement's text contains a marker (see
        # `_markers`): a statement without it walks these nodes without the check (and does not
        # descend into the `leaf` ones, whose handlers never do).
        self._gated = [
            (K.STRING, self._string, _BACKSLASH, True),
            (K.TEMPLATE, self._template, _BACKSLASH, False),
            (K.OBJECT, self._object, _PROTO, False),
            (K.ARGUMENTS, self._arguments, _HOLE_MARK, False),
            (K.MEMBER, self._member, _HASH, False),
            (K.BINARY, self._binary, _HASH | _POWER, False),
            (K.UNARY, self._unary, _DELETE, False),
            (K.ARRAY_PATTERN | K.OBJECT_PATTERN | K.FORMAL_PARAMETERS, self._rest_comma, _REST_MARK, False),
        ]

    def _table(self, markers: int) -> _Table:
        """The handler of each node kind (by id) for a statement with these markers, built once per
        combination: None (no handler: descend), `_name` (identifiers, checked in `_walk`), `_leaf`
        (do not descend) or a handler saying whether to descend."""
        table = self._tables.get(markers)
        if table is None:
            handlers = dict(self._handlers)
            for kinds, handler, gate, leaf in self._gated:
                if markers & gate:
                    handlers.update(dict.fromkeys(kinds, handler))
                elif leaf:
                    handlers.update(dict.fromkeys(kinds, _leaf))
            handlers.update(dict.fromkeys(_NAME_KINDS, _name))
            table = self._tables[markers] = [handlers.get(kind) for kind in range(LANGUAGE.node_kind_count)]
        return table

    # -- entry point -------------------------------------------------------------------------------

    def walk(self, statement: Node) -> StatementFacts:
        self.base = statement.start_byte
        self._end = statement.end_byte
        self._has_error = statement.has_error
        self._markers = markers = _markers(self.data, self.base, self._end)
        self._dispatch = self._table(markers)
        self._calls: list[CallFact] = []
        self._reserved: list[NameUse] = []
        self._indirect: list[NameUse] = []
        self._syntax: list[SyntaxIssue] = []
        self._declarations: list[Declaration] = []
        self._regexes: list[RegexLiteral] = []
        self._member_calls: list[MemberCall] = []
        self._async: list[AsyncFunction] = []
        self._returns: list[TopLevelReturn] = []
        self._bindings: list[RunsAllBinding] = []
        self._scopes: list[_Scope] = []
        self._functions: list[_Function] = []
        self._jumps: list[_Jump] = []
        self._classes: list[frozenset[str]] = []
        self._shared_scope_bodies: set[int] = set()
        self._execution: Execution = "sequential"
        self._structure: tuple[StructureScope, ...] = ()
        self._exits: list[tuple[int, Callable[[], None]]] = []
        self._depth = 0
        self._walk(statement)
        self._check_runs_all_binding(statement)
        return StatementFacts(
            tuple(sorted(self._calls, key=_START)),
            tuple(self._reserved),
            tuple(self._indirect),
            tuple(self._syntax),
            tuple(self._declarations),
            tuple(self._regexes),
            tuple(self._member_calls),
            tuple(self._async),
            tuple(self._returns),
            tuple(self._bindings),
        )

    def _walk(self, root: Node) -> None:
        """Depth-first over `root` with a cursor; handlers may defer an action to the node's exit."""
        saved_exits, saved_depth = self._exits, self._depth
        exits: list[tuple[int, Callable[[], None]]] = []
        self._exits = exits
        cursor = root.walk()
        first_child = cursor.goto_first_child
        next_sibling = cursor.goto_next_sibling
        parent = cursor.goto_parent
        table = self._dispatch
        has_error = self._has_error
        escapes = self._markers & _BACKSLASH
        watched = _WATCHED_BYTES
        data = self.data
        depth = 0
        exit_depth = -1  # the depth of the innermost deferred action (-1: none)
        while True:
            node: Node = cursor.node  # type: ignore[assignment]
            if has_error and (node.is_missing or node.is_error):  # (ERROR's id is past the table)
                self._error(node)
            elif (handler := table[node.kind_id]) is None:
                if first_child():
                    depth += 1
                    continue
            elif handler is _name:  # most identifiers are of no interest: decide without a call
                start, end = node.start_byte, node.end_byte
                if data[start:end] in watched or (escapes and data.find(b"\\", start, end) >= 0):
                    self._identifier(node)
            elif handler is not _leaf:
                self._depth = depth
                descend = handler(node)
                if exits:
                    exit_depth = exits[-1][0]
                if descend and first_child():
                    depth += 1
                    continue
            while True:
                while depth <= exit_depth:
                    exits.pop()[1]()
                    exit_depth = exits[-1][0] if exits else -1
                if depth == 0:
                    self._exits, self._depth = saved_exits, saved_depth
                    return
                if next_sibling():
                    break
                parent()
                depth -= 1

    def _defer(self, action: Callable[[], None]) -> None:
        """Run `action` when the subtree of the node being handled has been walked."""
        self._exits.append((self._depth, action))

    # -- helpers -----------------------------------------------------------------------------------

    def _rel(self, offset: int) -> int:
        return offset - self.base

    def _issue(
        self,
        start: int,
        end: int,
        message: str,
        *,
        engine: str = "acorn",
        at: int | None = None,
        strict_only: bool = False,
    ) -> None:
        if strict_only and not self.config.strict:
            return
        self._syntax.append(
            SyntaxIssue(
                self._rel(start),
                self._rel(end),
                message,
                "v8" if engine == "v8" else "acorn",
                None if at is None else self._rel(at),
                strict_only,
            )
        )

    def _issue_at(self, node: Node, message: str, **options: object) -> None:
        self._issue(node.start_byte, node.end_byte, message, **options)  # type: ignore[arg-type]

    def _name(self, node: Node) -> str:
        return identifier_name(node_text(self.data, node))

    # -- workflow calls ----------------------------------------------------------------------------

    def _call(self, node: Node) -> bool:
        arguments = node.child_by_field_id(F.ARGUMENTS)
        function = node.child_by_field_id(F.FUNCTION)
        if arguments is None or function is None:
            return True
        if arguments.kind_id in K.TEMPLATE:
            if _has_optional_chain(function):
                self._issue(
                    arguments.start_byte,
                    arguments.end_byte,
                    "Optional chaining cannot appear in the tag of tagged template expressions",
                )
            return True
        callee = unwrap_parens(function) if function.kind_id in K.PAREN else function
        if callee.kind_id in K.IDENTIFIER:
            raw = self.data[callee.start_byte : callee.end_byte]
            name = _CALL_NAMES.get(raw)
            if name is None and raw.find(b"\\") >= 0:
                name = identifier_name(raw.decode("utf-8", "surrogatepass"))
            if name in _PRIMITIVE_SET:
                self._primitive(node, callee, arguments, name)
                return False
            if name == "emit":
                self._member_call(node, callee, arguments, "emit")
        elif callee.kind_id in K.MEMBER:
            target = _member_path(self.data, callee)
            if target is not None:
                self._member_call(node, callee, arguments, target)
        return True

    def _primitive(self, node: Node, callee: Node, arguments: Node, kind: str) -> None:
        base = self.base
        items = named_items(arguments)
        data = self.data
        record_index = 1 if kind == "parallel" else 2 if kind == "pipeline" else -1
        records = _RECORD_ARGUMENTS.get(kind, ())
        args = tuple(
            [_record(item, base) if index in records else to_expr(data, item, base) for index, item in enumerate(items)]
        )
        execution: Execution = (
            "parallel" if kind == "parallel" else "sequential" if kind == "pipeline" else self._execution
        )
        outer = self._structure
        self._calls.append(
            CallFact(
                kind,
                node.start_byte - base,
                node.end_byte - base,
                callee.start_byte - base,
                callee.end_byte - base,
                args,
                execution,
                outer,
            )
        )
        if self._markers & _HOLE_MARK:
            self._arguments(arguments)
        if self._has_error:
            for token in arguments.children:
                if token.is_missing or token.is_error:
                    self._error(token)
        # The arguments are walked in the call's scope, except the record of a parallel/pipeline,
        # walked in a new structure scope (spec B.5). An argument whose conversion shows there is
        # nothing to find in it is not walked.
        skip_inert = not self._has_error and not self._markers & _HTML_COMMENT_MARK
        outer_execution = self._execution
        for index, item in enumerate(items):
            if item.is_error:
                continue
            if index == record_index:
                name = static_string(args[0]) if args else None
                scope = StructureScope("parallel" if kind == "parallel" else "pipeline", name, None)
                self._execution, self._structure = execution, (*outer, scope)
                self._walk(item)
                self._execution, self._structure = outer_execution, outer
            elif not (skip_inert and self._inert(args[index])):
                self._walk(item)

    def _inert(self, expr: Expr | None) -> bool:
        """Whether walking the source of a converted expression would record nothing.

        True for literals, non-watched identifiers, and arrays and objects made of them, when no
        check applies to their tokens: escapes (a string's octal escapes), legacy octal numbers,
        `__proto__` keys. Object members only hold properties and their keys (a pair's other
        children are comments: the statement has no `<!--` and no errors). `_property` naming a
        structure scope has no effect without a workflow call inside.
        """
        if isinstance(expr, LiteralExpr):
            kind = expr.kind
            if kind == "string":
                return not self._markers & _BACKSLASH or self._plain(expr.start, expr.end)
            if kind == "number" or kind == "bigint":
                return not self._legacy_octal(expr.start, expr.end)
            return kind != "regex"
        if isinstance(expr, IdentifierExpr):
            return expr.name not in _WATCHED
        if isinstance(expr, ObjectExpr):
            if expr.kind != "object" or self._markers & _PROTO:
                return False
            for prop in expr.properties:
                if not isinstance(prop, PropertyExpr) or prop.computed or prop.key in _WATCHED:
                    return False
                if not prop.shorthand:
                    first = self.data[self.base + prop.key_start]
                    if first in _QUOTES:
                        if self._markers & _BACKSLASH and not self._plain(prop.key_start, prop.key_end):
                            return False
                    elif first in _DIGITS and self._legacy_octal(prop.key_start, prop.key_end):
                        return False
                    if not self._inert(prop.value):
                        return False
            return True
        if isinstance(expr, ArrayExpr):
            return all(element is None or self._inert(element) for element in expr.elements)
        return False

    def _plain(self, start: int, end: int) -> bool:
        """No backslash in the statement-relative span."""
        return self.data.find(b"\\", self.base + start, self.base + end) < 0

    def _legacy_octal(self, start: int, end: int) -> bool:
        """Whether the number token at this statement-relative span is one `_number` reports."""
        offset = self.base + start
        data = self.data
        return end - start > 1 and data[offset] == _ZERO and data[offset + 1 : offset + 2].isdigit()

    def _member_call(self, node: Node, callee: Node, arguments: Node, target: str) -> None:
        parent = node.parent
        observed = parent is None or parent.kind_id not in K.EXPRESSION_STATEMENT
        self._member_calls.append(
            MemberCall(
                target,
                self._rel(node.start_byte),
                self._rel(node.end_byte),
                self._rel(callee.start_byte),
                self._rel(callee.end_byte),
                tuple(to_expr(self.data, item, self.base) for item in named_items(arguments)),
                observed,
            )
        )

    def _property(self, node: Node) -> bool:
        """The first object member met under a parallel/pipeline scope names it (spec B.5 `key`)."""
        structure = self._structure
        if structure and structure[-1].key is None:
            key_node = node.child_by_field_id(F.KEY) or node.child_by_field_id(F.LEFT)
            key = property_key(self.data, key_node)[0] if key_node is not None else None
            if key is not None:
                saved = self._structure
                scope = saved[-1]
                self._structure = (*saved[:-1], StructureScope(scope.kind, scope.name, key))

                def restore() -> None:
                    self._structure = saved

                self._defer(restore)
        return True

    # -- identifiers -------------------------------------------------------------------------------

    def _identifier(self, node: Node) -> bool:
        name = identifier_name(node_text(self.data, node))
        if name not in _WATCHED:
            return False
        start, end = self._rel(node.start_byte), self._rel(node.end_byte)
        if name in _INTERNAL:
            self._reserved.append(NameUse(name, start, end))
        elif name in DIRECT_ONLY:
            if not _is_direct_callee(node) and not _is_property_key(node):
                self._indirect.append(NameUse(name, start, end))
        elif node.kind_id not in K.PROPERTY_IDENTIFIER and node.kind_id not in K.LABEL:
            if name == "await":
                if self.config.module and not self._in_async():
                    self._issue_at(node, "Cannot use keyword 'await' outside an async function")
            else:
                self._issue_at(node, f"The keyword '{name}' is reserved", strict_only=True)
        return False

    def _member(self, node: Node) -> bool:
        prop = node.child_by_field_id(F.PROPERTY)
        if prop is not None and prop.kind_id in K.PRIVATE_NAME:
            self._check_private(prop)
        return True

    def _check_private(self, node: Node) -> None:
        name = node_text(self.data, node)
        if not any(name in declared for declared in self._classes):
            self._issue_at(node, f"Private field '{name}' must be declared in an enclosing class")

    # -- expressions -------------------------------------------------------------------------------

    def _binary(self, node: Node) -> bool:
        operator = node.child_by_field_id(F.OPERATOR)
        left = node.child_by_field_id(F.LEFT)
        if (
            operator is not None
            and operator.type == "**"
            and left is not None
            and (left.kind_id in K.UNARY or left.kind_id in K.AWAIT)
        ):
            self._issue_at(operator, "Unexpected token")
        if left is not None and left.kind_id in K.PRIVATE_NAME:
            self._check_private(left)
        return True

    def _unary(self, node: Node) -> bool:
        operator = node.child_by_field_id(F.OPERATOR)
        argument = node.child_by_field_id(F.ARGUMENT)
        if operator is not None and operator.type == "delete" and argument is not None:
            target = unwrap_parens(argument)
            if target.kind_id in K.IDENTIFIER:
                self._issue_at(node, "Deleting local variable in strict mode", strict_only=True)
            elif target.kind_id in K.MEMBER:
                prop = target.child_by_field_id(F.PROPERTY)
                if prop is not None and prop.kind_id in K.PRIVATE_NAME:
                    self._issue_at(node, "Private fields can not be deleted")
        return True

    def _assignment(self, node: Node) -> bool:
        left = node.child_by_field_id(F.LEFT)
        if left is not None:
            self._check_assignment_target(left)
        return True

    def _update(self, node: Node) -> bool:
        argument = node.child_by_field_id(F.ARGUMENT)
        if argument is not None:
            self._check_assignment_target(argument)
        return True

    def _check_assignment_target(self, target: Node) -> None:
        inner = unwrap_parens(target)
        if inner.kind_id in K.MEMBER and _has_optional_chain(inner):
            self._issue_at(target, "Optional chaining cannot appear in left-hand side")
        elif inner.kind_id in K.IDENTIFIER and self._name(inner) in ("eval", "arguments"):
            self._issue_at(inner, f"Assigning to {self._name(inner)} in strict mode", strict_only=True)

    def _unexpected_here(self, node: Node) -> bool:
        self._issue_at(node, "Unexpected token")
        return False

    def _decorator(self, node: Node) -> bool:
        self._issue(node.start_byte, node.start_byte + 1, "Unexpected character '@'")
        return False

    def _meta_property(self, node: Node) -> bool:
        text = node_text(self.data, node)
        if text.startswith("new"):
            if not any(not frame.arrow for frame in self._functions):
                self._issue_at(node, "'new.target' can only be used in functions and class static block")
        elif self.config.module:
            self._issue_at(node, "Cannot use 'import.meta' outside a module", engine="v8")
        else:
            self._issue_at(node, "Cannot use 'import.meta' outside a module")
        return False

    def _import_statement(self, node: Node) -> bool:
        if self.config.module:
            self._issue_at(node, "Cannot use import statement outside a module", engine="v8")
        else:
            self._issue_at(node, "'import' and 'export' may appear only with 'sourceType: module'")
        return False

    def _export_statement(self, node: Node) -> bool:
        if self.config.module:
            self._issue(node.start_byte, node.start_byte + 6, "Unexpected token 'export'", engine="v8")
            return True
        self._issue_at(node, "'import' and 'export' may appear only with 'sourceType: module'")
        return False

    def _using_declaration(self, node: Node) -> bool:
        declarator = next((item for item in named_items(node) if item.kind_id in K.DECLARATOR), None)
        name = declarator.child_by_field_id(F.NAME) if declarator is not None else None
        label = node_text(self.data, name) if name is not None else "using"
        self._issue_at(node, f"Unexpected identifier '{label}'", engine="v8")
        return True

    # -- literals ----------------------------------------------------------------------------------

    def _number(self, node: Node) -> bool:
        if self._legacy_octal(node.start_byte - self.base, node.end_byte - self.base):
            self._issue_at(node, "Invalid number", strict_only=True)
        return False

    def _string(self, node: Node) -> bool:
        raw = self.data[node.start_byte : node.end_byte]
        if b"\\" in raw:
            for match in _OCTAL_ESCAPE.finditer(raw):
                if match.group(1):
                    at = node.start_byte + match.start()
                    self._issue(at, node.start_byte + match.end(), "Octal literal in strict mode", strict_only=True)
                    break
                if match.group(2):
                    at = node.start_byte + match.start() + 1
                    self._issue(at, at + 1, "Invalid escape sequence", strict_only=True)
                    break
        return False

    def _template(self, node: Node) -> bool:
        parent = node.parent
        tagged = parent is not None and parent.kind_id in K.CALL and parent.child_by_field_id(F.ARGUMENTS) == node
        if not tagged:
            for child in node.children:
                if child.type == "escape_sequence":
                    raw = self.data[child.start_byte : child.end_byte]
                    if re.fullmatch(rb"\\(?:0[0-9]|[1-9])", raw):
                        self._issue_at(child, "Bad escape sequence in untagged template literal")
                        break
        return True

    def _regex(self, node: Node) -> bool:
        pattern = node.child_by_field_id(F.PATTERN)
        flags_node = node.child_by_field_id(F.FLAGS)
        flags = node_text(self.data, flags_node) if flags_node is not None else ""
        at = node.start_byte + 1
        if any(flag not in _REGEX_FLAGS for flag in flags) or ("u" in flags and "v" in flags):
            self._issue(at, node.end_byte, "Invalid regular expression flag")
        elif len(set(flags)) != len(flags):
            self._issue(at, node.end_byte, "Duplicate regular expression flag")
        else:
            self._regexes.append(
                RegexLiteral(
                    self._rel(node.start_byte),
                    self._rel(node.end_byte),
                    node_text(self.data, pattern) if pattern is not None else "",
                    flags,
                )
            )
        return False

    # -- statements --------------------------------------------------------------------------------

    def _with(self, node: Node) -> bool:
        self._issue(node.start_byte, node.start_byte + 4, "'with' in strict mode", strict_only=True)
        return True

    def _try(self, node: Node) -> bool:
        if node.child_by_field_id(F.HANDLER) is None and node.child_by_field_id(F.FINALIZER) is None:
            self._issue(node.start_byte, node.start_byte + 3, "Missing catch or finally clause")
        return True

    def _jump_frames(self) -> list[_Jump]:
        frames: list[_Jump] = []
        for frame in reversed(self._jumps):
            if frame.kind == "boundary":
                break
            frames.append(frame)
        return frames

    def _break(self, node: Node) -> bool:
        label = node.child_by_field_id(F.LABEL)
        frames = self._jump_frames()
        if label is not None:
            name = self._name(label)
            ok = any(frame.kind == "label" and frame.name == name for frame in frames)
        else:
            ok = any(frame.kind in ("loop", "switch") for frame in frames)
        if not ok:
            self._issue_at(node, "Unsyntactic break")
        return False

    def _continue(self, node: Node) -> bool:
        label = node.child_by_field_id(F.LABEL)
        frames = self._jump_frames()
        if label is not None:
            name = self._name(label)
            ok = any(frame.kind == "label" and frame.name == name and frame.loop_label for frame in frames)
        else:
            ok = any(frame.kind == "loop" for frame in frames)
        if not ok:
            self._issue_at(node, "Unsyntactic continue")
        return False

    def _push_jump(self, frame: _Jump) -> None:
        self._jumps.append(frame)

        def leave() -> None:
            self._jumps.pop()

        self._defer(leave)

    def _loop(self, node: Node) -> bool:
        self._push_jump(_LOOP)
        if node.kind_id in K.FOR:
            self._push_scope(_Scope(var_scope=False, function_scope=False))
            for child in node.children:
                if child.type == "await" and not self._in_async():
                    self._issue_at(child, "Unexpected token")
            kind = next((child.type for child in node.children if child.type in ("let", "const", "var")), None)
            left = node.child_by_field_id(F.LEFT)
            if kind is not None and left is not None:
                for name_node in _pattern_names(left):
                    self._declare(name_node, "var" if kind == "var" else "lexical")
        return True

    def _switch(self, node: Node) -> bool:
        self._push_jump(_SWITCH)
        return True

    def _labeled(self, node: Node) -> bool:
        label = node.child_by_field_id(F.LABEL)
        if label is None:
            return True
        name = self._name(label)
        if any(frame.kind == "label" and frame.name == name for frame in self._jump_frames()):
            self._issue_at(label, f"Label '{name}' is already declared")
        body = node.child_by_field_id(F.BODY)
        while body is not None and body.kind_id in K.LABELED:
            body = body.child_by_field_id(F.BODY)
        self._push_jump(_Jump("label", name, body is not None and body.kind_id in K.LOOPS))
        return True

    def _return(self, node: Node) -> bool:
        if not self._functions:
            argument = next(iter(named_items(node)), None)
            self._returns.append(
                TopLevelReturn(
                    self._rel(node.start_byte),
                    self._rel(node.end_byte),
                    to_expr(self.data, argument, self.base) if argument is not None else None,
                )
            )
        return True

    def _await(self, node: Node) -> bool:
        if self._functions and self._functions[-1].static_block:
            self._issue_at(node, "Cannot use await in class static initialization block")
        elif not self._in_async():
            if self.config.module:
                self._issue_at(node, "Cannot use keyword 'await' outside an async function")
            else:
                argument = next(iter(named_items(node)), node)
                self._issue_at(argument, "Unexpected token")
        return True

    def _yield(self, node: Node) -> bool:
        generator = next((frame.generator for frame in reversed(self._functions) if not frame.arrow), False)
        if not generator:
            if self.config.strict:
                self._issue_at(node, "The keyword 'yield' is reserved")
            else:
                argument = next(iter(named_items(node)), node)
                self._issue_at(argument, "Unexpected token")
        return True

    def _in_async(self) -> bool:
        """Whether `await` is allowed here: top level (async wrapper) or an async function."""
        return not self._functions or self._functions[-1].is_async

    # -- functions and classes ---------------------------------------------------------------------

    def _function(self, node: Node) -> bool:
        kind = node.kind_id
        arrow = kind in K.ARROW
        asynchronous, generator = function_flags(node)
        if kind in K.FUNCTION_DECLARATION:
            name = node.child_by_field_id(F.NAME)
            if name is not None:
                self._declare_function(name, asynchronous or generator)
        if kind in K.METHOD and node.parent is not None and node.parent.kind_id in K.OBJECT:
            self._property(node)
        if asynchronous:
            self._async.append(AsyncFunction(self._rel(node.start_byte), self._rel(node.end_byte)))
        self._functions.append(_FUNCTION_FRAMES[arrow, asynchronous, generator])
        self._jumps.append(_BOUNDARY)
        self._scopes.append(_Scope(True, True))
        saved_classes = self._classes

        def leave() -> None:
            self._functions.pop()
            self._jumps.pop()
            self._scopes.pop()
            self._classes = saved_classes

        self._defer(leave)
        self._parameters(node, arrow or kind in K.METHOD)
        body = node.child_by_field_id(F.BODY)
        if body is not None and body.kind_id in K.STATEMENT_BLOCK:
            self._shared_scope_bodies.add(body.id)
        return True

    def _parameters(self, node: Node, never_duplicates: bool) -> None:
        params = node.child_by_field_id(F.PARAMETERS)
        if params is None:
            params = node.child_by_field_id(F.PARAMETER)
            if params is None:
                return
        if params.kind_id in K.FORMAL_PARAMETERS:
            items = named_items(params)
            if not items:
                return
            names = [name for item in items for name in _pattern_names(item)]
            simple = all(item.kind_id in K.IDENTIFIER for item in items)
        else:
            names = _pattern_names(params)
            simple = params.kind_id in K.IDENTIFIER or all(item.kind_id in K.IDENTIFIER for item in named_items(params))
        allow_duplicates = not self.config.strict and not never_duplicates and simple
        seen: set[str] = set()
        for name_node in names:
            name = self._name(name_node)
            if name in seen and not allow_duplicates:
                self._issue_at(name_node, "Argument name clash")
            if name in ("eval", "arguments"):
                self._issue_at(name_node, f"Binding {name} in strict mode", strict_only=True)
            seen.add(name)
            self._scopes[-1].vars.add(name)

    def _class(self, node: Node) -> bool:
        name = node.child_by_field_id(F.NAME)
        if name is not None and node.kind_id in K.CLASS and node.type == "class_declaration":
            self._declare(name, "lexical")
        body = node.child_by_field_id(F.BODY)
        declared: set[str] = set()
        if body is not None:
            for member in named_items(body):
                key = member.child_by_field_id(F.PROPERTY) or member.child_by_field_id(F.NAME)
                if key is not None and key.kind_id in K.PRIVATE_NAME:
                    declared.add(node_text(self.data, key))
        saved = self._classes
        self._classes = [*saved, frozenset(declared)]

        def leave() -> None:
            self._classes = saved

        self._defer(leave)
        return True

    def _static_block(self, node: Node) -> bool:
        self._functions.append(_STATIC_BLOCK)
        self._jumps.append(_BOUNDARY)
        self._scopes.append(_Scope(var_scope=True, function_scope=False))

        def leave() -> None:
            self._functions.pop()
            self._jumps.pop()
            self._scopes.pop()

        self._defer(leave)
        return True

    # -- scopes and declarations (acorn's `declareName`) -------------------------------------------

    def _push_scope(self, scope: _Scope) -> None:
        self._scopes.append(scope)

        def leave() -> None:
            self._scopes.pop()

        self._defer(leave)

    def _block(self, node: Node) -> bool:
        if node.id not in self._shared_scope_bodies:
            self._push_scope(_Scope(False, False))
        return True

    def _catch(self, node: Node) -> bool:
        param = node.child_by_field_id(F.PARAMETER)
        body = node.child_by_field_id(F.BODY)
        simple = param is not None and param.kind_id in K.IDENTIFIER
        scope = _Scope(
            var_scope=False,
            function_scope=False,
            simple_catch=self._name(param) if simple and param else None,
        )
        self._push_scope(scope)
        if param is not None:
            if simple:
                scope.lexical.add(self._name(param))
            else:
                for name_node in _pattern_names(param):
                    self._declare(name_node, "lexical")
        if body is not None:
            self._shared_scope_bodies.add(body.id)
        return True

    def _lexical_declaration(self, node: Node) -> bool:
        for declarator in named_items(node):
            if declarator.kind_id not in K.DECLARATOR:
                continue
            name = declarator.child_by_field_id(F.NAME)
            if name is None:
                continue
            for name_node in _pattern_names(name):
                bound = self._name(name_node)
                if bound == "let":
                    self._issue_at(name_node, "let is disallowed as a lexically bound name")
                self._declare(name_node, "lexical", bound)
            if declarator.child_by_field_id(F.VALUE) is None and not node.has_error and not _in_for_head(node):
                kind = node.children[0].type if node.children else "let"
                if name.kind_id not in K.IDENTIFIER:
                    self._issue(
                        name.end_byte,
                        name.end_byte,
                        "Complex binding patterns require an initialization value",
                    )
                elif kind == "const":
                    at = min(_next_token_start(self.data, name.end_byte), self._end)
                    self._issue(at, at + 1, "Unexpected token")
        return True

    def _variable_declaration(self, node: Node) -> bool:
        for declarator in named_items(node):
            name = declarator.child_by_field_id(F.NAME) if declarator.kind_id in K.DECLARATOR else None
            if name is not None:
                for name_node in _pattern_names(name):
                    self._declare(name_node, "var")
        return True

    def _declare(self, node: Node, binding: str, name: str | None = None) -> None:
        if name is None:
            name = self._name(node)
        if name in ("eval", "arguments"):
            self._issue_at(node, f"Binding {name} in strict mode", strict_only=True)
        if binding == "var":
            self._declare_var(node, name)
            return
        if not self._scopes:
            self._declarations.append(
                Declaration(name, "lexical", self._rel(node.start_byte), self._rel(node.end_byte))
            )
            return
        scope = self._scopes[-1]
        if name in scope.lexical or name in scope.functions or name in scope.vars:
            self._redeclared(node, name)
        scope.lexical.add(name)

    def _declare_var(self, node: Node, name: str) -> None:
        for scope in reversed(self._scopes):
            if (name in scope.lexical and scope.simple_catch != name) or (
                not scope.function_scope and name in scope.functions
            ):
                self._redeclared(node, name)
                return
            scope.vars.add(name)
            if scope.var_scope:
                return
        self._declarations.append(Declaration(name, "var", self._rel(node.start_byte), self._rel(node.end_byte)))

    def _declare_function(self, node: Node, async_or_generator: bool) -> None:
        name = self._name(node)
        at_top = not self._scopes
        as_var = (not self.config.module) if at_top else self._scopes[-1].function_scope
        if self.config.strict or async_or_generator:
            self._declare(node, "var" if as_var else "lexical")
            return
        if at_top:
            self._declarations.append(
                Declaration(name, "function", self._rel(node.start_byte), self._rel(node.end_byte))
            )
            return
        scope = self._scopes[-1]
        if name in scope.lexical or (not as_var and name in scope.vars):
            self._redeclared(node, name)
        scope.functions.add(name)

    def _redeclared(self, node: Node, name: str) -> None:
        self._issue_at(node, f"Identifier '{name}' has already been declared")

    # -- punctuation-level checks ------------------------------------------------------------------

    def _arguments(self, node: Node) -> bool:
        if not _HOLE.search(self.data, node.start_byte, node.end_byte):
            return True
        expecting = True
        for child in node.children:
            if child.kind_id in K.COMMENT:
                continue
            if child.type == ",":
                if expecting:
                    self._issue_at(child, "Unexpected token")
                    break
                expecting = True
            elif child.is_named:
                expecting = False
        return True

    def _rest_comma(self, node: Node) -> bool:
        after_rest = False
        for child in node.children:
            if child.kind_id in K.COMMENT:
                continue
            if after_rest and child.type == ",":
                self._issue_at(child, "Comma is not permitted after the rest element")
                break
            after_rest = child.kind_id in K.REST
        return True

    def _object(self, node: Node) -> bool:
        if self.data.find(b"__proto__", node.start_byte, node.end_byte) < 0:
            return True
        seen_proto = False
        for member in named_items(node):
            if member.kind_id not in K.PAIR:
                continue
            key = member.child_by_field_id(F.KEY)
            if key is None or key.kind_id in K.COMPUTED_KEY:
                continue
            if property_key(self.data, key)[0] == "__proto__":
                if seen_proto:
                    self._issue_at(key, "Redefinition of __proto__ property")
                seen_proto = True
        return True

    # -- tree-sitter errors ------------------------------------------------------------------------

    def _error(self, node: Node) -> None:
        """An ERROR or MISSING node: say what acorn would most likely say, at the offending token."""
        if node.is_missing:
            at = _next_token_start(self.data, node.start_byte)
            self._issue(at, min(at + 1, len(self.data)), "Unexpected token")
            return
        text = self.data[node.start_byte : node.end_byte]
        if text.startswith(b"/*") and b"*/" not in text:
            self._issue(node.start_byte, node.end_byte, "Unterminated comment")
            return
        previous = _preceding_leaf(node)
        if previous is not None and previous.kind_id in K.NUMBER and previous.end_byte == node.start_byte:
            self._issue(node.start_byte, node.end_byte, "Identifier directly after number")
            return
        tokens = _leaves(node)
        for token in tokens:
            if token.type in ('"', "'") and not token.is_named:
                self._issue(token.start_byte, node.end_byte, "Unterminated string constant")
                return
            if token.type == "`":
                self._issue(token.start_byte, node.end_byte, "Unterminated template", at=token.end_byte)
                return
        at, end = _unexpected_token(self.data, node, tokens)
        self._issue(at, end, "Unexpected token")

    # -- pi-subagents: `const r = await runs.all([...])` at the top level --------------------------

    def _check_runs_all_binding(self, statement: Node) -> None:
        if statement.kind_id not in K.LEXICAL_DECLARATION:
            return
        for declarator in named_items(statement):
            name = declarator.child_by_field_id(F.NAME)
            value = declarator.child_by_field_id(F.VALUE)
            if name is None or value is None or name.kind_id not in K.IDENTIFIER or value.kind_id not in K.AWAIT:
                continue
            awaited = next(iter(named_items(value)), None)
            call = self._member_call_at(awaited)
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
            self._bindings.append(
                RunsAllBinding(self._name(name), keys, self._rel(declarator.start_byte), self._rel(declarator.end_byte))
            )

    def _member_call_at(self, node: Node | None) -> MemberCall | None:
        if node is None:
            return None
        start = self._rel(node.start_byte)
        return next((call for call in self._member_calls if call.start == start), None)


# -- tree helpers ----------------------------------------------------------------------------------

_START: Final = attrgetter("start")
_RECORD_ARGUMENTS: Final = {"parallel": (1,), "pipeline": (1, 2)}
"""Arguments only checked for being object literals (by index): their members are not converted."""


def _record(node: Node, base: int) -> Expr:
    if node.kind_id in K.OBJECT:
        return ObjectExpr("record", node.start_byte - base, node.end_byte - base, ())
    if node.kind_id in K.SPREAD:
        return SpreadExpr("spread", node.start_byte - base, node.end_byte - base, None)
    return Expr("other", node.start_byte - base, node.end_byte - base)


def _in_for_head(node: Node) -> bool:
    parent = node.parent
    return parent is not None and parent.kind_id in K.FOR


def _has_optional_chain(node: Node) -> bool:
    """Whether a member/call chain (not crossing parentheses) contains `?.`."""
    current: Node | None = node
    while current is not None and (current.kind_id in K.MEMBER or current.kind_id in K.CALL):
        if any(child.kind_id in K.OPTIONAL_CHAIN for child in current.children):
            return True
        current = current.child_by_field_id(F.OBJECT) or current.child_by_field_id(F.FUNCTION)
    return False


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


def _is_direct_callee(node: Node) -> bool:
    current = node
    parent = current.parent
    while parent is not None and parent.kind_id in K.PAREN and len(named_items(parent)) == 1:
        current, parent = parent, parent.parent
    if parent is None or parent.kind_id not in K.CALL:
        return False
    arguments = parent.child_by_field_id(F.ARGUMENTS)
    return (
        parent.child_by_field_id(F.FUNCTION) == current and arguments is not None and arguments.kind_id in K.ARGUMENTS
    )


def _is_property_key(node: Node) -> bool:
    """A non-computed, non-shorthand key of an object literal or pattern member (ESTree `Property`)."""
    if node.kind_id not in K.PROPERTY_IDENTIFIER:
        return False
    parent = node.parent
    if parent is None:
        return False
    if parent.kind_id in K.PAIR or parent.kind_id in K.PAIR_PATTERN:
        return parent.child_by_field_id(F.KEY) == node
    if parent.kind_id in K.METHOD:
        grand = parent.parent
        return grand is not None and grand.kind_id in K.OBJECT and parent.child_by_field_id(F.NAME) == node
    return False


def _pattern_names(node: Node) -> list[Node]:
    """The identifiers a binding pattern binds, in source order."""
    kind = node.kind_id
    if kind in K.IDENTIFIER or kind in K.SHORTHAND_PATTERN:
        return [node]
    if kind in K.ASSIGNMENT_PATTERN or kind in K.OBJECT_ASSIGNMENT_PATTERN:
        left = node.child_by_field_id(F.LEFT)
        return _pattern_names(left) if left is not None else []
    if kind in K.PAIR_PATTERN:
        value = node.child_by_field_id(F.VALUE)
        return _pattern_names(value) if value is not None else []
    if kind in K.OBJECT_PATTERN or kind in K.ARRAY_PATTERN or kind in K.REST or kind in K.FORMAL_PARAMETERS:
        return [name for item in named_items(node) for name in _pattern_names(item)]
    return []


def _leaves(node: Node) -> list[Node]:
    """Tokens of a subtree (string, template, regex and number nodes count as one token)."""
    tokens: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.kind_id in K.COMMENT:
            continue
        if current.child_count == 0 or current.kind_id in _ATOMIC:
            tokens.append(current)
        else:
            stack.extend(reversed(current.children))
    return tokens


_ATOMIC: Final = K.STRING | K.NUMBER | K.REGEX | K.TEMPLATE


def _next_token_start(data: bytes, offset: int) -> int:
    """Skip whitespace and comments from `offset` (where acorn would read its next token)."""
    length = len(data)
    while offset < length:
        ch = data[offset : offset + 1]
        if ch in (b" ", b"\t", b"\n", b"\r", b"\v", b"\f"):
            offset += 1
        elif data.startswith(b"//", offset):
            end = data.find(b"\n", offset)
            offset = length if end < 0 else end
        elif data.startswith(b"/*", offset):
            end = data.find(b"*/", offset + 2)
            offset = length if end < 0 else end + 2
        elif data.startswith(b"\xc2\xa0", offset) or data.startswith(b"\xef\xbb\xbf", offset):
            offset += 2 if data[offset] == 0xC2 else 3
        else:
            break
    return offset


def _following_leaf(node: Node) -> Node | None:
    current: Node | None = node
    while current is not None:
        sibling = current.next_sibling
        while sibling is not None and sibling.kind_id in K.COMMENT:
            sibling = sibling.next_sibling
        if sibling is not None:
            while sibling.child_count and sibling.kind_id not in _ATOMIC:
                sibling = sibling.children[0]
            return sibling
        current = current.parent
    return None


def _preceding_leaf(node: Node) -> Node | None:
    current: Node | None = node
    while current is not None:
        sibling = current.prev_sibling
        while sibling is not None and sibling.kind_id in K.COMMENT:
            sibling = sibling.prev_sibling
        if sibling is not None:
            while sibling.child_count and sibling.kind_id not in _ATOMIC:
                sibling = sibling.children[-1]
            return sibling
        current = current.parent
    return None


_OPENERS: Final = {"(": ")", "[": "]", "{": "}", "${": "}"}
_CLOSERS: Final = frozenset({")", "]", "}"})
_NEEDS_OPERAND: Final = frozenset(
    {
        "=",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "**=",
        "<<=",
        ">>=",
        ">>>=",
        "&=",
        "|=",
        "^=",
        "&&=",
        "||=",
        "??=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "<",
        ">",
        "<=",
        ">=",
        "==",
        "!=",
        "===",
        "!==",
        "&&",
        "||",
        "??",
        "&",
        "|",
        "^",
        "<<",
        ">>",
        ">>>",
        "!",
        "~",
        "typeof",
        "void",
        "delete",
        "await",
        "new",
        "in",
        "instanceof",
        "of",
        "?",
        ":",
        ",",
        "(",
        "[",
        "=>",
        "...",
        "case",
        "throw",
        "extends",
        "yield",
        "${",
    }
)
_DECLARATION_KEYWORDS: Final = frozenset({"const", "let", "var"})
_VALUE_END: Final = frozenset({")", "]", "}", "this", "super", "true", "false", "null", "undefined"})
_STATEMENT_KEYWORDS: Final = frozenset(
    {
        "return",
        "if",
        "for",
        "while",
        "do",
        "switch",
        "try",
        "throw",
        "break",
        "continue",
        "var",
        "let",
        "const",
        "function",
        "class",
        "import",
        "export",
        "with",
        "debugger",
    }
)


def _is_value_end(token: Node) -> bool:
    return (token.is_named and token.kind_id not in K.COMMENT) or token.type in _VALUE_END


def _starts_expression(token: Node) -> bool:
    if token.is_named:
        return True
    return token.type in {
        "(",
        "[",
        "{",
        "function",
        "class",
        "new",
        "!",
        "~",
        "+",
        "-",
        "++",
        "--",
        "typeof",
        "void",
        "delete",
        "await",
        "async",
        "this",
        "super",
        "import",
        "`",
        "yield",
        "...",
        "/",
    }


def _unexpected_token(data: bytes, error: Node, tokens: list[Node]) -> tuple[int, int]:
    """Where acorn most likely stopped: the first token that cannot continue the tokens before it."""
    previous = _preceding_leaf(error)
    following = _following_leaf(error)
    sequence: list[Node | None] = [*tokens, following]
    depth: list[str] = []
    top_level = error.parent is not None and error.parent.kind_id in K.PROGRAM
    for token in sequence:
        if token is None:
            if depth or (
                previous is not None and (previous.type in _NEEDS_OPERAND or previous.type in _DECLARATION_KEYWORDS)
            ):
                return len(data), len(data)
            break
        kind = token.type
        bad = False
        if kind in _CLOSERS and not token.is_named:
            if depth:
                depth.pop()
            elif top_level or (
                previous is not None and previous.type in _NEEDS_OPERAND and previous.type not in ("(", "[")
            ):
                bad = True
        elif previous is not None:
            prev = previous.type
            if prev in _DECLARATION_KEYWORDS:
                bad = not (token.kind_id in K.IDENTIFIER or kind in ("[", "{"))
            elif prev in _NEEDS_OPERAND:
                bad = not _starts_expression(token)
            elif prev in _STATEMENT_KEYWORDS and prev in ("return",):
                bad = not _starts_expression(token) and kind not in (";", "}")
            elif _is_value_end(previous) and previous.end_point.row == token.start_point.row:
                bad = (
                    _starts_expression(token)
                    and kind not in ("(", "[", "`", "+", "-", "/", "{")
                    and kind not in ("in", "of", "instanceof")
                )
        if bad:
            return token.start_byte, max(token.end_byte, token.start_byte + 1)
        if kind in _OPENERS and not token.is_named:
            depth.append(kind)
        previous = token
    return error.start_byte, max(error.end_byte, error.start_byte + 1)
