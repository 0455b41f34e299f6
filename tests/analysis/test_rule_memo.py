"""Re-analysis after an edit re-checks only the edited statements' calls, and stays exact: the
findings equal a fresh analysis' whatever moved, changed capabilities or switched mode."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from piflow.analysis import Capabilities, ScriptDocument, analyze, analyze_document
from piflow.analysis.analyze import rule_context, run_rules
from piflow.analysis.dialects import extensible
from piflow.config.roles import RoleDefinition

CAPS = Capabilities.create(
    models=["openai/gpt", "anthropic/opus"],
    tools=["read", "grep"],
    agent_types=["reviewer", "scout"],
)
SCRIPT = "\n".join(
    [
        'phase("one");',
        'const a = await agent("a", { model: "openai/gpt", tools: ["read"] });',
        'const b = await agent("b", { model: "openai/nope" });',
        'const c = await agent("c", { role: "reviewer", lable: "typo" });',
        'await parallel("p", { x: () => agent("x", { tools: ["grep", "bash"] }) });',
        "return [a, b, c];",
        "",
    ]
)


def reanalysed(document: ScriptDocument, caps: Capabilities) -> list[tuple[str, str, int, int]]:
    """The document's findings (code, message, start line, start character), checked against a fresh analysis."""
    found = analyze_document(document, caps)
    assert found == analyze(document.text, caps)
    return [(f.code, f.message, f.range.start.line, f.range.start.character) for f in found]


def test_findings_of_unchanged_statements_move_with_them_after_an_edit_above() -> None:
    document = ScriptDocument(SCRIPT)
    before = reanalysed(document, CAPS)
    assert [(code, line) for code, _, line, _ in before] == [
        ("UNKNOWN_MODEL", 2), ("UNKNOWN_TOOL", 4), ("UNKNOWN_OPTION", 3)
    ]
    document.apply_change(0, 0, 0, 0, "// a comment\nlog('moved');\n")
    after = reanalysed(document, CAPS)
    assert [(code, message, line - 2, column) for code, message, line, column in after] == before


def test_an_edit_that_breaks_or_fixes_a_clean_call_is_seen() -> None:
    document = ScriptDocument(SCRIPT)
    reanalysed(document, CAPS)
    quote = SCRIPT.split("\n")[1].index('"openai/gpt"')
    column = quote + len('"openai/')
    document.apply_change(1, column, 1, column + 3, "xyz")  # the clean call's model becomes openai/xyz
    assert ("UNKNOWN_MODEL", "Unknown model: openai/xyz", 1, quote) in reanalysed(document, CAPS)
    document.apply_change(1, column, 1, column + 3, "gpt")  # and back
    assert [line for _, _, line, _ in reanalysed(document, CAPS)] == [2, 4, 3]


def test_new_capabilities_check_every_call_again() -> None:
    document = ScriptDocument(SCRIPT)
    reanalysed(document, CAPS)
    fewer = dataclasses.replace(CAPS, models=frozenset({"anthropic/opus"}), tools=frozenset({"grep"}))
    found = reanalysed(document, fewer)
    line = SCRIPT.split("\n")[1]
    assert ("UNKNOWN_MODEL", "Unknown model: openai/gpt", 1, line.index('"openai/gpt"')) in found
    assert ("UNKNOWN_TOOL", "Unknown tool: read", 1, line.index('"read"')) in found


def test_a_call_clean_for_preflight_is_still_checked_in_the_editor() -> None:
    """Preflight ignores missing credentials; the editor warns about them: verdicts are kept per mode."""
    caps = dataclasses.replace(CAPS, missing_credentials={"openai/gpt": "OPENAI_API_KEY"})
    document = ScriptDocument('await agent("a", { model: "openai/gpt" });\n')
    dialect, context = rule_context(document, caps, dialect=extensible.NAME, preflight=True)
    assert list(run_rules(dialect, context)) == []
    found = reanalysed(document, caps)
    assert [(code, line) for code, _, line, _ in found] == [("MISSING_CREDENTIALS", 0)]


def test_a_dynamic_role_reports_the_roles_no_earlier_call_brought_in_after_edits() -> None:
    """The role policy reaches across statements: it stays exact when a call before it appears."""
    caps = dataclasses.replace(
        CAPS,
        roles={
            "reviewer": RoleDefinition(prompt="Review.", model="openai/missing"),
            "scout": RoleDefinition(prompt="Scout.", tools=("read", "bash")),
        },
    )
    document = ScriptDocument('await agent("x", { role: args.role });\n')
    assert [message.split(" (")[0] for _, message, _, _ in reanalysed(document, caps)] == [
        "Unknown model for role reviewer: openai/missing",
        "Unknown tool for role scout: bash",
    ]
    document.apply_change(0, 0, 0, 0, 'await agent("y", { role: "reviewer" });\n')
    assert [(message.split(" (")[0], line) for _, message, line, _ in reanalysed(document, caps)] == [
        ("Unknown model for role reviewer: openai/missing", 0),
        ("Unknown tool for role scout: bash", 1),
    ]


def test_after_a_keystroke_only_the_edited_statements_calls_are_checked_again() -> None:
    lines = [f'const r{n} = await agent("task {n}", {{ model: "openai/gpt", tools: ["read"] }});' for n in range(200)]
    document = ScriptDocument("\n".join(lines) + "\n")
    reanalysed(document, CAPS)
    column = lines[100].index("task") + 4
    document.apply_change(100, column, 100, column, "!")
    dialect, context = rule_context(document, CAPS)
    rechecked = [call.base for _, calls in context.memo.unchecked(context.facts, "call-checks") for call in calls]
    assert rechecked == [document.index.offset_at(100, 0)]
    assert list(run_rules(dialect, context)) == []


STATEMENTS = [
    'await agent("a", { model: "openai/gpt", tools: ["read"] });',
    'await agent("b", { model: "openai/nope" });',
    'await agent("c", { model: "anthropic/opus" });',
    'await agent("d", { role: "reviewer" });',
    'await agent("e", { role: "scout", lable: "typo" });',
    'await agent("f", { role: args.role });',
    'await agent("g", { ...args.options });',
    'await agent("h", { tools: ["grep", "bash", ""] });',
    'const t = conversation("t", { role: "ghost" });',
    'await parallel("p", { x: () => agent("x", { thinking: "hgh" }) });',
    'await checkpoint({ name: "ok", promt: "?" });',
    'phase("one");',
    "log(1);",
]
ROLE_CAPS = dataclasses.replace(
    CAPS,
    missing_credentials={"anthropic/opus": "ANTHROPIC_API_KEY"},
    roles={
        "reviewer": RoleDefinition(prompt="Review.", model="openai/missing"),
        "scout": RoleDefinition(prompt="Scout.", tools=("read", "bash")),
    },
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["insert", "delete", "replace"]),
                       st.sampled_from(STATEMENTS)), max_size=6),
)
def test_statement_edits_keep_every_rule_exact(lines: list[str], edits: list[tuple[int, str, str]]) -> None:
    document = ScriptDocument("\n".join(lines) + "\n")
    reanalysed(document, ROLE_CAPS)
    for where, action, text in edits:
        line = min(where, document.index.line_count - 1)
        if action == "insert":
            document.apply_change(line, 0, line, 0, text + "\n")
        elif action == "delete" and document.index.line_count > 2:
            document.apply_change(line, 0, line + 1, 0, "")
        else:
            document.apply_change(line, 0, line + 1, 0, text + "\n")
        reanalysed(document, ROLE_CAPS)
