"""One walk over a top-level statement: the facts the rules use, and its early syntax errors.

The walk follows the reference's view of the tree (acorn ESTree): which calls are workflow calls
is `calls`' answer, shared with the worker's instrumentation and the editor features. Besides the
facts rules need (workflow calls, notable identifiers, top-level returns, async functions), the
walk runs the early-error checks of `early_errors.EarlyErrors`, and a dialect may gather its own
facts on the way (`DialectFacts`, named by its `WalkConfig`). A statement with errors, or a large
one, is walked in pieces (`StatementWalker.walk_pieces`), so that its unchanged parts are reused after
an edit.

Speed (DESIGN section 11): the walk visits named nodes (tokens only under an error), dispatching on
a table indexed by node kind. Visiting every node from Python costs about as much as the parse
(py-tree-sitter makes an object of each), so the walk visits as few as it can; a tree-sitter query
for the handled kinds costs as much as the walk. Checks that need a marker in the statement's text
(`_markers`: an escape, `__proto__`, `**`...) are left out of the table when it is absent (and a
marker the whole text lacks is not searched for in each statement), and the arguments of a
workflow call that convert to plain literals (`StatementWalker._inert`) are not walked again, nor
is a call of another function whose arguments are only literals and names (`_PLAIN_ARGUMENTS`,
`log("...")`): none can find anything there. Where a node's shape is certain (no error in the
statement, no comment among its children), its parts are read from `children` rather than asked
for by field (`child_by_field_id` costs several times more: py-tree-sitter parses its argument
tuple and makes a node object; `children` is one list, kept by the node).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

from tree_sitter import Node

from piflow.analysis.calls import INTERNAL_NAMES, PRIMITIVES, call_of_callee, callee_name, direct_call
from piflow.analysis.early_errors import BOUNDARY, FUNCTION_FRAMES, HOLE, EarlyErrors, Scope, has_optional_chain
from piflow.analysis.expressions import (
    ArrayExpr,
    Expr,
    IdentifierExpr,
    LiteralExpr,
    ObjectExpr,
    PropertyExpr,
    SpreadExpr,
    static_string,
)
from piflow.analysis.facts import (
    AsyncFunction,
    CallFact,
    Execution,
    NameUse,
    Placed,
    StatementFacts,
    StructureScope,
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
)

_INTERNAL: Final = frozenset(INTERNAL_NAMES.values())
DIRECT_ONLY: Final = ("withWorktree", "conversation")
_STRICT_RESERVED: Final = frozenset(
    {"implements", "interface", "let", "package", "private", "protected", "public", "static", "yield"}
)
_WATCHED: Final = _INTERNAL | frozenset(DIRECT_ONLY) | _STRICT_RESERVED | {"await"}
_WATCHED_BYTES: Final = frozenset(name.encode() for name in _WATCHED)
_PRIMITIVE_SET: Final = frozenset(PRIMITIVES)
_PRIMITIVE_BYTES: Final = frozenset(name.encode() for name in PRIMITIVES)
_PLAIN_CALLEE: Final = K.IDENTIFIER
_MEMBER: Final = K.MEMBER
_TEMPLATE: Final = K.TEMPLATE
_ARGUMENTS_KIND: Final = K.ARGUMENTS
_PLAIN_ARGUMENTS: Final = re.compile(
    rb"\((?:[\s,:{}\[\]]|\"[^\"\\\n\r]*+\"|'[^'\\\n\r]*+'|(?!(?:%b)(?![\w$]))[A-Za-z_$][\w$]*+|[1-9][0-9]*+|0(?![0-9]))*+\)"
    % b"|".join(sorted(name.encode() for name in _WATCHED | {"class", "function", "delete"}))
)
"""Arguments made only of punctuation, whitespace, escape-free strings, decimal integers and names
(neither watched nor a keyword starting a class, function or `delete`), read token by token (no
backtracking): walking them finds nothing, unless a `__proto__` key or an empty argument needs a
check (`_markers`)."""
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


_ALL_MARKERS: Final = 255


def _markers(data: bytes, start: int, end: int, possible: int = _ALL_MARKERS) -> int:
    """The markers (above) found in `data[start:end]`: each is a necessary condition of a check.

    Searched with the whitespace removed, which can only add matches (`_HOLE` without comments is
    `(,` or `,,` then). `possible`: the markers the whole text has (no other can be found).
    """
    if not possible:
        return 0
    tokens = data[start:end].translate(None, _WHITESPACE)
    find = tokens.find
    found = 0
    if possible & _BACKSLASH and find(b"\\") >= 0:
        found |= _BACKSLASH
    if possible & _PROTO and find(b"__proto__") >= 0:
        found |= _PROTO
    if possible & _HASH and find(b"#") >= 0:
        found |= _HASH
    if possible & _POWER and find(b"**") >= 0:
        found |= _POWER
    if possible & _DELETE and find(b"delete") >= 0:
        found |= _DELETE
    if possible & _REST_MARK and find(b"...") >= 0:
        found |= _REST_MARK
    if possible & _HTML_COMMENT_MARK and (find(b"<!--") >= 0 or find(b"-->") >= 0):
        found |= _HTML_COMMENT_MARK
    if possible & _HOLE_MARK and (
        find(b",,") >= 0 or find(b"(,") >= 0 or (find(b"/*") >= 0 and HOLE.search(data, start, end))
    ):
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
    """How the statement's code is parsed by the dialect's reference, and the dialect's own facts.

    `strict`: strict-mode code. `module`: the top level is an ES module's (functions declared at
    the top level are lexical; `import`/`export` are module syntax the body compile rejects).
    `dialect_facts`: what gathers the facts only this dialect's rules use (None: nothing more).
    """

    strict: bool = True
    module: bool = True
    dialect_facts: type[DialectFacts] | None = None


class DialectFacts:
    """Facts one dialect's rules use, gathered while the shared walk visits a statement.

    The walker makes one per statement, hands it every call that is no workflow primitive, and
    keeps what `finish` returns as `StatementFacts.dialect` (spans relative to the statement).
    """

    def __init__(self, data: bytes, base: int) -> None:
        self.data = data
        self.base = base

    def call(self, node: Node, start: int, callee: Node, arguments: Node) -> None:
        """A call (`start`, `callee`, `arguments` as `calls.direct_call` sees them)."""

    def finish(self, statement: Node | None) -> tuple[object, ...]:
        """The facts gathered; `statement`: the top-level statement walked, None when what was walked
        is a piece of one that does not begin it (`StatementWalker.walk_pieces`)."""
        return ()


_Table = list[Callable[[Node], bool] | None]


@dataclass(frozen=True, slots=True)
class Piece:
    """A statement of a block walked alone (`StatementWalker.walk_pieces`): its facts (None when it
    has syntax issues: their recovery may look past it, so it is walked with its surroundings) and
    the names it declares in the scopes around it."""

    facts: StatementFacts | None
    declares: tuple[tuple[int, frozenset[str], frozenset[str], frozenset[str], frozenset[str]], ...]
    """(scope depth, lexical, vars, functions, all three)"""


PieceKey = tuple[int, bytes, tuple[object, ...]]
"""A piece's kind, text and context (`StatementWalker._context`)."""
Pieces = dict[PieceKey, Piece]
_NOTHING: Final = StatementFacts()


@dataclass(slots=True)
class _Cutting:
    """The statement `walk_pieces` walks, its pieces so far, and where it finds and keeps them."""

    statement: Node
    reuse: Pieces
    fresh: Pieces
    placed: list[Placed[StatementFacts]]
    first: bool = True  # (nothing placed yet: the first part is the statement's beginning)


class StatementWalker(EarlyErrors):
    """Collects `StatementFacts` for one top-level statement (spans relative to its start)."""

    _pieces: _Cutting | None = None
    """What `walk_pieces` is walking: a class default, so that a walker that never walks pieces keeps
    29 attributes (with a 30th, CPython 3.11 stops sharing the walker's attribute keys, and reading
    any attribute costs more: 3 % of the walk)."""

    def __init__(self, data: bytes, config: WalkConfig) -> None:
        self.data = data
        self.config = config
        self.base = 0
        self._handlers: dict[int, Callable[[Node], bool]] = {}
        self._gated: list[tuple[frozenset[int], Callable[[Node], bool], int, bool]] = []
        self._tables: dict[tuple[int, bool], _Table] = {}
        self._possible: int | None = None  # the whole text's markers, once a statement is walked
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

    def _table(self, markers: int, cut: bool = False) -> _Table:
        """The handler of each node kind (by id) for a statement with these markers (`cut`: whose
        blocks cut their statements out, for `walk_pieces`), built once per combination: None (no
        handler: descend), `_name` (identifiers, checked in `_walk`), `_leaf` (do not descend) or a
        handler saying whether to descend."""
        key = (markers, cut)
        table = self._tables.get(key)
        if table is None:
            handlers = dict(self._handlers)
            for kinds, handler, gate, leaf in self._gated:
                if markers & gate:
                    handlers.update(dict.fromkeys(kinds, handler))
                elif leaf:
                    handlers.update(dict.fromkeys(kinds, _leaf))
            handlers.update(dict.fromkeys(_NAME_KINDS, _name))
            if cut:
                handlers.update(dict.fromkeys(K.STATEMENT_BLOCK, self._statement_block))
            table = self._tables[key] = [handlers.get(kind) for kind in range(LANGUAGE.node_kind_count)]
        return table

    # -- entry point -------------------------------------------------------------------------------

    def walk(self, statement: Node) -> StatementFacts:
        """The facts of a top-level statement."""
        self._begin(statement)
        self._walk((statement,))
        return self._collected(statement)

    def walk_pieces(self, statement: Node, reuse: Pieces, fresh: Pieces) -> list[Placed[StatementFacts]]:
        """The facts of a top-level statement (one with errors, or a large one) in pieces, in source
        order: each statement of its blocks that walks alone as it does in place is a piece of its
        own (taken from `reuse` when its text and context are unchanged; every piece met is put in
        `fresh`), and the rest of the statement the pieces in between. A missing `}` makes the rest
        of the file one statement, and a script wrapped in one `try` is one: typing in it walks only
        the statement typed in."""
        cutting = self._pieces = _Cutting(statement, reuse, fresh, [])
        try:
            self._begin(statement, pieces=True)
            self._walk((statement,))
            self._cut()
        finally:
            self._pieces = None
        return cutting.placed

    def _begin(self, statement: Node, pieces: bool = False) -> None:
        """Start the walk of a top-level statement."""
        self._begin_errors()
        self._execution: Execution = "sequential"
        self._structure: tuple[StructureScope, ...] = ()
        self._exits: list[tuple[int, Callable[[], None]]] = []
        self._depth = 0
        self._enter(statement, pieces)

    def _enter(self, statement: Node, pieces: bool = False) -> None:
        """Collect the facts of `statement` from here on (spans relative to its start). `pieces`: for
        `walk_pieces`, with the whole text's markers (searching the statement's text would cost a
        keystroke more than the checks they spare in what is left of it between its pieces)."""
        self.base = statement.start_byte
        self._end = statement.end_byte
        self._has_error = statement.has_error
        possible = self._possible
        if possible is None:  # (a statement's markers are among its text's: most texts have few)
            possible = self._possible = _markers(self.data, 0, len(self.data))
        if pieces:
            self._markers = possible
            self._dispatch = self._table(possible, cut=True)
        else:
            self._markers = markers = _markers(self.data, self.base, self._end, possible)
            self._dispatch = self._table(markers)
        self._calls: list[CallFact] = []
        self._reserved: list[NameUse] = []
        self._indirect: list[NameUse] = []
        self._syntax = []
        self._declarations = []
        self._regexes = []
        self._async: list[AsyncFunction] = []
        self._returns: list[TopLevelReturn] = []
        gatherer = self.config.dialect_facts
        self._dialect = None if gatherer is None else gatherer(self.data, self.base)

    def _collected(self, statement: Node | None) -> StatementFacts:
        """The facts collected since `_enter` (`statement`: as `DialectFacts.finish` takes it)."""
        dialect = () if self._dialect is None else self._dialect.finish(statement)
        return StatementFacts(
            tuple(sorted(self._calls, key=_START)),
            tuple(self._reserved),
            tuple(self._indirect),
            tuple(self._syntax),
            tuple(self._declarations),
            tuple(self._regexes),
            tuple(self._async),
            tuple(self._returns),
            dialect,
        )

    # -- pieces (`walk_pieces`) ---------------------------------------------------------------------

    def _statement_block(self, node: Node) -> bool:
        """A block's scope, and its statements one by one, each a piece when it can be."""
        self._block(node)
        pending: list[Node] = []  # walked in place, together
        for child in node.children if self._has_error and node.has_error else node.named_children:
            if child.is_named and not child.has_error and child.kind_id not in K.COMMENT:
                if pending:
                    self._walk(pending)
                    pending = []
                if self._piece(child):
                    continue
            pending.append(child)
        if pending:
            self._walk(pending)
        return False

    def _context(self) -> tuple[object, ...]:
        """What the walk of a statement depends on besides its text: the functions, jump targets,
        classes and workflow structure around it, and the kinds of its enclosing scopes (the names
        declared in them are checked by `_piece`)."""
        return (
            tuple(self._functions),
            tuple(self._jumps),
            tuple(self._classes),
            self._execution,
            self._structure,
            tuple([(scope.var_scope, scope.function_scope, scope.simple_catch) for scope in self._scopes]),
        )

    def _piece(self, statement: Node) -> bool:
        """Place `statement` (in a block, without errors) as a piece, unless it has syntax issues or
        declares a name its enclosing scopes already hold (walked alone, with those scopes empty,
        it could then differ from its walk in place: the caller walks it in place)."""
        cutting = self._pieces
        assert cutting is not None
        key = (statement.kind_id, self.data[statement.start_byte : statement.end_byte], self._context())
        piece = cutting.fresh.get(key) or cutting.reuse.get(key) or self._alone(statement)
        cutting.fresh[key] = piece
        if piece.facts is None:
            return False
        scopes = self._scopes
        for depth, _, _, _, names in piece.declares:
            scope, disjoint = scopes[depth], names.isdisjoint
            if not (disjoint(scope.lexical) and disjoint(scope.vars) and disjoint(scope.functions)):
                return False
        for depth, lexical, variables, functions, _ in piece.declares:
            scope = scopes[depth]
            scope.lexical |= lexical
            scope.vars |= variables
            scope.functions |= functions
        if piece.facts is not _NOTHING:  # (a statement without facts needs no place)
            self._cut()
            cutting.placed.append(Placed(statement.start_byte, piece.facts))
        return True

    def _alone(self, statement: Node) -> Piece:
        """Walk `statement` on its own, in the current context with every enclosing scope emptied."""
        outer = (self.base, self._end, self._has_error, self._markers, self._dispatch, self._scopes, self._pieces)
        facts = (self._calls, self._reserved, self._indirect, self._syntax, self._declarations, self._regexes)
        more = (self._async, self._returns, self._dialect)
        scopes = self._scopes = [Scope(scope.var_scope, scope.function_scope, scope.simple_catch) for scope in outer[5]]
        self._pieces = None
        self._enter(statement)
        self._walk((statement,))
        found = self._collected(None)
        self.base, self._end, self._has_error, self._markers, self._dispatch, self._scopes, self._pieces = outer
        self._calls, self._reserved, self._indirect, self._syntax, self._declarations, self._regexes = facts
        self._async, self._returns, self._dialect = more
        declares = tuple(
            (depth, frozenset(scope.lexical), frozenset(scope.vars), frozenset(scope.functions), names)
            for depth, scope in enumerate(scopes)
            if (names := frozenset(scope.lexical | scope.vars | scope.functions))
        )
        return Piece(None if found.syntax else _NOTHING if found == _NOTHING else found, declares)

    def _cut(self) -> None:
        """Place what the top-level statement collected since its last piece (if anything)."""
        cutting = self._pieces
        assert cutting is not None
        lists = (self._calls, self._reserved, self._indirect, self._syntax, self._declarations, self._regexes)
        if self._dialect is None and not any(lists) and not (self._async or self._returns):
            return
        facts = self._collected(cutting.statement if cutting.first else None)
        cutting.first = False
        if facts != _NOTHING:
            cutting.placed.append(Placed(self.base, facts))
        self._enter(cutting.statement, pieces=True)

    def _walk(self, roots: Iterable[Node]) -> None:
        """Depth-first over each of `roots` in turn; handlers may defer an action to a node's exit.

        A stack of child iterators over named children only: anonymous tokens (half the nodes)
        have no handler, except MISSING tokens, so the children of a node with an error are all
        visited. A deferred action runs before the next node outside its subtree (nothing runs in
        between), or when the walk ends.
        """
        saved_exits, saved_depth = self._exits, self._depth
        exits: list[tuple[int, Callable[[], None]]] = []
        self._exits = exits
        table = self._dispatch
        has_error = self._has_error
        escapes = self._markers & _BACKSLASH
        watched = _WATCHED_BYTES
        data = self.data
        stack: list[Iterator[Node]] = [iter(roots)]
        exit_depth = -1  # the depth of the innermost deferred action (-1: none)
        while stack:
            depth = len(stack) - 1
            for node in stack[-1]:
                while depth <= exit_depth:
                    exits.pop()[1]()
                    exit_depth = exits[-1][0] if exits else -1
                if has_error and (node.is_missing or node.is_error):  # (ERROR's id is past the table)
                    self._error(node)
                    continue
                handler = table[node.kind_id]
                if handler is _name:  # most identifiers are of no interest: decide without a call
                    start, end = node.start_byte, node.end_byte
                    if data[start:end] in watched or (escapes and data.find(b"\\", start, end) >= 0):
                        self._identifier(node)
                    continue
                if handler is not None:
                    if handler is _leaf:
                        continue
                    self._depth = depth
                    descend = handler(node)
                    if exits:
                        exit_depth = exits[-1][0]
                    if not descend:
                        continue
                children = node.children if has_error and node.has_error else node.named_children
                if children:
                    stack.append(iter(children))
                    break
            else:
                stack.pop()
        while exits:
            exits.pop()[1]()
        self._exits, self._depth = saved_exits, saved_depth

    # -- workflow calls ----------------------------------------------------------------------------

    def _call(self, node: Node) -> bool:
        parts = node.children
        if len(parts) == 2 and not self._has_error:  # `callee(...)` or a tagged template, no comment:
            callee_part, arguments_part = parts  # `calls.direct_call`'s answer without asking for fields
            kind = callee_part.kind_id
            if kind in _PLAIN_CALLEE:
                raw = self.data[callee_part.start_byte : callee_part.end_byte]
                if raw.find(b"\\") < 0:
                    if arguments_part.kind_id not in _ARGUMENTS_KIND:  # a tagged template: no `?.` in its tag
                        return True
                    if raw in _PRIMITIVE_BYTES:
                        self._primitive(node, node.start_byte, callee_part, arguments_part, raw.decode())
                        return False
                    if self._dialect is not None:
                        self._dialect.call(node, node.start_byte, callee_part, arguments_part)
                        return True
                    return not (  # `log("...")`, `prompt("...", { area: "ui" })`: nothing to walk
                        not self._markers & (_HOLE_MARK | _PROTO)
                        and raw not in _WATCHED_BYTES
                        and _PLAIN_ARGUMENTS.fullmatch(self.data, arguments_part.start_byte, arguments_part.end_byte)
                    )
            elif kind in _MEMBER and self._dialect is None and arguments_part.kind_id not in _TEMPLATE:
                return True
        call = direct_call(node)
        if call is None:  # a tagged template
            arguments = node.child_by_field_id(F.ARGUMENTS)
            function = node.child_by_field_id(F.FUNCTION)
            if (
                arguments is not None
                and function is not None
                and arguments.kind_id in K.TEMPLATE
                and has_optional_chain(function)
            ):
                self._issue(
                    arguments.start_byte,
                    arguments.end_byte,
                    "Optional chaining cannot appear in the tag of tagged template expressions",
                )
            return True
        start, callee, arguments = call
        name = callee_name(callee, self.data)
        if name is not None and name in _PRIMITIVE_SET:
            if start != node.start_byte:  # `await (agent)(...)`: the `await` is not walked below
                function = node.child_by_field_id(F.FUNCTION)
                keyword = function.child_by_field_id(F.FUNCTION) if function is not None else None
                if keyword is not None:
                    self._identifier(keyword)
            self._primitive(node, start, callee, arguments, name)
            return False
        if self._dialect is not None:
            self._dialect.call(node, start, callee, arguments)
        return True

    def _primitive(self, node: Node, start: int, callee: Node, arguments: Node, kind: str) -> None:
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
                start - base,
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
        walked: list[Node] = []  # walked together (one `_walk`), up to the record
        for index, item in enumerate(items):
            if index == record_index:
                if walked:
                    self._walk(walked)
                    walked = []
                if not item.is_error:
                    name = static_string(args[0]) if args else None
                    scope = StructureScope("parallel" if kind == "parallel" else "pipeline", name, None)
                    outer_execution = self._execution
                    self._execution, self._structure = execution, (*outer, scope)
                    self._walk((item,))
                    self._execution, self._structure = outer_execution, outer
            elif not (skip_inert and self._inert(args[index])) and not item.is_error:
                walked.append(item)
        if walked:
            self._walk(walked)

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

    # -- identifiers, returns and functions --------------------------------------------------------

    def _identifier(self, node: Node) -> bool:
        name = identifier_name(node_text(self.data, node))
        if name not in _WATCHED:
            return False
        start, end = self._rel(node.start_byte), self._rel(node.end_byte)
        if name in _INTERNAL:
            self._reserved.append(NameUse(name, start, end))
        elif name in DIRECT_ONLY:
            if call_of_callee(node) is None and not _is_property_key(node):
                self._indirect.append(NameUse(name, start, end))
        elif node.kind_id not in K.PROPERTY_IDENTIFIER and node.kind_id not in K.LABEL:
            if name == "await":
                if self.config.module and not self._in_async():
                    self._issue_at(node, "Cannot use keyword 'await' outside an async function")
            else:
                self._issue_at(node, f"The keyword '{name}' is reserved", strict_only=True)
        return False

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

    def _function(self, node: Node) -> bool:
        kind = node.kind_id
        arrow = kind in K.ARROW
        if arrow and not self.data.startswith(b"async", node.start_byte):  # (an arrow begins at its first token)
            asynchronous = generator = False
        else:
            asynchronous, generator = function_flags(node)
        if kind in K.FUNCTION_DECLARATION:
            name = node.child_by_field_id(F.NAME)
            if name is not None:
                self._declare_function(name, asynchronous or generator)
        if kind in K.METHOD and node.parent is not None and node.parent.kind_id in K.OBJECT:
            self._property(node)
        if asynchronous:
            self._async.append(AsyncFunction(self._rel(node.start_byte), self._rel(node.end_byte)))
        self._functions.append(FUNCTION_FRAMES[arrow, asynchronous, generator])
        self._jumps.append(BOUNDARY)
        self._scopes.append(Scope(True, True))
        saved_classes = self._classes

        def leave() -> None:
            self._functions.pop()
            self._jumps.pop()
            self._scopes.pop()
            self._classes = saved_classes

        self._defer(leave)
        parts = node.children if arrow and not self._has_error else ()
        if len(parts) == 3:  # `parameters => body` (no `async`, no comment): no fields to ask for
            parameters: Node | None = parts[0]
            body: Node | None = parts[2]
        else:
            parameters = node.child_by_field_id(F.PARAMETERS)
            if parameters is None:
                parameters = node.child_by_field_id(F.PARAMETER)
            body = node.child_by_field_id(F.BODY)
        self._parameters(parameters, arrow or kind in K.METHOD)
        if body is not None and body.kind_id in K.STATEMENT_BLOCK:
            self._shared_scope_bodies.add(body.id)
        return True


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
