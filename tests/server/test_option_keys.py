"""Misspelled option keys: an editor-only warning with did-you-mean and a quick fix; hover for every key."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import PROFILES, Client, Workspace, diagnostics, open_document
from lsprotocol import types

from piflow import Capabilities, analyze, preflight
from piflow.analysis.option_keys import UNKNOWN_OPTION

SCRIPT = """const label = "kept";
const draft = await agent("Write", { lable: "writer", timeoutMS: 5000, "modle": "openai/gpt-4o" });
const more = await agent("More", { lable, wibble: 1 });
await checkpoint({ name: "ship", promt: "Ship?", context: null });
"""


def warnings(items: list[types.Diagnostic]) -> list[tuple[str, int, int, int]]:
    return sorted(
        (item.message, item.range.start.line, item.range.start.character, item.range.end.character)
        for item in items
        if item.code == UNKNOWN_OPTION
    )


@pytest.mark.parametrize("profile", PROFILES)
async def test_misspelled_keys_are_warnings_with_did_you_mean(start, workspace: Workspace, profile: str) -> None:
    client = await start(profile)
    uri = workspace.uri(workspace.write("typos.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    items = await diagnostics(client, profile, uri)
    assert warnings(items) == sorted([
        ("Unknown option 'lable' — did you mean 'label'?", 1, 37, 42),
        ("Unknown option 'timeoutMS' — did you mean 'timeoutMs'?", 1, 54, 63),
        ("Unknown option 'modle' — did you mean 'model'?", 1, 71, 78),
        ("Unknown option 'lable' — did you mean 'label'?", 2, 35, 40),
        ("Unknown option 'wibble' — the host passes it on unused; known: label, model, thinking, tools, role, "
         "outputSchema, retries, timeoutMs", 2, 42, 48),
        ("Unknown checkpoint field 'promt' — did you mean 'prompt'?", 3, 33, 38),
    ])
    assert {item.severity for item in items if item.code == UNKNOWN_OPTION} == {types.DiagnosticSeverity.Warning}


async def fixes_at(client: Client, uri: str, line: int, character: int) -> list[tuple[str, str]]:
    position = types.Position(line, character)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(uri), types.Range(position, position),
                               types.CodeActionContext(diagnostics=[]))
    )
    found = []
    for action in actions or []:
        assert isinstance(action, types.CodeAction) and action.edit is not None and action.edit.changes is not None
        (edit,) = action.edit.changes[uri]
        found.append((action.title, edit.new_text))
    return found


async def test_quick_fix_renames_the_key_keeping_quotes_and_shorthand_values(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("typos.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    await diagnostics(client, "vscode_1.95", uri)
    assert await fixes_at(client, uri, 1, 39) == [("Change to 'label'", "label")]
    assert await fixes_at(client, uri, 1, 73) == [("Change to 'model'", '"model"')]
    assert await fixes_at(client, uri, 2, 37) == [("Change to 'label'", "label: lable")]
    assert await fixes_at(client, uri, 3, 35) == [("Change to 'prompt'", "prompt")]


def test_the_lint_is_not_part_of_the_reference_preflight() -> None:
    """pi passes unknown agent options through: preflight (and so launch) must accept the script."""
    capabilities = Capabilities.from_json({"models": ["openai/gpt-4o"], "tools": [], "agentTypes": []})
    assert {finding.code for finding in analyze(SCRIPT, capabilities)} == {UNKNOWN_OPTION}
    assert preflight(SCRIPT, capabilities).to_json()["metadata"] == {"name": "workflow"}


def test_piflow_check_shows_the_warning_and_stays_clean(workspace: Workspace) -> None:
    path = workspace.write("typos.workflow.js", 'await agent("x", { lable: "a" });\n')
    done = subprocess.run(
        [sys.executable, "-m", "piflow", "check", str(path), "--format", "json"],
        env=workspace.env, cwd=workspace.project, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)["files"]
    assert [(f["code"], f["severity"], f["message"]) for f in report["findings"]] == [
        (UNKNOWN_OPTION, "warning", "Unknown option 'lable' — did you mean 'label'?")
    ]


HOVERED = """await agent("x", { label: "a", model: "fast", thinking: "low", tools: ["read"], retries: 1, timeoutMs: 9,
  outputSchema: { type: "object" } });
await checkpoint({ name: "ship", prompt: "Ship?", context: null });
"""


async def test_every_option_key_has_a_hover_with_its_type(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("hover.workflow.js", HOVERED))
    open_document(client, uri, HOVERED)
    lines = HOVERED.splitlines()
    expected = {
        "label": "(agent option) · `string`", "model": "(agent option) · `string`",
        "thinking": '(agent option) · `"off" | "minimal"', "tools": "(agent option) · `string[]`",
        "retries": "(agent option) · `number`", "timeoutMs": "(agent option) · `number | null`",
        "outputSchema": "(agent option) · `JSONSchema`", "name": "(checkpoint field) · `string`",
        "prompt": "(checkpoint field) · `string`", "context": "(checkpoint field) · `any (JSON)`",
    }
    for key, wanted in expected.items():
        line = next(number for number, text in enumerate(lines) if f"{key}:" in text)
        position = types.Position(line, lines[line].index(f"{key}:") + 1)
        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), position))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent), key
        assert hover.contents.value.startswith(f"**`{key}`** {wanted}"), hover.contents.value


async def test_checkpoint_fields_are_completed_from_the_same_table(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'await checkpoint({ name: "a", '
    uri = workspace.uri(workspace.write("complete.workflow.js", text))
    open_document(client, uri, text)
    result = await client.text_document_completion_async(
        types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(0, len(text)))
    )
    assert isinstance(result, types.CompletionList)
    assert [(item.label, item.detail) for item in result.items] == [
        ("name", "checkpoint field"), ("prompt", "checkpoint field"), ("context", "checkpoint field")
    ]
