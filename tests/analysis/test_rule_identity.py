"""Stable rule identities, and editor-only rules that never make a preflight or a launch fail."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from piflow.analysis import Capabilities, analyze, preflight
from piflow.analysis.dialects import dialect, dialect_names, extensible, subagents
from piflow.analysis.dialects.subagents import validate_subagents_script
from piflow.analysis.launch import LaunchContext, validate_workflow_launch
from piflow.analysis.report import FileReport, format_json, format_sarif
from piflow.config.agent_definitions import AgentCatalog
from piflow.config.roles import RoleDefinition

KEBAB = re.compile(r"^[a-z]+(?:-[a-z]+)*$")
DIALECTS = {name: dialect(name) for name in dialect_names()}
CAPABILITIES = Capabilities.create(
    models=["openai/gpt-4o"],
    tools=["read"],
    agent_types=["reviewer"],
    roles={"reviewer": RoleDefinition("You review.", model="openai/gone")},
    agents=AgentCatalog({}),  # no pi-subagents agents: every agent name is unknown
)

# Scripts that trigger each editor-only rule and are otherwise clean for the reference.
EDITOR_ONLY: dict[tuple[str, str], str] = {
    (extensible.NAME, "meta-header"): 'export const meta = { name: 5 };\nawait agent("x");',
    (extensible.NAME, "role-policy"): 'await agent("x", { role: "reviewer" });',
    (extensible.NAME, "option-keys"): 'await agent("x", { colour: "red" });',
    (subagents.NAME, "child-params"): 'await runs.run("a", { agent: "scout", task: "t", resume: true });',
    (subagents.NAME, "steer"): 'await runs.steer("a", "");',
    (subagents.NAME, "unawaited"): 'runs.run("a", { agent: "scout", task: "t" });\nawait runs.run("b", {});',
    (subagents.NAME, "duplicate-keys"): 'await runs.run("a", { task: "1" });\nawait runs.run("a", { task: "2" });',
    (subagents.NAME, "all-shape"): 'await runs.all("x");',
    (subagents.NAME, "lanes"): "await runs.lanes([]);",
    (subagents.NAME, "non-finite"): "emit(NaN);",
    (subagents.NAME, "steer-launched"): 'await runs.steer("never", "g");',
    (subagents.NAME, "agents"): 'await runs.run("a", { agent: "nobody", task: "t" });',
    (subagents.NAME, "models"): 'await runs.run("a", { agent: "worker", task: "t", model: "gone/model" });',
    (subagents.NAME, "workflow-fields"): '// piflow: pi-subagents {"timeoutMs": 0}\nemit(1);',
}


def all_rule_ids(dialect: str) -> list[str]:
    ids = [rule.id for rule in DIALECTS[dialect].rules]
    if dialect == extensible.NAME:
        ids += [rule_id for rule_id, _kinds, _check in extensible.CALL_RULES]
    return ids


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_rule_ids_are_kebab_case_and_unique_in_their_dialect(dialect: str) -> None:
    ids = all_rule_ids(dialect)
    assert all(KEBAB.match(rule_id) for rule_id in ids), ids
    assert len(ids) == len(set(ids))


def test_every_editor_only_rule_has_a_case_here() -> None:
    registered = {(name, rule.id) for name, dialect in DIALECTS.items() for rule in dialect.rules if not rule.reference}
    assert registered == set(EDITOR_ONLY)


@pytest.mark.parametrize(("dialect", "rule"), list(EDITOR_ONLY))
def test_editor_only_rule_reports_in_the_editor_but_never_fails_the_reference(dialect: str, rule: str) -> None:
    script = EDITOR_ONLY[dialect, rule]
    findings = analyze(script, CAPABILITIES, dialect)
    assert rule in {finding.rule for finding in findings}
    if dialect == subagents.NAME:
        assert validate_subagents_script(script)["ok"] is True
    else:
        preflight(script, CAPABILITIES)


@pytest.mark.parametrize("rule", ["meta-header", "option-keys"])
def test_editor_only_lint_never_fails_a_launch(rule: str, tmp_path: Path) -> None:
    """(role-policy reports, at the `role:`, exactly what the launch refuses: it is the launch's own check.)"""
    context = LaunchContext(
        cwd=str(tmp_path),
        available_models=frozenset({"openai/gpt-4o"}),
        root_tools=frozenset({"read"}),
        agent_dir=tmp_path / "agent",
    )
    checked = validate_workflow_launch({"script": EDITOR_ONLY[extensible.NAME, rule], "name": "t"}, context)
    assert checked.script == EDITOR_ONLY[extensible.NAME, rule]


def test_findings_name_their_rule_per_call_check_included() -> None:
    script = 'await agent("x", { model: "nope/x", retries: -1 });\nawait parallel("p", 5);\nagent("y", { colour: 1 });'
    by_rule = {(finding.rule, finding.code) for finding in analyze(script, CAPABILITIES)}
    assert by_rule >= {
        ("agent-options", "INVALID_METADATA"),
        ("parallel-shape", "INVALID_METADATA"),
        ("model-availability", "UNKNOWN_MODEL"),
        ("option-keys", "UNKNOWN_OPTION"),
    }


def test_check_json_and_sarif_carry_the_rule() -> None:
    findings = tuple(analyze('await agent("y", { colour: 1 });', CAPABILITIES))
    report = FileReport("a.workflow.js", extensible.NAME, findings)
    [finding] = json.loads(format_json([report]))["files"][0]["findings"]
    assert (finding["code"], finding["rule"]) == ("UNKNOWN_OPTION", "option-keys")
    [result] = json.loads(format_sarif([report], "0"))["runs"][0]["results"]
    assert (result["ruleId"], result["properties"]) == ("UNKNOWN_OPTION", {"rule": "option-keys"})


def test_docs_list_every_rule_with_its_kind() -> None:
    """docs/rules.md has one row per rule, under its dialect, saying reference or editor."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "rules.md").read_text(encoding="utf-8")
    documented: set[tuple[str, str, bool]] = set()
    for section in text.split("\n## ")[1:]:
        dialect = section.splitlines()[0].strip()
        for rule_id, kind in re.findall(r"^\| `([a-z-]+)` \| (reference|editor) \|", section, re.MULTILINE):
            documented.add((dialect, rule_id, kind == "reference"))
    registered = {(name, rule.id, rule.reference) for name, dialect in DIALECTS.items() for rule in dialect.rules}
    registered |= {(extensible.NAME, rule_id, True) for rule_id, _kinds, _check in extensible.CALL_RULES}
    assert documented == registered
