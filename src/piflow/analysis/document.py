"""A script being analysed: its text, its parse tree (re-parsed incrementally), header and facts.

The language server keeps one `ScriptDocument` per open file and calls `apply_change` on every
edit: tree-sitter re-parses only what changed, and the facts of every top-level statement whose
text did not change are reused (they are position-independent), so re-analysis after a keystroke
costs one statement's walk plus the rules. A top-level statement with errors, or a large one, is
walked in pieces: the statements of its blocks that walk alone as in place are reused as well (a
missing `}` makes the rest of the file one statement with errors; a script wrapped in one `try` or
`async function main` is one large statement, reused whole while its text is unchanged). A document
nobody types in can `release` its tree and facts (the server does for all but the last few it used);
they are rebuilt when next needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final, TypeVar

from tree_sitter import Node, Parser, Point, Tree

from piflow.analysis.facts import (
    CallFact,
    Declaration,
    NameUse,
    Placed,
    StatementFacts,
    SyntaxIssue,
)
from piflow.analysis.jsliterals import JS_WHITESPACE
from piflow.analysis.positions import TextIndex
from piflow.analysis.syntax import F, K, named_items, new_parser, node_text
from piflow.analysis.walker import Pieces, StatementWalker, WalkConfig

T = TypeVar("T")

_CACHE_LIMIT: Final = 20_000
_PIECES_FROM: Final = 4096
"""The size in bytes from which a clean top-level statement is walked in pieces (`facts`). Its walk
whole costs about 0.2 ms per kB; in pieces, once its pieces are known, a keystroke in it walks one
of them, but its first walk costs more (up to half as much again; a script wrapped in one `try`:
+16 % facts walk, +10 % full analysis). Below 4 kB (a hundred lines; a typical script's statements
are under 1 kB) the keystroke would save under 1 ms of a 10 ms budget."""
_Large = tuple[list[Placed[StatementFacts]], Pieces]
"""A large clean statement's facts (its pieces, based at its start) and the pieces it was cut into."""
_PARSERS: Final[list[Parser]] = []
"""Idle parsers, shared by all documents: a parser is used by one thread at a time, and keeping one
per open document cost ~50 kB each. (`list.pop`/`append` are atomic under the GIL.)"""


def parse_script(data: bytes, old: Tree | None = None) -> Tree:
    """Parse with an idle parser (incrementally, given the edited `old` tree)."""
    try:
        parser = _PARSERS.pop()
    except IndexError:  # (not tested first: another thread may take the last one in between)
        parser = new_parser()
    try:
        return parser.parse(data) if old is None else parser.parse(data, old)
    finally:
        _PARSERS.append(parser)


@dataclass(frozen=True, slots=True)
class Header:
    """The `export const|let|var meta = ...` first statement that pi strips (spec A.1)."""

    start: int
    end: int
    body_start: int
    value: Node | None


class ScriptDocument:
    """Text + tree + statement-fact cache for one script."""

    def __init__(self, text: str, *, uri: str | None = None, version: int | None = None) -> None:
        self.uri = uri
        self.version = version
        self._cache: dict[tuple[int, bytes], StatementFacts] = {}
        self._pieces: Pieces = {}
        self._large: dict[tuple[int, bytes], _Large] = {}
        self._cache_config: WalkConfig | None = None
        self.rule_memo: Any = None
        """What the rules keep about the cached facts' calls (`rules.RuleMemo`), released with them."""
        self._set(text, parse_script(text.encode("utf-8", "surrogatepass")))

    def _set(self, text: str, tree: Tree, data: bytes | None = None) -> None:
        self.text = text
        self.index = TextIndex(text, data)
        self._tree: Tree | None = tree
        self._root_node: Node | None = tree.root_node  # one node object, so its children are listed once
        self.__dict__.pop("header", None)

    @property
    def data(self) -> bytes:
        return self.index.data

    @property
    def tree(self) -> Tree:
        """The parse tree (parsed again if `release` let it go)."""
        tree = self._tree
        if tree is None:
            tree = self._tree = parse_script(self.index.data)
        return tree

    @property
    def _root(self) -> Node:
        if self._root_node is None:
            self._root_node = self.tree.root_node
        return self._root_node

    def release(self) -> None:
        """Let go of what only the next edit or feature needs, for a document nobody is typing in:
        the tree (three quarters of an idle document's memory, parsed again when asked for) and the
        statement facts (its next analysis walks every statement afresh)."""
        self._cache, self._pieces, self._large, self._cache_config, self.rule_memo = {}, {}, {}, None, None
        self._tree = self._root_node = None
        self.__dict__.pop("header", None)  # (its node holds the tree)

    # -- edits -------------------------------------------------------------------------------------

    def replace(self, text: str, version: int | None = None) -> None:
        """Replace the whole text (a full re-parse)."""
        self.version = version
        self._set(text, parse_script(text.encode("utf-8", "surrogatepass")))

    def apply_change(
        self,
        start_line: int,
        start_character: int,
        end_line: int,
        end_character: int,
        new_text: str,
        version: int | None = None,
    ) -> None:
        """Apply an LSP incremental change (positions in UTF-16 code units) and re-parse incrementally."""
        old = self.index
        start = old.offset_at(start_line, start_character)
        end = max(start, old.offset_at(end_line, end_character))
        inserted = new_text.encode("utf-8", "surrogatepass")
        data = old.data[:start] + inserted + old.data[end:]
        previous = self._tree
        if previous is None:  # released: a full parse
            tree = parse_script(data)
        else:
            previous.edit(
                start_byte=start,
                old_end_byte=end,
                new_end_byte=start + len(inserted),
                start_point=_point(old.data, start),
                old_end_point=_point(old.data, end),
                new_end_point=_point(data, start + len(inserted)),
            )
            tree = parse_script(data, previous)
        self.version = version
        self._set(data.decode("utf-8", "surrogatepass"), tree, data)

    # -- structure ---------------------------------------------------------------------------------

    @cached_property
    def header(self) -> Header | None:
        """The meta header, if the first statement is one."""
        first = next(self._top_level(), None)
        if first is None or first.kind_id not in K.EXPORT_STATEMENT:
            return None
        declaration = first.child_by_field_id(F.DECLARATION)
        if declaration is None or not (
            declaration.kind_id in K.LEXICAL_DECLARATION or declaration.kind_id in K.VARIABLE_DECLARATION
        ):
            return None
        declarators = [item for item in named_items(declaration) if item.kind_id in K.DECLARATOR]
        name = declarators[0].child_by_field_id(F.NAME) if declarators else None
        if name is None or name.kind_id not in K.IDENTIFIER or node_text(self.data, name) != "meta":
            return None
        end_char = self.index.byte_to_char(first.end_byte)
        rest = self.text[end_char:]
        body_char = end_char + len(rest) - len(rest.lstrip(JS_WHITESPACE))
        return Header(
            first.start_byte,
            first.end_byte,
            self.index.char_to_byte(body_char),
            declarators[0].child_by_field_id(F.VALUE),
        )

    @property
    def body_start(self) -> int:
        """Byte offset where the body (the script pi runs) starts."""
        header = self.header
        return header.body_start if header is not None else 0

    def body_offset(self, offset: int) -> int:
        """UTF-16 offset into the body of a document byte offset (inspect's offsets)."""
        return self.index.byte_to_utf16(offset) - self.index.byte_to_utf16(self.body_start)

    @property
    def body_text(self) -> str:
        return self.text[self.index.byte_to_char(self.body_start) :]

    def _top_level(self) -> Iterator[Node]:
        root = self._root
        if root.is_error:  # nothing parsed: the whole text is one error
            yield root
            return
        for child in root.children:
            if child.kind_id in K.COMMENT or child.kind_id in K.HASH_BANG:
                continue
            yield child

    def statements(self) -> Iterator[Node]:
        """The body's top-level statements (the header excluded)."""
        header = self.header
        for child in self._top_level():
            if header is not None and child.start_byte == header.start:
                continue
            yield child

    def hash_bang(self) -> Node | None:
        """A `#!` line in the body (acorn accepts it at the start of a file; the body compile does not)."""
        for child in self._root.children:
            if child.kind_id in K.HASH_BANG and child.start_byte >= self.body_start:
                return child
        return None

    # -- facts -------------------------------------------------------------------------------------

    def facts(self, config: WalkConfig) -> DocumentFacts:
        """The facts of every body statement, reusing those of statements whose text is unchanged."""
        walker: StatementWalker | None = None
        same = self._cache_config == config
        cache, pieces, large = (self._cache, self._pieces, self._large) if same else ({}, {}, {})
        fresh: dict[tuple[int, bytes], StatementFacts] = {}
        fresh_pieces: Pieces = {}
        fresh_large: dict[tuple[int, bytes], _Large] = {}
        placed: list[Placed[StatementFacts]] = []
        data = self.data
        for statement in self.statements():
            if statement.has_error:  # walked afresh (its recovery and messages depend on context), in pieces
                walker = walker or StatementWalker(data, config)
                placed.extend(walker.walk_pieces(statement, pieces, fresh_pieces))
                continue
            start = statement.start_byte
            key = (statement.kind_id, data[start : statement.end_byte])
            if len(key[1]) >= _PIECES_FROM:  # typed in: walked in pieces, reused whole while unchanged
                found = large.get(key) or fresh_large.get(key)
                if found is None:
                    walker = walker or StatementWalker(data, config)
                    cut: Pieces = {}
                    parts = walker.walk_pieces(statement, pieces, cut)
                    found = ([Placed(part.base - start, part.fact) for part in parts], cut)
                fresh_large[key] = found
                fresh_pieces.update(found[1])
                placed.extend(Placed(start + part.base, part.fact) for part in found[0])
                continue
            facts = cache.get(key) or fresh.get(key)
            if facts is None:
                walker = walker or StatementWalker(data, config)
                facts = walker.walk(statement)
            fresh[key] = facts
            placed.append(Placed(start, facts))
        if len(fresh) + len(fresh_pieces) + len(fresh_large) < _CACHE_LIMIT:
            self._cache, self._pieces, self._large, self._cache_config = fresh, fresh_pieces, fresh_large, config
        return DocumentFacts(placed, config)


def _point(data: bytes, offset: int) -> Point:
    """tree-sitter's `(row, byte column)`; rows break at `\\n` only."""
    row = data.count(b"\n", 0, offset)
    return Point(row, offset - (data.rfind(b"\n", 0, offset) + 1))


class DocumentFacts:
    """The placed facts of a document, with the few views that need all statements at once.

    One item per top-level statement, or several in source order for one with errors or a large one
    (its pieces)."""

    def __init__(self, statements: list[Placed[StatementFacts]], config: WalkConfig) -> None:
        self.statements = statements
        self.config = config
        self._dialect: dict[type, list[Placed[Any]]] = {}

    @cached_property
    def calls(self) -> list[Placed[CallFact]]:
        """Workflow primitive calls in start order."""
        return [Placed(item.base, call) for item in self.statements for call in item.fact.calls]

    def dialect(self, kind: type[T]) -> list[Placed[T]]:
        """The dialect's own facts of one kind (`StatementFacts.dialect`), in source order."""
        found = self._dialect.get(kind)
        if found is None:
            found = [
                Placed(item.base, fact)
                for item in self.statements
                for fact in item.fact.dialect
                if isinstance(fact, kind)
            ]
            self._dialect[kind] = found
        return found

    def names(self, attribute: str) -> list[Placed[NameUse]]:
        return [Placed(item.base, use) for item in self.statements for use in getattr(item.fact, attribute)]

    @cached_property
    def syntax(self) -> list[Placed[SyntaxIssue]]:
        """Syntax issues of every statement plus redeclarations across top-level statements."""
        issues = [Placed(item.base, issue) for item in self.statements for issue in item.fact.syntax]
        issues.extend(self._top_level_redeclarations())
        return issues

    def _top_level_redeclarations(self) -> Iterator[Placed[SyntaxIssue]]:
        """acorn's `declareName` on the top-level scope (a module's, or the wrapper function's)."""
        functions_as_var = not self.config.module
        lexical: set[str] = set()
        variables: set[str] = set()
        functions: set[str] = set()
        bindings = {"lexical": lexical, "var": variables, "function": functions}
        for item in self.statements:
            for declaration in item.fact.declarations:
                if _redeclares(declaration, lexical, variables, functions, functions_as_var):
                    yield Placed(
                        item.base,
                        SyntaxIssue(
                            declaration.start,
                            declaration.end,
                            f"Identifier '{declaration.name}' has already been declared",
                        ),
                    )
                bindings[declaration.binding].add(declaration.name)


def _redeclares(
    declaration: Declaration,
    lexical: set[str],
    variables: set[str],
    functions: set[str],
    functions_as_var: bool,
) -> bool:
    name = declaration.name
    if declaration.binding == "lexical":
        return name in lexical or name in functions or name in variables
    if declaration.binding == "var":
        return name in lexical or (not functions_as_var and name in functions)
    return name in lexical or (not functions_as_var and name in variables)
