"""The early syntax errors of a statement: what acorn (strict module code) or the body compile rejects
and tree-sitter accepts, worded as the reference's parsers word them.

A practical subset of JavaScript's early errors (redeclarations, strict-mode restrictions, `await`
and `yield` outside their functions, misplaced `break`/`continue`, bad escapes and regex flags...)
and acorn-like messages for tree-sitter's own ERROR and MISSING nodes, so the editor sees them while
typing. The engine compile (`engine_check`) remains the authority before a run. `EarlyErrors` is
the part of the statement walk (`walker.StatementWalker`) that finds them: its handlers run from the
walker's dispatch table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from tree_sitter import Node

from piflow.analysis.facts import Declaration, RegexLiteral, SyntaxIssue
from piflow.analysis.jsliterals import identifier_name
from piflow.analysis.syntax import F, K, named_items, node_text, property_key, unwrap_parens

if TYPE_CHECKING:
    from piflow.analysis.walker import WalkConfig

_OCTAL_ESCAPE: Final = re.compile(rb"\\(?:(0[0-9]|[1-7])|([89]))|\\.", re.DOTALL)
_REGEX_FLAGS: Final = frozenset("dgimsuyv")
HOLE: Final = re.compile(rb"[(,]\s*(?:/\*.*?\*/\s*)*,", re.DOTALL)
"""An empty argument, `f(a,,b)` (comments allowed between)."""
_ZERO: Final = ord("0")


@dataclass(slots=True)
class Scope:
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


FUNCTION_FRAMES: Final = {
    (arrow, asynchronous, generator): _Function(arrow, asynchronous, generator)
    for arrow in (False, True)
    for asynchronous in (False, True)
    for generator in (False, True)
}
_STATIC_BLOCK: Final = _Function(False, False, False, static_block=True)
BOUNDARY: Final = _Jump("boundary")
_LOOP: Final = _Jump("loop")
_SWITCH: Final = _Jump("switch")


class EarlyErrors:
    """The early-error half of the statement walk: the handlers, scopes and frames it needs.

    State is per statement (`_begin_errors`); spans are relative to the statement's start (`base`).
    """

    data: bytes
    config: WalkConfig
    base: int
    _end: int
    _markers: int
    _syntax: list[SyntaxIssue]
    _declarations: list[Declaration]
    _regexes: list[RegexLiteral]
    _scopes: list[Scope]
    _functions: list[_Function]
    _jumps: list[_Jump]
    _classes: list[frozenset[str]]
    _shared_scope_bodies: set[int]
    _exits: list[tuple[int, Callable[[], None]]]
    _depth: int
    _has_error: bool

    def _begin_errors(self) -> None:
        self._syntax = []
        self._declarations = []
        self._regexes = []
        self._scopes = []
        self._functions = []
        self._jumps = []
        self._classes = []
        self._shared_scope_bodies = set()

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

    def _defer(self, action: Callable[[], None]) -> None:
        """Run `action` when the subtree of the node being handled has been walked."""
        self._exits.append((self._depth, action))

    def _legacy_octal(self, start: int, end: int) -> bool:
        """Whether the number token at this statement-relative span is one `_number` reports."""
        offset = self.base + start
        data = self.data
        return end - start > 1 and data[offset] == _ZERO and data[offset + 1 : offset + 2].isdigit()

    def _member(self, node: Node) -> bool:
        prop = node.child_by_field_id(F.PROPERTY)
        if prop is not None and prop.kind_id in K.PRIVATE_NAME:
            self._check_private(prop)
        return True

    def _check_private(self, node: Node) -> None:
        name = node_text(self.data, node)
        if not any(name in declared for declared in self._classes):
            self._issue_at(node, f"Private field '{name}' must be declared in an enclosing class")

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
        if inner.kind_id in K.MEMBER and has_optional_chain(inner):
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
            self._push_scope(Scope(var_scope=False, function_scope=False))
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

    def _parameters(self, params: Node | None, never_duplicates: bool) -> None:
        """Check a function's parameters (its `parameters` or `parameter` field) and bind them."""
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
        self._jumps.append(BOUNDARY)
        self._scopes.append(Scope(var_scope=True, function_scope=False))

        def leave() -> None:
            self._functions.pop()
            self._jumps.pop()
            self._scopes.pop()

        self._defer(leave)
        return True

    def _push_scope(self, scope: Scope) -> None:
        self._scopes.append(scope)

        def leave() -> None:
            self._scopes.pop()

        self._defer(leave)

    def _block(self, node: Node) -> bool:
        if node.id not in self._shared_scope_bodies:
            self._push_scope(Scope(False, False))
        return True

    def _catch(self, node: Node) -> bool:
        param = node.child_by_field_id(F.PARAMETER)
        body = node.child_by_field_id(F.BODY)
        simple = param is not None and param.kind_id in K.IDENTIFIER
        scope = Scope(
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
            parts = () if self._has_error else declarator.children
            if len(parts) == 3 or len(parts) == 1:  # `name = value` or `name` (no comment, no error)
                name: Node | None = parts[0]
                initialized = len(parts) == 3
            else:
                name = declarator.child_by_field_id(F.NAME)
                initialized = declarator.child_by_field_id(F.VALUE) is not None
            if name is None:
                continue
            for name_node in _pattern_names(name):
                bound = self._name(name_node)
                if bound == "let":
                    self._issue_at(name_node, "let is disallowed as a lexically bound name")
                self._declare(name_node, "lexical", bound)
            if not initialized and not node.has_error and not _in_for_head(node):
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

    def _arguments(self, node: Node) -> bool:
        if not HOLE.search(self.data, node.start_byte, node.end_byte):
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


# -- tree helpers ----------------------------------------------------------------------------------


def _in_for_head(node: Node) -> bool:
    parent = node.parent
    return parent is not None and parent.kind_id in K.FOR


def has_optional_chain(node: Node) -> bool:
    """Whether a member/call chain (not crossing parentheses) contains `?.`."""
    current: Node | None = node
    while current is not None and (current.kind_id in K.MEMBER or current.kind_id in K.CALL):
        if any(child.kind_id in K.OPTIONAL_CHAIN for child in current.children):
            return True
        current = current.child_by_field_id(F.OBJECT) or current.child_by_field_id(F.FUNCTION)
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


_ATOMIC: Final = K.STRING | K.NUMBER | K.REGEX | K.TEMPLATE


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
