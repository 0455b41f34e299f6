"""The statement walk visits named nodes only (tokens only under errors): scopes a node opens end
with its subtree, and MISSING tokens are still reported."""

from __future__ import annotations

from piflow.analysis import ScriptDocument
from piflow.analysis.walker import WalkConfig


def facts_of(text: str) -> list[tuple[str, str, tuple[tuple[str, str | None, str | None], ...]]]:
    """Each workflow call: its kind, source, and enclosing structure scopes."""
    document = ScriptDocument(text)
    data = document.data
    return [
        (
            placed.fact.kind,
            data[placed.at(placed.fact.start) : placed.at(placed.fact.end)].decode(),
            tuple((scope.kind, scope.name, scope.key) for scope in placed.fact.structure),
        )
        for placed in document.facts(WalkConfig()).calls
    ]


def syntax_messages(text: str) -> list[str]:
    document = ScriptDocument(text)
    return [issue.message for item in document.facts(WalkConfig()).statements for issue in item.fact.syntax]


def test_a_structure_key_ends_with_its_member() -> None:
    calls = facts_of(
        'await parallel("p", { a: () => agent("x"), b: () => agent("y") });\n'
        'await pipeline("q", { i: 1 }, { s: (v) => agent("z") });\n'
        'await agent("after");\n'
    )
    assert calls == [
        ("parallel", 'parallel("p", { a: () => agent("x"), b: () => agent("y") })', ()),
        ("agent", 'agent("x")', (("parallel", "p", "a"),)),
        ("agent", 'agent("y")', (("parallel", "p", "b"),)),
        ("pipeline", 'pipeline("q", { i: 1 }, { s: (v) => agent("z") })', ()),
        ("agent", 'agent("z")', (("pipeline", "q", "s"),)),
        ("agent", 'agent("after")', ()),
    ]


def test_a_function_frame_ends_with_the_function() -> None:
    """`await` in a plain arrow is an error; after the arrow, in the same statement, it is not."""
    messages = syntax_messages("const r = [() => { await agent('a'); }, await agent('b')];\n")
    assert messages == ["Cannot use keyword 'await' outside an async function"]


def test_a_missing_token_is_reported() -> None:
    """A MISSING `)` is an anonymous token outside any workflow call."""
    assert syntax_messages("const x = (1 + 2;\n") == ["Unexpected token"]
