"""Robustness: random and mutated scripts never crash analysis (a finding or a WorkflowError, nothing else)."""

from __future__ import annotations

import re
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance import load_cases
from piflow import Capabilities, Finding, WorkflowError, analyze, inspect_script, preflight
from piflow.analysis import ScriptDocument, analyze_document, walker
from piflow.analysis.dialects import dialect as named_dialect
from piflow.analysis.dialects import dialect_names

CAPS = Capabilities.create(models=["openai/gpt"], tools=["read"], agent_types=["reviewer"])
SCRIPTS = [case["script"] for case in load_cases("preflight") if len(case["script"]) < 2_000]
JS_PIECES = st.sampled_from(
    [
        "agent(",
        "conversation(",
        "parallel(",
        "pipeline(",
        "withWorktree(",
        "checkpoint(",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ",",
        ";",
        "'",
        '"',
        "`",
        "${",
        "/",
        "*/",
        "/*",
        "//",
        "\n",
        "\r\n",
        "=>",
        "async ",
        "await ",
        "runs.run(",
        "export const meta = ",
        "😀",
        "é",
        "\u2028",
        "\\u0061",
        "#!",
        "<!--",
        "...",
        "?.",
        "**",
        "log(",  # a call of another function (its plain arguments are not walked)
        "x",
        ":",
        "=",
        "const ",
        "let",
        "08",
    ]
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated_script(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SCRIPTS))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "replace"]))
        piece = draw(st.one_of(JS_PIECES, st.text(max_size=3)))
        end = min(len(text), position + draw(st.integers(0, 5)))
        if action == "delete":
            text = text[:position] + text[end:]
        elif action == "insert":
            text = text[:position] + piece + text[position:]
        else:
            text = text[:position] + piece + text[end:]
    return text


SCRIPT = st.one_of(mutated_script(), st.text(max_size=200), st.lists(JS_PIECES, max_size=30).map("".join))


def assert_findings(result: object) -> None:
    assert isinstance(result, list) and all(isinstance(item, Finding) for item in result)


@FUZZ
@given(SCRIPT)
def test_analyze_never_crashes(text: str) -> None:
    assert_findings(analyze(text, CAPS))
    assert_findings(analyze(text, CAPS, dialect="pi-subagents"))


@FUZZ
@given(SCRIPT)
def test_compile_mode_never_crashes(text: str) -> None:
    assert_findings(analyze(text, CAPS, compile=True))


@FUZZ
@given(SCRIPT)
def test_preflight_and_inspect_raise_only_workflow_errors(text: str) -> None:
    for check in (lambda: preflight(text, CAPS), lambda: inspect_script(text)):
        try:
            check()
        except WorkflowError as error:
            assert error.code and error.message


@FUZZ
@given(st.sampled_from(SCRIPTS), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 8), JS_PIECES), max_size=6))
def test_incremental_reanalysis_equals_a_fresh_one(text: str, edits: list[tuple[int, int, str]]) -> None:
    document = ScriptDocument(text)
    for where, length, piece in edits:
        index = document.index
        start = min(where, len(index.data))
        start_position = index.position(_boundary(document, start))
        end_position = index.position(_boundary(document, min(start + length, len(index.data))))
        document.apply_change(
            start_position.line, start_position.character, end_position.line, end_position.character, piece
        )
        assert analyze_document(document, CAPS) == analyze(document.text, CAPS)


def _boundary(document: ScriptDocument, offset: int) -> int:
    """The nearest character boundary at or before a byte offset."""
    data = document.index.data
    while 0 < offset < len(data) and (data[offset] & 0xC0) == 0x80:
        offset -= 1
    return offset


# -- the walk's shortcuts (walker module docstring) find what the full walk finds -----------------------

LITERALS = [
    "1",
    "01",
    "08",
    "0.5",
    "1n",
    "0x1F",
    ".5",
    '"a"',
    "'b'",
    '"\\07"',
    '"\\8"',
    '"\\u0061"',
    "x",
    "await",
    "yield",
    "let",
    "static",
    "conversation",
    "withWorktree",
    "__pi_extensible_workflows_agent",
    "\\u0061wait",
    "undefined",
    "null",
    "true",
    "/re/g",
    "/re/gg",
    "-1",
    "delete x",
    "...x",
    "`t`",
    "() => 1",
    "f()",
    "[1, , 2]",
    "[await, 01]",
    "{}",
    "{ a }",
    "{ conversation }",
    "{ [k]: 1 }",
    "{ m() {} }",
    '{ "k\\07": 1 }',
    "{ 01: 1 }",
    '{ "await": 1 }',
    "{ __proto__: 1, __proto__: 2 }",
    '{ "__proto__": 1, "__proto__": 2 }',
    "{ a: 1 <!-- c\n }",
    "{ a: /* c */ 1 }",
    "{ a: 1,\n--> c\n b: 2 }",
    "{ a:\n--> c\n 1 }",
    '{ a: { b: [ "c", 0o7, 07 ] } }',
    "a ** b",
    '{ "\\u0061": 1 }',
    "{ a: 1,, }",
    "this.#x",
    "class { #y; m() { return this.#y + this.#z; } }",
    "-x ** 2",
    "([a, ...b,]) => 1",
    "f(1,, 2)",
    "f(1, /* c */, 2)",
    "`\\07 ${x}`",
    "class A { constructor }",
    "new X",
    "typeof x",
    "a in b",
    "0x1f",
    "1_0",
    "08",
    "1n",
    "enum",
    "super",
]
CONTEXTS = [
    'agent("t", {{ model: {0}, tools: [{0}] }});',
    "{0}; agent({0}, {0});",
    'await parallel("p", {{ a: () => agent({0}, {{ label: {0} }}), b: checkpoint({0}) }});',
    'function f() {{ return conversation("c", {0}); }}',
    'await pipeline("p", {0}, {{ s: (x) => withWorktree({0}, () => phase({0})) }});',
    'log({0}); agent(prompt("x", {{ k: {0}, l: [{0}] }}), {{}}); f({{ {0}: 1 }});',
]


def full_walk_facts(text: str) -> list[str]:
    """The facts of a walk with every check on every statement, every call read by `calls.direct_call`
    and every call argument walked."""
    with (
        patch.object(walker, "_markers", lambda data, start, end, possible=-1: -1),
        patch.object(walker.StatementWalker, "_inert", lambda self, expr: False),
        patch.object(walker, "_PLAIN_ARGUMENTS", re.compile(rb"(?!)")),  # no call's arguments are skipped
        patch.object(walker, "_PLAIN_CALLEE", frozenset()),  # every call read by `calls.direct_call`
        patch.object(walker, "_MEMBER", frozenset()),
    ):
        return walk_facts(text)


def walk_facts(text: str) -> list[str]:
    # repr: literal values such as regular expressions are opaque objects compared by identity
    return [
        repr([(item.base, item.fact) for item in ScriptDocument(text).facts(dialect.walk).statements])
        for dialect in map(named_dialect, dialect_names())
    ]


@pytest.mark.parametrize("context", CONTEXTS)
def test_walk_shortcuts_on_literal_arguments(context: str) -> None:
    for value in LITERALS:
        text = context.format(value)
        assert walk_facts(text) == full_walk_facts(text), text


@FUZZ
@given(SCRIPT)
def test_walk_shortcuts_on_random_scripts(text: str) -> None:
    assert walk_facts(text) == full_walk_facts(text)
