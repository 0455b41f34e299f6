"""The one recogniser of workflow calls: which call expressions call a global function directly.

Analysis (`walker`), the worker's instrumentation and the editor features (hover, definition,
inlay hints, lenses) all ask this module, so they cannot disagree. Spec A.3: a workflow call is
"a direct call expression whose callee is the plain identifier" — in the reference's view of the
tree (acorn ESTree), where parentheses are not nodes and identifiers carry their unescaped name:

* calls: `agent(...)`, `agent?.(...)` (an optional call is still a CallExpression of `agent`),
  `(agent)(...)`, `((agent))(...)`, `(agent /* c */)(...)`, `\\u0061gent(...)`, and
  `await (agent)(...)`, which tree-sitter reads as a call of a function named `await` whose result
  is called: in workflow code `await` is the operator (the pi-extensible-workflows body is strict
  module code, where `await` is reserved), so the call is `await ((agent)(...))`;
* not calls: `x.agent(...)` (a member call), `` agent`...` `` (a tagged template),
  `new agent(...)`, `(0, agent)(...)` (the callee is a sequence), and aliases
  (`const a = agent; a(...)`: the runtime's trap, B.1 step 4).

A call begins where ESTree's does: at its callee, parentheses included (`(agent)(...)` begins at
`(`), which is where call-site identities (spec A.3) count from.
"""

from __future__ import annotations

from typing import Final

from tree_sitter import Node

from piflow.analysis.jsliterals import identifier_name
from piflow.analysis.syntax import F, K, named_items, unwrap_parens

PRIMITIVES: Final = ("agent", "conversation", "parallel", "pipeline", "checkpoint", "phase", "withWorktree")
"""The workflow calls that preflight and inspect see (identifier callee, anywhere in the body)."""
INSTRUMENTED: Final = ("agent", "conversation", "withWorktree")
"""The calls the worker rewrites to internal functions with a call-site argument (spec A.3)."""
INTERNAL_NAMES: Final[dict[str, str]] = {name: f"__pi_extensible_workflows_{name}" for name in INSTRUMENTED}
"""The internal function each instrumented call is rewritten to (spec A.2: reserved in scripts)."""
GLOBAL_FUNCTIONS: Final = (*PRIMITIVES, "log", "prompt")
"""Every workflow global a script calls (spec A.2): the primitives, `log` and `prompt`."""

DirectCall = tuple[int, Node, Node]
"""`(start, callee, arguments)` of a call: its first byte, its callee without parentheses, its
arguments (a plain tuple: the walker asks this of every call node of every statement)."""

_AWAIT: Final = b"await"


def direct_call(node: Node) -> DirectCall | None:
    """ESTree's view of a `call_expression` node; None when it is no call (a tagged template)."""
    arguments = node.child_by_field_id(F.ARGUMENTS)
    function = node.child_by_field_id(F.FUNCTION)
    if arguments is None or function is None or arguments.kind_id not in K.ARGUMENTS:
        return None
    kind = function.kind_id
    if kind in K.PAREN:
        return node.start_byte, unwrap_parens(function), arguments
    if kind in K.CALL:
        operand = await_operand(function)
        if operand is not None:  # `(x)` of `await (x)(...)`: begins at its `(`, calls `x`
            return operand.start_byte, unwrap_parens(named_items(operand)[0]), arguments
    return node.start_byte, function, arguments


def await_operand(node: Node) -> Node | None:
    """The parenthesised operand `(x)` (an `arguments` node holding one expression) when `node` is
    tree-sitter's reading of `await (x)` as a call of `await`."""
    function = node.child_by_field_id(F.FUNCTION)
    if function is None or function.kind_id not in K.IDENTIFIER or function.text != _AWAIT:
        return None
    arguments = node.child_by_field_id(F.ARGUMENTS)
    if arguments is None or arguments.kind_id not in K.ARGUMENTS:
        return None
    items = named_items(arguments)
    if len(items) != 1 or items[0].kind_id in K.SPREAD:
        return None
    return arguments


def awaited_expression(node: Node) -> Node:
    """The outermost node of `await (x)...` read as a call of `await` (`node`): the operand of
    `await` is the whole chain of calls, members and subscripts that follows `(x)`."""
    current = node
    parent = current.parent
    while parent is not None and (
        (parent.kind_id in K.CALL and parent.child_by_field_id(F.FUNCTION) == current)
        or (parent.kind_id in K.MEMBER and parent.child_by_field_id(F.OBJECT) == current)
    ):
        current, parent = parent, parent.parent
    return current


def callee_name(callee: Node, data: bytes | None = None) -> str | None:
    """The name of a plain-identifier callee (escapes decoded, as ESTree has it), else None.

    `data`: the parsed text, when the caller has it (slicing it is faster than `Node.text`)."""
    if callee.kind_id not in K.IDENTIFIER:
        return None
    raw = (callee.text or b"") if data is None else data[callee.start_byte : callee.end_byte]
    if b"\\" in raw:
        return identifier_name(raw.decode("utf-8", "surrogatepass"))
    return raw.decode("utf-8", "surrogatepass")


def called_name(node: Node) -> str | None:
    """The global a `call_expression` node calls directly (any name), else None."""
    call = direct_call(node)
    return None if call is None else callee_name(call[1])


def call_of_callee(identifier: Node) -> Node | None:
    """The `call_expression` whose direct callee is `identifier`, if it is one."""
    current = identifier
    parent = current.parent
    while parent is not None and parent.kind_id in K.PAREN and len(named_items(parent)) == 1:
        current, parent = parent, parent.parent
    if parent is None:
        return None
    if parent.kind_id in K.ARGUMENTS:  # `await (agent)(...)`: the operand of tree-sitter's `await(...)`
        pseudo = parent.parent
        if pseudo is None or await_operand(pseudo) != parent or current.kind_id in K.SPREAD:
            return None
        current, parent = pseudo, pseudo.parent
        if parent is None:
            return None
    if parent.kind_id not in K.CALL or parent.child_by_field_id(F.FUNCTION) != current:
        return None
    call = direct_call(parent)
    return parent if call is not None and call[1] == identifier else None
