"""`analyze()`: every finding of a document, on the range of the offending node."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from piflow import Capabilities, Finding, WorkflowError, analyze, preflight
from piflow.analysis import ScriptDocument, analyze_document
from piflow.analysis.dialects import detect_dialect
from piflow.analysis.dialects.subagents import validate_subagents_script
from piflow.analysis.expressions import Expr, LiteralExpr
from piflow.analysis.facts import SyntaxIssue
from piflow.analysis.records import record
from piflow.config.roles import RoleDefinition

C0 = Capabilities.create(models=["openai/gpt"], tools=["read"], agent_types=["reviewer"])
ALIASED = Capabilities.create(
    models=["openai/gpt"], tools=["read"], agent_types=["reviewer"], model_aliases={"fast": "openai/gpt-mini"}
)
UNVERIFIED = Capabilities.create(tools=["read"], agent_types=["reviewer"], verified_models=False)


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def span(text: str, finding: Finding) -> str:
    """The text a finding's range covers (ranges carry UTF-16 offsets into the whole text)."""
    encoded = text.encode("utf-16-le")
    return encoded[finding.range.start_offset * 2 : finding.range.end_offset * 2].decode("utf-16-le")


def summary(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(finding.code, finding.message) for finding in findings]


# -- one test per rule: its finding and its range --------------------------------------------------------


def test_syntax_error_is_reported_on_the_unexpected_token() -> None:
    finding = only(analyze("const x = ;", C0))
    assert (finding.code, finding.message) == ("INVALID_SYNTAX", "Invalid workflow syntax: Unexpected token (1:10)")
    assert (finding.range.start.line, finding.range.start.character) == (0, 10)


def test_compile_mode_uses_the_reference_parser_message() -> None:
    finding = only(analyze("let a = 1; let a = 2;", C0, compile=True))
    assert finding.message == "Invalid workflow syntax: Identifier 'a' has already been declared (1:15)"
    assert span("let a = 1; let a = 2;", finding) == "a"


def test_blank_script_is_invalid() -> None:
    finding = only(analyze("  \n", C0))
    assert finding.message == "Workflow script must be non-empty"


def test_reserved_identifier_range() -> None:
    text = "const v = args.__pi_extensible_workflows_agent;"
    finding = only(analyze(text, C0))
    assert finding.message == "__pi_extensible_workflows_agent is reserved for workflow agent instrumentation"
    assert span(text, finding) == "__pi_extensible_workflows_agent"


def test_indirect_with_worktree_range() -> None:
    text = "const alias = withWorktree;"
    finding = only(analyze(text, C0))
    assert finding.code == "INVALID_METADATA" and span(text, finding) == "withWorktree"


def test_conversation_name_must_be_a_literal() -> None:
    text = "conversation(name)"
    finding = only(analyze(text, C0))
    assert finding.message == "conversation requires a stable name and optional options object"
    assert span(text, finding) == "name"


@pytest.mark.parametrize(
    ("options", "message", "covered"),
    [
        ('{ label: " " }', "agent label must be a non-empty string", '" "'),
        ("{ model: null }", "agent model must be a non-empty string", "null"),
        (
            '{ thinking: "hihg" }',
            'agent thinking must be off, minimal, low, medium, high, xhigh, or max (got "hihg")',
            '"hihg"',
        ),
        ('{ tools: "read" }', "agent tools must be an array of strings", '"read"'),
        ('{ role: "" }', "agent role must be a non-empty string", '""'),
        ("{ outputSchema: [] }", "agent outputSchema must be a plain JSON-compatible Schema object", "[]"),
        ("{ retries: -1 }", "agent retries must be a non-negative integer", "-1"),
        ("{ timeoutMs: 0 }", "agent timeoutMs must be null or a positive integer", "0"),
    ],
)
def test_agent_option_checks_point_at_the_value(options: str, message: str, covered: str) -> None:
    text = f'agent("x", {options});'
    finding = only(analyze(text, C0))
    assert finding.message == message
    assert span(text, finding) == covered


def test_thinking_typo_offers_the_level() -> None:
    finding = only(analyze('agent("x", { thinking: "hihg" })', C0))
    assert finding.fix is not None and finding.fix[0].edits[0].new_text == "high"


def test_role_conflict_points_at_model_and_offers_removal() -> None:
    text = 'agent("x", { role: "reviewer", model: "openai/gpt", thinking: "low" });'
    finding = only(analyze(text, C0))
    assert finding.message == "Role agents must not specify model, thinking, or tools"
    assert span(text, finding) == 'model: "openai/gpt"'
    assert finding.related is not None and span(text, finding) != ""
    assert finding.fix is not None
    edits = sorted(finding.fix[0].edits, key=lambda edit: edit.range.start_offset, reverse=True)
    fixed = text
    for edit in edits:
        fixed = fixed[: edit.range.start_offset] + edit.new_text + fixed[edit.range.end_offset :]
    assert fixed == 'agent("x", { role: "reviewer" });'
    assert analyze(fixed, C0) == []


def test_with_worktree_shape() -> None:
    text = 'withWorktree("", () => 1); withWorktree("n", 1); withWorktree();'
    assert summary(analyze(text, C0)) == [
        ("INVALID_METADATA", "withWorktree name must be a non-empty string"),
        ("INVALID_METADATA", "withWorktree callback must be a function"),
        ("INVALID_METADATA", "withWorktree requires a callback or a name and callback"),
    ]


def test_checkpoint_needs_a_stable_name() -> None:
    text = 'checkpoint({ prompt: "ship?", context: null })'
    finding = only(analyze(text, C0))
    assert finding.message == "checkpoint requires a stable explicit name"
    assert span(text, finding) == '{ prompt: "ship?", context: null }'


def test_parallel_and_pipeline_shapes_cover_the_call() -> None:
    text = 'parallel("b", tasks);\npipeline("p", {a: 1});'
    first, second = analyze(text, C0)
    assert span(text, first) == 'parallel("b", tasks)'
    assert second.message == "pipeline requires an operation name string, items record, and stages record"
    assert second.range.start.line == 1


def test_unknown_model_with_did_you_mean() -> None:
    text = 'agent("x", { model: "openai/gtp" })'
    finding = only(analyze(text, C0))
    assert (finding.code, finding.message) == ("UNKNOWN_MODEL", "Unknown model: openai/gtp")
    assert span(text, finding) == '"openai/gtp"'
    assert finding.fix is not None and finding.fix[0].edits[0].new_text == "openai/gpt"
    assert span(text, Finding("", "", "hint", finding.fix[0].edits[0].range)) == "openai/gtp"


def test_unknown_alias_target_names_the_alias() -> None:
    finding = only(analyze('agent("x", { model: "fast" })', ALIASED))
    assert finding.message == "Unknown model alias fast resolved to openai/gpt-mini"


def test_models_cannot_be_verified_without_a_registry() -> None:
    finding = only(analyze('agent("a", { model: "openai/gpt" })', UNVERIFIED))
    assert finding.severity == "information"
    assert finding.message == "Cannot verify model openai/gpt: no model registry is configured"


def test_a_bare_id_without_a_registry_is_an_error_as_the_launch_refuses_it() -> None:
    finding = only(analyze('agent("b", { model: "gpt" })', UNVERIFIED))
    assert finding.severity == "error"
    assert finding.message == (
        "Unknown model gpt: not a model alias, and no model registry (models.json) to resolve a bare id"
    )


def test_invalid_model_spec_stays_an_error_without_a_registry() -> None:
    finding = only(analyze('agent("a", { model: "openai/gpt:turbo" })', UNVERIFIED))
    assert (finding.severity, finding.message) == ("error", "Invalid thinking level: turbo")


def test_unknown_tool_and_role() -> None:
    text = 'agent("a", { tools: ["read", "reed", "bash"] }); agent("b", { role: "reviwer" });'
    findings = analyze(text, C0)
    assert summary(findings) == [
        ("UNKNOWN_TOOL", "Unknown tool: reed"),
        ("UNKNOWN_TOOL", "Unknown tool: bash"),
        ("UNKNOWN_AGENT_TYPE", "Unknown agent type: reviwer"),
    ]
    assert [span(text, finding) for finding in findings] == ['"reed"', '"bash"', '"reviwer"']
    assert findings[0].fix is not None and findings[0].fix[0].edits[0].new_text == "read"
    assert findings[2].fix is not None and findings[2].fix[0].edits[0].new_text == "reviewer"


def test_meta_header_with_invalid_metadata_is_a_warning() -> None:
    text = 'export const meta = { name: "" };\nreturn 1;'
    finding = only(analyze(text, C0))
    assert (finding.severity, finding.message) == ("warning", "Workflow metadata requires a non-empty name")
    assert span(text, finding) == '{ name: "" }'


# -- whole documents ------------------------------------------------------------------------------------


def test_several_errors_in_reference_order() -> None:
    text = (
        "const a = withWorktree;\n"
        'agent("x", { tools: ["bash"] });\n'
        'agent("y", { model: "openai/nope" });\n'
        "__pi_extensible_workflows_agent;\n"
        "checkpoint();\n"
    )
    assert [finding.code for finding in analyze(text, C0)] == [
        "INVALID_METADATA",  # reserved identifier (step 3)
        "INVALID_METADATA",  # indirect withWorktree (step 4)
        "INVALID_METADATA",  # checkpoint name (step 6)
        "UNKNOWN_MODEL",  # availability (step 10)
        "UNKNOWN_TOOL",  # tools (step 11)
    ]


def test_rules_still_run_beside_a_syntax_error() -> None:
    text = 'agent("a", { role: "writer" });\nconst broken = ;\nagent("b", { tools: ["bash"] });\n'
    findings = analyze(text, C0)
    assert summary(findings) == [
        ("INVALID_SYNTAX", "Invalid workflow syntax: Unexpected token (2:15)"),
        ("UNKNOWN_TOOL", "Unknown tool: bash"),
        ("UNKNOWN_AGENT_TYPE", "Unknown agent type: writer"),
    ]


def test_several_syntax_errors_are_all_reported() -> None:
    findings = analyze('const a = ;\nagent("x");\nconst b = ;\n', C0)
    assert [finding.range.start.line for finding in findings] == [0, 2]


def test_utf16_columns_with_non_ascii_and_emoji() -> None:
    text = 'const é = "😀😀"; agent("ü", { model: "nope/x" });'
    finding = only(analyze(text, C0))
    assert span(text, finding) == '"nope/x"'
    assert finding.range.start.character == text.index('"nope/x"') + 2  # two astral chars: +1 unit each


def test_crlf_line_endings() -> None:
    text = 'phase("a");\r\nagent("x", { role: "writer" });\r\n'
    finding = only(analyze(text, C0))
    assert (finding.range.start.line, finding.range.start.character) == (1, 19)


def test_empty_file() -> None:
    assert summary(analyze("", C0)) == [("INVALID_SYNTAX", "Workflow script must be non-empty")]


def test_incremental_edits_match_a_full_parse() -> None:
    text = 'phase("a");\nagent("x", { model: "openai/gpt" });\nconst é = "😀";\nagent("y", { role: "reviewer" });\n'
    document = ScriptDocument(text)
    edits = [
        (1, 28, 1, 31, "xyz"),  # model -> openai/xyz (unknown)
        (3, 20, 3, 20, "!"),  # role -> "!reviewer" (unknown)
        (2, 12, 2, 13, "😀😀"),  # astral text in the middle
        (0, 0, 0, 0, "const broken = ;\n"),  # a syntax error at the top
        (0, 0, 1, 0, ""),  # and removed again
    ]
    for start_line, start_char, end_line, end_char, new_text in edits:
        document.apply_change(start_line, start_char, end_line, end_char, new_text)
        assert analyze_document(document, C0) == analyze(document.text, C0)
    assert 'model: "openai/xyz"' in document.text and '"😀😀' in document.text


# -- pi-subagents ---------------------------------------------------------------------------------------


def test_dialect_detection() -> None:
    assert detect_dialect(b"// piflow: pi-subagents\nreturn 1").name == "pi-subagents"
    assert detect_dialect(b'await runs.run("a", {agent: "w", task: "t"})').name == "pi-subagents"
    assert detect_dialect(b'await runs.run("a", {}); await agent("x")').name == "pi-extensible-workflows"
    with pytest.raises(ValueError):
        detect_dialect(b"", "nope")


def test_subagents_findings_use_their_own_codes() -> None:
    text = "const helper = async () => runs.run('bad key!', { agent: 'w', task: 't', onDone: () => 1 });"
    codes = [finding.code for finding in analyze(text, C0, dialect="pi-subagents")]
    assert codes == ["SUBAGENTS_NESTED_ASYNC", "SUBAGENTS_KEY", "SUBAGENTS_PARAMS"]


def test_subagents_validate_reports_line_and_column() -> None:
    result = validate_subagents_script("const a = 1;\nreturn a +;")
    assert result == {"ok": False, "errors": [{"message": "Unexpected token", "line": 2, "column": 11}]}
    assert validate_subagents_script("return runs.run('main', { agent: 'worker', task: 'Do it' })") == {
        "ok": True,
        "errors": [],
    }


def test_subagents_runtime_literal_checks() -> None:
    text = (
        "await runs.run('a', { resume: 'abc', agent: 'w', task: 'again' });\n"
        "await runs.steer('a', 'guide', { mode: 'later' });\n"
        "runs.run('b', { agent: 'w', task: 't' });\n"
    )
    assert [(finding.code, finding.severity) for finding in analyze(text, C0, dialect="pi-subagents")] == [
        ("SUBAGENTS_CHILD", "error"),
        ("SUBAGENTS_STEER", "error"),
        ("SUBAGENTS_UNAWAITED", "warning"),
    ]


# -- facts are records: dataclass equality, hash, signature and slots, frozen for mypy (records.record) ----


def test_records_keep_dataclass_semantics() -> None:
    issue = SyntaxIssue(1, 2, "Unexpected token")
    assert issue == SyntaxIssue(1, 2, "Unexpected token", "acorn", None, False)
    assert issue != SyntaxIssue(1, 2, "Unexpected token", "v8")
    assert hash(issue) == hash(SyntaxIssue(start=1, end=2, message="Unexpected token"))
    parameters = inspect.signature(SyntaxIssue).parameters.values()
    assert [(parameter.name, parameter.default) for parameter in parameters] == [
        ("start", inspect.Parameter.empty),
        ("end", inspect.Parameter.empty),
        ("message", inspect.Parameter.empty),
        ("engine", "acorn"),
        ("at", None),
        ("strict_only", False),
    ]
    with pytest.raises(AttributeError):  # slotted: no attribute beyond the fields
        issue.note = "x"  # type: ignore[attr-defined]
    literal = LiteralExpr("string", 0, 3, "a")
    assert (literal.kind, literal.start, literal.end, literal.value) == ("string", 0, 3, "a")
    assert literal != Expr("string", 0, 3)  # (equality includes the class, as dataclasses compare)
    assert vars(record)["__dataclass_transform__"]["kwargs"] == {"frozen_default": True}  # (mypy: fields read-only)


# -- will it run? (availability with credentials, role policy, quick fixes) --------------------------------

KEYLESS = Capabilities.create(
    models=["openai/gpt", "anthropic/opus"],
    tools=["read"],
    known_models=["openai/gpt", "anthropic/opus"],
    missing_credentials={"anthropic/opus": "ANTHROPIC_API_KEY"},
)
KEYED = dataclasses.replace(KEYLESS, models=frozenset({"openai/gpt"}))


def test_a_model_without_its_key_is_a_warning_naming_the_variable_where_the_backend_needs_none() -> None:
    finding = only(analyze('agent("x", { model: "anthropic/opus" })', KEYLESS))
    assert (finding.code, finding.severity) == ("MISSING_CREDENTIALS", "warning")
    assert "ANTHROPIC_API_KEY is not set" in finding.message


def test_a_model_without_its_key_is_an_error_naming_the_variable_where_the_backend_needs_it() -> None:
    finding = only(analyze('agent("x", { model: "anthropic/opus" })', KEYED))
    assert (finding.code, finding.severity) == ("UNKNOWN_MODEL", "error")
    assert "ANTHROPIC_API_KEY is not set" in finding.message


def test_preflight_keeps_the_reference_message_for_a_model_without_its_key() -> None:
    with pytest.raises(WorkflowError) as caught:
        preflight('agent("x", { model: "anthropic/opus" })', KEYED)
    assert caught.value.message == "Unknown model: anthropic/opus"


def role(model: str | None = None, tools: tuple[str, ...] | None = None) -> RoleDefinition:
    return RoleDefinition(prompt="Work.", model=model, tools=tools)


def test_a_role_whose_model_is_unavailable_is_flagged_where_the_role_is_used() -> None:
    caps = dataclasses.replace(KEYED, agent_types=frozenset({"reviewer"}), roles={"reviewer": role("anthropic/opus")})
    text = 'agent("x", { role: "reviewer" })'
    finding = only(analyze(text, caps))
    assert (finding.code, finding.message) == ("UNKNOWN_MODEL", "Unknown model for role reviewer: anthropic/opus")
    assert span(text, finding) == '"reviewer"'


def test_a_role_with_a_tool_outside_the_session_is_flagged() -> None:
    caps = dataclasses.replace(C0, roles={"reviewer": role(tools=("read", "bash"))})
    finding = only(analyze('agent("x", { role: "reviewer" })', caps))
    assert (finding.code, finding.message) == ("UNKNOWN_TOOL", "Unknown tool for role reviewer: bash")


def test_a_dynamic_role_flags_every_role_the_launch_will_check() -> None:
    caps = dataclasses.replace(
        KEYED, agent_types=frozenset({"ok", "bad"}), roles={"ok": role("openai/gpt"), "bad": role("anthropic/opus")}
    )
    finding = only(analyze('agent("x", { role: args.role })', caps))
    assert finding.message.startswith("Unknown model for role bad: anthropic/opus (a dynamic role")


def test_a_role_model_running_without_its_key_is_a_warning() -> None:
    caps = dataclasses.replace(KEYLESS, agent_types=frozenset({"reviewer"}), roles={"reviewer": role("anthropic/opus")})
    finding = only(analyze('agent("x", { role: "reviewer" })', caps))
    assert (finding.code, finding.severity) == ("MISSING_CREDENTIALS", "warning")


def test_quick_fixes_never_offer_the_current_value_or_an_unavailable_model() -> None:
    caps = Capabilities.create(
        models=["openai/gpt"],
        known_models=["openai/gpt", "openai/gpt-4"],
        model_aliases={"gpt4": "openai/gpt-4", "gpt5": "openai/gpt"},
    )
    finding = only(analyze('agent("x", { model: "gpt4" })', caps))
    assert finding.message == "Unknown model alias gpt4 resolved to openai/gpt-4"
    offered = [fix.edits[0].new_text for fix in finding.fix or ()]
    assert offered and "gpt4" not in offered and "gpt-4" not in offered and "openai/gpt-4" not in offered
    assert set(offered) <= {"gpt5", "openai/gpt", "gpt"}
