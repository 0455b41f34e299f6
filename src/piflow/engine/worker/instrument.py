"""Source instrumentation of a script body before the worker compiles it (spec A.3).

Two rewrites, both found with tree-sitter and applied as text edits on the UTF-8 body:

* identity: every direct call `agent(...)`, `conversation(...)`, `withWorktree(...)` (as
  `piflow.analysis.calls` recognises them, the same calls analysis and the editor see) calls the
  internal function instead, with a trailing call-site argument `"<start>:<end>"` in UTF-16 offsets
  of the body, exactly as the reference's acorn-based rewrite does;
* async context: QuickJS has no AsyncLocalStorage, so the structural path and worktree owner live in
  one "current context" variable of the runtime. Synchronous code inherits it naturally; the only
  places where script code resumes later are `await` (and `for await`), which the rewrite makes
  re-establish the context captured just before suspending, and promise callbacks, which the
  runtime's `Promise.prototype.then` binds. A rejected `await` skips the restoring call, so every
  `try` statement captures the context on entry and re-establishes it at the top of its `catch`
  and `finally` blocks.

Call-site offsets refer to the original body, so the added text never shifts identities.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Final

from tree_sitter import Node, Parser, Query, QueryCursor

from piflow.analysis.calls import INTERNAL_NAMES, await_operand, awaited_expression, callee_name, direct_call
from piflow.analysis.positions import TextIndex
from piflow.analysis.syntax import LANGUAGE
from piflow.engine.worker.wire import SUBAGENTS_DIALECT
from piflow.errors import WorkflowError

CONTEXT_NAME: Final = "__pi_extensible_workflows_context"
"""Parameter of the compiled body: returns the current async context."""
RESUME_NAME: Final = "__pi_extensible_workflows_resume"
"""Parameter of the compiled body: `(context, value)` re-establishes `context` and returns `value`."""
PARAMETERS: Final = (*INTERNAL_NAMES.values(), CONTEXT_NAME, RESUME_NAME)

_TRY_CONTEXT: Final = "__pi_extensible_workflows_try"
_LOOP_CONTEXT: Final = "__pi_extensible_workflows_loop"
_REWRITES: Final = Query(
    LANGUAGE,
    """
    (call_expression) @call
    (await_expression) @await
    (try_statement) @try
    (for_in_statement "await") @for_await
    """,
)
_RESERVED_NAMES: Final = " ".join(f'"{name}"' for name in INTERNAL_NAMES.values())


@cache
def _reserved() -> Query:
    """The query of the internal names, compiled on first use (~1.5 ms: a body rarely names them)."""
    return Query(
        LANGUAGE,
        f"""
        ([(identifier) (property_identifier) (shorthand_property_identifier)
          (shorthand_property_identifier_pattern) (statement_identifier)] @name
         (#any-of? @name {_RESERVED_NAMES}))
        """,
    )


@lru_cache(maxsize=4)
def instrumented(body: str, dialect: str | None = None) -> str:
    """What the worker compiles for `body` in `dialect` ("pi-subagents": `instrument_subagents`).

    The host instruments, so a worker never imports the grammar; cached, as a process may execute
    one script several times (Temporal steps, tests)."""
    return instrument_subagents(body) if dialect == SUBAGENTS_DIALECT else instrument(body)


_OWN, _AROUND = 0, 1
"""Who places a wrapper: the node itself, or its parent around it (which must enclose the node's own)."""

Edit = tuple[int, int, int, int, int, str]
"""`(position, phase, order, tie, end, text)`: `text` replaces the body bytes `[position, end)`.

Sorting puts, at one position, closing text (phase 0) before opening text (phase 1); closings of
inner spans first (`order` = -start of the wrapped span), openings of outer spans first (`order` =
-end). Equal spans break ties by who placed the wrapper.
"""


def _opening(position: int, span_end: int, text: str, placed_by: int = _OWN) -> Edit:
    return (position, 1, -span_end, 1 - placed_by, position, text)


def _closing(position: int, span_start: int, text: str, placed_by: int = _OWN) -> Edit:
    return (position, 0, -span_start, placed_by, position, text)


def instrument(body: str) -> str:
    """Return the body rewritten for the worker; raise for a broken parse or reserved identifiers.

    The result is the text of a strict-mode async arrow function taking `PARAMETERS`, ready to be
    compiled (spec A.1: the effective language is strict-mode JavaScript). The directive shares the
    body's first line, so line numbers in runtime errors stay those of the script.
    """
    data = body.encode("utf-8", "surrogatepass")
    root = Parser(LANGUAGE).parse(data).root_node
    if root.has_error:
        raise _syntax_error(root, TextIndex(body, data))
    if b"__pi_extensible_workflows_" in data:
        _reject_reserved_identifiers(root, data)
    edits = _edits(root, TextIndex(body, data))
    out: list[bytes] = []
    cursor = 0
    for position, _phase, _order, _tie, end, text in sorted(edits):
        out.append(data[cursor:position])
        out.append(text.encode())
        cursor = max(cursor, end)
    out.append(data[cursor:])
    source = b"".join(out).decode("utf-8", "surrogatepass")
    return "async (" + ", ".join(PARAMETERS) + ') => {"use strict";' + source + "\n}"


def _reject_reserved_identifiers(root: Node, data: bytes) -> None:
    """Spec A.2: the internal names may not appear anywhere (checked agent, conversation, withWorktree)."""
    found = {_text(node, data) for node in QueryCursor(_reserved()).captures(root).get("name", [])}
    for noun, name in INTERNAL_NAMES.items():
        if name in found:
            raise WorkflowError("INVALID_METADATA", f"{name} is reserved for workflow {noun} instrumentation")


def _syntax_error(root: Node, index: TextIndex) -> WorkflowError:
    """INVALID_SYNTAX at the first node tree-sitter could not parse (acorn-style `(line:column)`)."""
    node = root
    while not (node.is_error or node.is_missing):
        node = next(child for child in node.children if child.has_error or child.is_missing)
    line, column = index.js_line_column(node.start_byte)
    return WorkflowError("INVALID_SYNTAX", f"Invalid workflow syntax: Unexpected token ({line}:{column})")


def _text(node: Node, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


def _edits(root: Node, index: TextIndex) -> list[Edit]:
    edits: list[Edit] = []
    for _pattern, captures in QueryCursor(_REWRITES).matches(root):
        if "call" in captures:
            _call(captures["call"][0], index, edits, index.data)
        elif "await" in captures:
            _await(captures["await"][0], edits)
        elif "try" in captures:
            _try(captures["try"][0], edits)
        else:
            _for_await(captures["for_await"][0], edits)
    return edits


def _call(node: Node, index: TextIndex, edits: list[Edit], data: bytes) -> None:
    if await_operand(node) is not None:  # `await (x)...`, which tree-sitter reads as a call of `await`
        _await(node, edits, awaited_expression(node).end_byte)
    call = direct_call(node)
    if call is None:
        return
    start, callee, arguments = call
    internal = INTERNAL_NAMES.get(callee_name(callee, data) or "")
    if internal is None:
        return
    tokens = [child for child in arguments.children if child.type != "comment"]
    separator = ", " if len(tokens) > 2 and tokens[-2].type != "," else ""
    call_site = f"{index.byte_to_utf16(start)}:{index.byte_to_utf16(node.end_byte)}"
    edits.append((callee.start_byte, 1, 0, 2, callee.end_byte, internal))
    edits.append(_closing(tokens[-1].start_byte, start, f'{separator}"{call_site}"'))


def _await(node: Node, edits: list[Edit], end: int | None = None) -> None:
    """Re-establish the context captured before an `await` that suspends (from `node` to `end`)."""
    stop = node.end_byte if end is None else end
    edits.append(_opening(node.start_byte, stop, f"{RESUME_NAME}({CONTEXT_NAME}(), "))
    edits.append(_closing(stop, node.start_byte, ")"))


def _try(node: Node, edits: list[Edit]) -> None:
    edits.append(_opening(node.start_byte, node.end_byte, f"{{const {_TRY_CONTEXT} = {CONTEXT_NAME}(); "))
    edits.append(_closing(node.end_byte, node.start_byte, "}"))
    for field in ("handler", "finalizer"):
        clause = node.child_by_field_name(field)
        block = clause.child_by_field_name("body") if clause is not None else None
        if block is not None:
            restore = f"{RESUME_NAME}({_TRY_CONTEXT}); "
            edits.append(_opening(block.start_byte + 1, block.end_byte - 1, restore, _AROUND))


def _for_await(node: Node, edits: list[Edit]) -> None:
    outer = node
    while outer.parent is not None and outer.parent.type == "labeled_statement":
        outer = outer.parent
    restore = f"{RESUME_NAME}({_LOOP_CONTEXT}); "
    edits.append(_opening(outer.start_byte, outer.end_byte, f"{{const {_LOOP_CONTEXT} = {CONTEXT_NAME}(); "))
    edits.append(_closing(outer.end_byte, outer.start_byte, f" {restore}}}"))
    body = node.child_by_field_name("body")
    if body is None:
        return
    if body.type == "statement_block":
        edits.append(_opening(body.start_byte + 1, body.end_byte - 1, restore, _AROUND))
    else:
        edits.append(_opening(body.start_byte, body.end_byte, "{" + restore, _AROUND))
        edits.append(_closing(body.end_byte, body.start_byte, "}", _AROUND))


# -- the pi-subagents dialect ----------------------------------------------------------------------

OBSERVE_NAME: Final = "__pi_extensible_workflows_observe"
"""Parameter of a pi-subagents body: marks the `runs.*` launches a promise carries as observed."""


@cache
def _subagents_rewrites() -> Query:
    """The pi-subagents dialect's rewrites, compiled on first use (~1.5 ms of every other worker's start)."""
    return Query(
        LANGUAGE,
        """
        (call_expression) @call
        (await_expression) @await
        (return_statement) @return
        """,
    )


_FUNCTIONS: Final = frozenset({
    "function_declaration", "function_expression", "function", "arrow_function", "method_definition",
    "generator_function", "generator_function_declaration", "class_static_block",
})


def instrument_subagents(body: str) -> str:
    """A pi-subagents body (SUBAGENTS_SPEC A.2) as a sloppy-mode async arrow taking `OBSERVE_NAME`.

    QuickJS has no promise hooks: `await x` becomes `await observe(x)` and a top-level `return x`
    becomes `return observe(x)`, so the runtime sees which `runs.*` promises the script observes.
    Other observation (chaining, `Promise.all`) the runtime sees through `then`.
    """
    data = body.encode("utf-8", "surrogatepass")
    root = Parser(LANGUAGE).parse(data).root_node
    if root.has_error:
        raise _syntax_error(root, TextIndex(body, data))
    edits: list[Edit] = []
    for _pattern, captures in QueryCursor(_subagents_rewrites()).matches(root):
        if "call" in captures:
            node = captures["call"][0]
            operand = await_operand(node)
            if operand is not None:  # `await (x)...` read as a call of `await`
                _observe(edits, operand.start_byte, awaited_expression(node).end_byte)
        elif "await" in captures:
            node = captures["await"][0]
            operand = node.named_children[-1] if node.named_children else None
            if operand is not None:
                _observe(edits, operand.start_byte, operand.end_byte)
        else:
            node = captures["return"][0]
            value = next((child for child in node.named_children if child.type != "comment"), None)
            if value is not None and not _in_function(node):
                _observe(edits, value.start_byte, value.end_byte)
    out: list[bytes] = []
    cursor = 0
    for position, _phase, _order, _tie, end, text in sorted(edits):
        out.append(data[cursor:position])
        out.append(text.encode())
        cursor = max(cursor, end)
    out.append(data[cursor:])
    return f"async ({OBSERVE_NAME}) => {{" + b"".join(out).decode("utf-8", "surrogatepass") + "\n}"


def _observe(edits: list[Edit], start: int, end: int) -> None:
    edits.append(_opening(start, end, f"{OBSERVE_NAME}("))
    edits.append(_closing(end, start, ")"))


def _in_function(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in _FUNCTIONS:
            return True
        parent = parent.parent
    return False
