"""Typing in a script with an unclosed block: a missing `}` makes the rest of the file one top-level
statement with an error, walked afresh after every edit. The statements of its blocks are walked
as pieces of their own and reused while their text and context are unchanged, so a keystroke walks
only the statement typed in; the findings and facts stay those of a fresh analysis of the text."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tree_sitter import Node

from piflow.analysis import Capabilities, ScriptDocument, analyze, analyze_document
from piflow.analysis.dialects import dialect as named_dialect
from piflow.analysis.dialects import dialect_names
from piflow.analysis.walker import StatementWalker

CAPS = Capabilities.create(
    models=["openai/gpt", "anthropic/opus"],
    tools=["read", "grep"],
    agent_types=["reviewer", "scout"],
    model_aliases={"fast": "openai/gpt"},
)
STAGE = """const research{n} = await parallel("research-{n}", {{
  api: () => agent(prompt("Inspect {{area}}", {{ area: "api-{n}" }}), {{ role: "reviewer" }}),
  ui: async () => {{
    const outline = await agent("Outline {n}", {{ model: "fast" }});
    return agent(outline, {{ model: "openai/nope", tools: ["read", "bash"] }});
  }},
}});
state["stage{n}"] = research{n};
for (const key of Object.keys(research{n})) {{
  if (key === "skip") continue;
  log(`stage {n} ${{key}}`);
}}
const review{n} = conversation("review-{n}", {{ role: "reviewer" }});
await review{n}.run(prompt("Review {{n}}", {{ n: {n} }}));
"""
OPENER = "if (ready) {"
SCRIPT = (
    'export const meta = { name: "unclosed", description: "typing in an unclosed block" };\n'
    "const state = {};\n"
    'const ready = await checkpoint({ name: "go", prompt: "Go?" });\n'
    + STAGE.format(n=0)
    + f"{OPENER}\n"
    + "".join(STAGE.format(n=n) for n in range(1, 6))
    + "return state;\n"
)


class Editor:
    """An open document of one dialect edited as a client would (LSP positions), checked after every
    edit (in one dialect only: the document keeps the facts of one)."""

    def __init__(self, text: str, dialect: str = "pi-extensible-workflows") -> None:
        self.document = ScriptDocument(text)
        self.dialect = dialect
        self.check()

    def replace(self, old: str, new: str, occurrence: int = 0) -> None:
        """Replace the `occurrence`-th `old` in the text with `new`."""
        at = self.find(old, occurrence)
        self.edit(at, at + len(old), new)

    def type(self, after: str, typed: str, occurrence: int = 0) -> None:
        """Type `typed` one character at a time after the `occurrence`-th `after`."""
        at = self.find(after, occurrence) + len(after)
        for count, character in enumerate(typed):
            self.edit(at + count, at + count, character)

    def find(self, text: str, occurrence: int) -> int:
        at = -1
        for _ in range(occurrence + 1):
            at = self.document.text.index(text, at + 1)
        return at

    def edit(self, start: int, end: int, new: str) -> None:
        """Replace the characters from `start` to `end` with `new` (an incremental change), and check."""
        index = self.document.index
        first, last = index.position(index.char_to_byte(start)), index.position(index.char_to_byte(end))
        self.document.apply_change(first.line, first.character, last.line, last.character, new)
        self.check()

    def check(self) -> None:
        """Findings and facts equal a fresh analysis' of the same text."""
        text, name = self.document.text, self.dialect
        assert analyze_document(self.document, CAPS, dialect=name) == analyze(text, CAPS, dialect=name), text
        walk = named_dialect(name).walk
        assert placed(self.document, walk) == placed(ScriptDocument(text), walk), text

    def messages(self) -> list[str]:
        return [finding.message for finding in analyze_document(self.document, CAPS, dialect=self.dialect)]


def placed(document: ScriptDocument, walk: Any) -> list[str]:
    # repr: literal values such as regular expressions are opaque objects compared by identity
    return [repr((item.base, item.fact)) for item in document.facts(walk).statements]


@pytest.mark.parametrize("dialect", dialect_names())
def test_edits_in_and_around_an_unclosed_block_match_a_fresh_analysis(dialect: str) -> None:
    editor = Editor(SCRIPT, dialect)
    assert "Unexpected token" in editor.messages()[0]
    editor.type('"Inspect ', "the ", occurrence=3)  # in a string, inside the unclosed block
    editor.type("const outline", "2", occurrence=2)  # a declared name
    editor.type('model: "openai/', "x", occurrence=4)  # a model: a new finding
    editor.type("if (ready", " && state")  # the unclosed block's own line
    editor.replace("return state;\n", "return state;\n}\n")  # closing it
    assert not any("Unexpected token" in message for message in editor.messages())
    editor.type('"Outline ', "an ", occurrence=4)  # inside the closed block
    editor.replace("return state;\n}\n", "return state;\n")  # opening it again
    editor.type("const research3 = await parallel(", "x(", occurrence=0)  # a second error in it
    editor.replace(OPENER.replace("ready", "ready && state"), "while (ready) {")  # another kind of block
    editor.replace('});\nstate["stage2"]', '});\n{\nstate["stage2"]')  # a second unclosed block


AWKWARD = """let outline = 1;
var state = 2;
break;
const unset
log(unset);
const all = await runs.all([{ key: "a" }]);
"""
"""Statements whose walk depends on more than their text: a redeclaration, a `var` that meets a
`const` above, a `break` outside a loop, an error placed at the next statement's first token, and
a `runs.all` binding (pi-subagents' facts: only at the top level)."""


BINDING = """const all = await runs.all([{ key: "a", run: () => {
  agent("one");
  runs.run("two", {});
  f(;
} }]);
"""
"""A top-level `runs.all` binding (a pi-subagents fact) that has an error inside, after its call."""


@pytest.mark.parametrize(
    "text",
    [
        *(
            SCRIPT.replace(OPENER, opener) + AWKWARD
            for opener in (OPENER, "async function main() {", "function main() {", "for (;;) {", "label: {")
        ),
        *(SCRIPT.replace(OPENER, opener) + AWKWARD for opener in ("try {", "{", "while (ready) {")),
        BINDING,
    ],
)
def test_the_pieces_of_a_statement_are_its_facts_walked_whole(text: str) -> None:
    document = ScriptDocument(text)
    statement = max(document.statements(), key=lambda node: node.end_byte - node.start_byte)
    assert statement.has_error
    assert_pieces_are_the_whole_walk(document, statement, more_than=1)


def assert_pieces_are_the_whole_walk(document: ScriptDocument, statement: Node, more_than: int) -> None:
    """`statement` walked in pieces (more than `more_than`) gives its whole walk's facts, in every dialect."""
    for name in dialect_names():
        walk = named_dialect(name).walk
        whole = StatementWalker(document.data, walk).walk(statement)
        pieces = StatementWalker(document.data, walk).walk_pieces(statement, {}, {})
        assert len(pieces) > more_than
        flat = [_shifted(facts, base - statement.start_byte) for base, facts in ((p.base, p.fact) for p in pieces)]
        for field in dataclasses.fields(whole):
            found = [item for facts in flat for item in getattr(facts, field.name)]
            expected = list(getattr(whole, field.name))
            if field.name == "dialect":  # (read by kind, `DocumentFacts.dialect`: each kind in order)
                found, expected = sorted(found, key=_kind), sorted(expected, key=_kind)
            assert repr(found) == repr(expected), (name, field.name)


def _kind(fact: object) -> str:
    return type(fact).__name__


def _shifted(value: Any, by: int) -> Any:
    """A fact with its statement-relative offsets moved by `by`."""
    if isinstance(value, tuple):
        return tuple(_shifted(item, by) for item in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes = {}
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        if field.name in ("start", "end", "callee_start", "callee_end", "key_start", "key_end", "at"):
            changes[field.name] = item + by if item is not None else None
        else:
            changes[field.name] = _shifted(item, by)
    return dataclasses.replace(value, **changes)


def test_a_keystroke_in_an_unclosed_block_walks_only_the_statement_typed_in() -> None:
    document = ScriptDocument(SCRIPT)
    analyze_document(document, CAPS)
    walk = named_dialect("pi-extensible-workflows").walk
    facts = document.facts(walk).statements
    typed = document.index.position(document.index.char_to_byte(SCRIPT.index('"Outline 3') + len('"Outline ')))
    document.apply_change(typed.line, typed.character, typed.line, typed.character, "x")
    assert analyze_document(document, CAPS) == analyze(document.text, CAPS)
    after = document.facts(walk).statements
    walked = [item for item in after if all(item.fact is not old.fact for old in facts)]
    # the statement typed in (stage 3's parallel call) and the rest of the unclosed `if` after it
    # (its missing `}`, placed at the `if`): every other statement's facts are reused as they were
    assert len(after) > 15
    assert [document.data[item.base :].split(b"\n")[0] for item in walked] == [
        b'const research3 = await parallel("research-3", {',
        OPENER.encode(),
    ]


def test_reuse_follows_the_functions_around_a_statement() -> None:
    editor = Editor(SCRIPT.replace(OPENER, "async function main() {"))
    assert not any("await" in message for message in editor.messages())
    editor.replace("async function main", "function main")  # every top-level `await` of the block is now wrong
    assert sum("Cannot use keyword 'await' outside an async function" in message for message in editor.messages())
    editor.replace("function main", "async function main")
    assert not any("await" in message for message in editor.messages())


def test_reuse_follows_the_names_declared_before_a_statement() -> None:
    editor = Editor(SCRIPT)
    editor.replace("const research2", "const review3")  # declared again, unchanged, two stages later
    assert any("Identifier 'review3' has already been declared" in message for message in editor.messages())
    editor.replace("const review3 = await parallel", "const research2 = await parallel")
    assert not any("already been declared" in message for message in editor.messages())


def test_reuse_follows_the_loops_around_a_statement() -> None:
    editor = Editor(SCRIPT.replace(OPENER, "while (ready) {") + "break;\n")
    assert not any("Unsyntactic break" in message for message in editor.messages())
    editor.replace("while (ready) {", OPENER)
    assert any("Unsyntactic break" in message for message in editor.messages())
    editor.replace(OPENER, "while (ready) {")
    assert not any("Unsyntactic break" in message for message in editor.messages())


def test_reuse_follows_the_scopes_around_a_statement() -> None:
    editor = Editor(SCRIPT.replace(OPENER, "while (ready) {") + "let twice = 1;\nlet twice = 2;\n")
    redeclared = "Identifier 'twice' has already been declared"
    assert any(redeclared in message for message in editor.messages())
    editor.replace("while (ready) {", "for (const item of [ready]) {")  # a loop with a scope of its own
    assert any(redeclared in message for message in editor.messages())


def test_reuse_follows_the_classes_around_a_statement() -> None:
    editor = Editor("class A {\n  #p;\n  m() {\n    log(1);\n    return this.#p;\n  }\n  n() {\n    f(;\n  }\n}\n")
    assert not any("Private field" in message for message in editor.messages())
    editor.replace("#p;\n", "#q;\n")  # the method's statements are unchanged, their class is not
    assert any("Private field '#p' must be declared in an enclosing class" in message for message in editor.messages())
    editor.replace("#q;\n", "#p;\n")
    assert not any("Private field" in message for message in editor.messages())
