"""What one walk of a top-level statement learns: the facts every rule works from.

Facts are immutable and their spans are relative to the statement's first byte, so the facts of an
unchanged statement are reused as they are after an edit elsewhere in the document (see
`document.ScriptDocument.facts`). `Placed` pairs a fact with the statement's current offset.
"""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from piflow.analysis.expressions import Expr
from piflow.analysis.records import record

Execution = Literal["parallel", "sequential"]


@record
class StructureScope:
    """One enclosing `parallel`/`pipeline` scope of a call (spec B.5 `structure`)."""

    kind: Literal["parallel", "pipeline"]
    name: str | None
    key: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"kind": self.kind, "name": self.name, "key": self.key}


@record
class CallFact:
    """A direct call of a workflow primitive."""

    kind: str
    start: int
    end: int
    callee_start: int
    callee_end: int
    args: tuple[Expr, ...]
    execution: Execution
    structure: tuple[StructureScope, ...]

    @property
    def has_spread(self) -> bool:
        return any(arg.kind == "spread" for arg in self.args)

    def arg(self, index: int) -> Expr | None:
        return self.args[index] if index < len(self.args) else None


@record
class NameUse:
    """An identifier occurrence a rule cares about (reserved names, indirect primitive uses)."""

    name: str
    start: int
    end: int


@record
class SyntaxIssue:
    """A syntax error found without running a JavaScript engine.

    `engine` says which of the reference's two parsers reports it: `acorn` (messages end with
    `(line:column)` of `at`), or `v8` (the body compile; no position in the message).
    `strict_only`: an error only in strict code (the pi-extensible-workflows module), not in the
    sloppy pi-subagents wrapper.
    """

    start: int
    end: int
    message: str
    engine: Literal["acorn", "v8"] = "acorn"
    at: int | None = None
    strict_only: bool = False

    @property
    def position(self) -> int:
        return self.start if self.at is None else self.at


@record
class Declaration:
    """A binding in the statement's top-level scope (checked across statements for redeclaration).

    `binding` follows acorn: `lexical` (let/const/class, and functions at a module's top level),
    `var` (var, and vars hoisted out of nested blocks), `function` (sloppy-mode functions).
    """

    name: str
    binding: Literal["lexical", "var", "function"]
    start: int
    end: int


@record
class RegexLiteral:
    """A regular expression literal, checked by the engine in compile mode."""

    start: int
    end: int
    pattern: str
    flags: str


@record
class AsyncFunction:
    """An async function, arrow or method (the pi-subagents dialect rejects them all)."""

    start: int
    end: int


@record
class TopLevelReturn:
    start: int
    end: int
    argument: Expr | None


@record
class StatementFacts:
    calls: tuple[CallFact, ...] = ()
    reserved: tuple[NameUse, ...] = ()
    indirect: tuple[NameUse, ...] = ()
    syntax: tuple[SyntaxIssue, ...] = ()
    declarations: tuple[Declaration, ...] = ()
    regexes: tuple[RegexLiteral, ...] = ()
    async_functions: tuple[AsyncFunction, ...] = ()
    returns: tuple[TopLevelReturn, ...] = ()
    dialect: tuple[object, ...] = ()
    """The facts only the dialect's rules use (`walker.DialectFacts`)."""


T = TypeVar("T")


@record
class Placed(Generic[T]):
    """A fact and the byte offset of its statement: `base + fact.start` is its document offset."""

    base: int
    fact: T

    def at(self, relative: int) -> int:
        return self.base + relative
