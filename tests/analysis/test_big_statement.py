"""Typing in one large valid top-level statement (a script wrapped in `try { ... } catch`, a big
`async function main() { ... }`, a top-level `for` around the work): it is walked in pieces like a
statement with errors, so a keystroke walks only the statement typed in, and its findings and facts
stay those of a fresh analysis, its pieces together those of its walk whole."""

from __future__ import annotations

import pytest
from test_unclosed_block import AWKWARD, CAPS, STAGE, Editor, assert_pieces_are_the_whole_walk
from tree_sitter import Node

from piflow.analysis import ScriptDocument, analyze, analyze_document
from piflow.analysis.dialects import dialect as named_dialect
from piflow.analysis.dialects import dialect_names
from piflow.analysis.document import _PIECES_FROM

META = 'export const meta = { name: "big", description: "typing in one large statement" };\n'
WORK = (
    "const state = {};\n"
    'const ready = await checkpoint({ name: "go", prompt: "Go?" });\n'
    + "".join(STAGE.format(n=n) for n in range(10))
    + "return state;\n"
)
WRAPPERS = {
    "try": ("try {\n", "} catch (error) {\n  log(`failed: ${error}`);\n  throw error;\n}\n"),
    "main": ("async function main() {\n", "}\nawait main();\n"),
    "for": ("for (const round of [1, 2]) {\n", "}\n"),
    "if": ("if (true) {\n", "}\n"),
    "block": ("{\n", "}\n"),
}


def wrapped(name: str, work: str = WORK) -> str:
    """The script with its work inside one statement (`WRAPPERS[name]`)."""
    opener, closer = WRAPPERS[name]
    return META + opener + work + closer


def big_statement(document: ScriptDocument) -> Node:
    statement = max(document.statements(), key=lambda node: node.end_byte - node.start_byte)
    assert not statement.has_error and statement.end_byte - statement.start_byte >= _PIECES_FROM
    return statement


@pytest.mark.parametrize("dialect", dialect_names())
@pytest.mark.parametrize("wrapper", ["try", "main"])
def test_edits_in_a_big_valid_statement_match_a_fresh_analysis(dialect: str, wrapper: str) -> None:
    editor = Editor(wrapped(wrapper), dialect)
    big_statement(editor.document)
    assert not any("Unexpected" in message for message in editor.messages())
    editor.type('description: "', "now ")  # before it: the big statement moves, unchanged
    editor.type('"Inspect ', "the ", occurrence=3)  # in a string
    editor.type("const outline", "2", occurrence=2)  # a declared name
    editor.type('model: "openai/', "x", occurrence=4)  # a model: a new finding
    editor.replace("const research4", "const review2")  # declared twice in one scope
    assert any("Identifier 'review2' has already been declared" in message for message in editor.messages())
    editor.replace("const review2 = await parallel", "const research4 = await parallel")
    assert not any("already been declared" in message for message in editor.messages())
    editor.type("const research6 = await parallel(", "x(")  # breaking it: now a statement with errors
    assert any("Unexpected" in message for message in editor.messages())
    editor.replace("parallel(x(", "parallel(")  # fixing it
    assert not any("Unexpected" in message for message in editor.messages())
    editor.type('"Outline ', "an ", occurrence=7)
    editor.replace("return state;\n", "return state;\n}\n")  # one `}` too many: the statement ends early
    editor.replace("return state;\n}\n", "return state;\n")


def test_removing_async_around_a_big_statement_matches_a_fresh_analysis() -> None:
    editor = Editor(wrapped("main"))
    assert not any("await" in message for message in editor.messages())
    editor.replace("async function main", "function main")  # every `await` in main is now wrong
    awaits = "Cannot use keyword 'await' outside an async function"
    assert sum(awaits in message for message in editor.messages()) > 10
    editor.replace("function main", "async function main")
    assert not any("await" in message for message in editor.messages())


def test_leaving_a_loop_around_a_big_statement_matches_a_fresh_analysis() -> None:
    editor = Editor(wrapped("for", WORK.replace("return state;\n", "if (state.done) break;\n")))
    assert not any("Unsyntactic break" in message for message in editor.messages())
    editor.replace(WRAPPERS["for"][0], WRAPPERS["if"][0])
    assert any("Unsyntactic break" in message for message in editor.messages())
    editor.replace(WRAPPERS["if"][0], WRAPPERS["for"][0])
    assert not any("Unsyntactic break" in message for message in editor.messages())


BINDING = (
    'const all = await runs.all([{ key: "a", run: async () => {\n'
    + "".join(STAGE.format(n=n) for n in range(10))
    + "} }]);\n"
)
"""A top-level `runs.all` binding (a pi-subagents fact, taken from the whole statement) that is large."""


@pytest.mark.parametrize(
    "text",
    [*(wrapped(name, WORK.replace("return state;\n", AWKWARD)) for name in WRAPPERS), BINDING],
    ids=[*WRAPPERS, "binding"],
)
def test_the_pieces_of_a_big_valid_statement_are_its_facts_walked_whole(text: str) -> None:
    document = ScriptDocument(text)
    statement = big_statement(document)
    assert_pieces_are_the_whole_walk(document, statement, more_than=10)
    assert Editor(text, "pi-subagents").messages() == [
        finding.message for finding in analyze(text, CAPS, dialect="pi-subagents")
    ]


AFTER = 'log("after the work");\n'


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_a_keystroke_in_a_big_statement_walks_only_the_statement_typed_in(wrapper: str) -> None:
    document = ScriptDocument(wrapped(wrapper) + AFTER)
    analyze_document(document, CAPS)
    # the statement typed in, and what the big statement holds outside its pieces (`main`'s own
    # span, an async function): every other statement's facts are reused as they were
    typed_in = [
        *([WRAPPERS["main"][0].strip().encode()] if wrapper == "main" else []),
        b'const research3 = await parallel("research-3", {',
    ]
    assert walked_after_typing(document, '"Outline 3') == typed_in
    assert walked_after_typing(document, AFTER[:5]) == [b'log("xafter the work");']  # the big one unchanged
    assert walked_after_typing(document, '"Outline 3') == typed_in  # its pieces are still known


def walked_after_typing(document: ScriptDocument, after: str) -> list[bytes]:
    """The first line of each statement (or piece) walked after typing a character after `after`."""
    walk = named_dialect("pi-extensible-workflows").walk
    facts = document.facts(walk).statements
    index = document.index
    typed = index.position(index.char_to_byte(document.text.index(after) + len(after)))
    document.apply_change(typed.line, typed.character, typed.line, typed.character, "x")
    assert analyze_document(document, CAPS) == analyze(document.text, CAPS)
    now = document.facts(walk).statements
    assert len(now) > 20
    walked = [item for item in now if all(item.fact is not old.fact for old in facts)]
    return [document.data[item.base :].split(b"\n")[0] for item in walked]
