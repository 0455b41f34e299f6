"""Diagnostics: every rule family on its exact range, pushed or pulled as each editor prefers."""

from __future__ import annotations

import json

import pytest
from conftest import (
    PROFILES,
    Client,
    Workspace,
    change_document,
    diagnostics,
    open_document,
    published,
    pulled,
    spans,
)
from lsprotocol import types

FAMILIES = """const __pi_extensible_workflows_agent = 1;
await agent("a", { model: "openai/gtp-4o" });
await agent("b", { model: "gone" });
await agent("c", { model: "a b/c" });
await agent("d", { tools: ["read", "bsh"] });
await agent("e", { role: "reviewr" });
await agent("f", { role: "reviewer", model: "openai/gpt-4o", tools: ["read"] });
await agent("g", { thinking: "extreme", retries: -1, timeoutMs: 0, label: " " });
await agent("h", { outputSchema: { properties: {} } });
await parallel("", { a: () => 1 });
await pipeline("p", { a: 1 }, stages);
await checkpoint({ prompt: "x", context: null });
const w = withWorktree;
conversation(name);
"""

EXPECTED = [
    ("INVALID_METADATA", (0, 6, 0, 37)),  # reserved instrumentation identifier
    ("UNKNOWN_MODEL", (1, 26, 1, 41)),  # unknown provider/model
    ("UNKNOWN_MODEL", (2, 26, 2, 32)),  # alias to an unavailable model
    ("UNKNOWN_MODEL", (3, 26, 3, 33)),  # invalid model spec
    ("UNKNOWN_TOOL", (4, 35, 4, 40)),
    ("UNKNOWN_AGENT_TYPE", (5, 25, 5, 34)),
    ("INVALID_METADATA", (6, 37, 6, 59)),  # model/tools beside a role
    ("INVALID_METADATA", (7, 29, 7, 38)),  # thinking
    ("INVALID_METADATA", (7, 49, 7, 51)),  # retries
    ("INVALID_METADATA", (7, 64, 7, 65)),  # timeoutMs
    ("INVALID_METADATA", (7, 74, 7, 77)),  # label
    ("INVALID_SCHEMA", (8, 33, 8, 51)),
    ("INVALID_METADATA", (9, 6, 9, 34)),  # parallel shape
    ("INVALID_METADATA", (10, 6, 10, 37)),  # pipeline shape
    ("INVALID_METADATA", (11, 17, 11, 47)),  # checkpoint name
    ("INVALID_METADATA", (12, 10, 12, 22)),  # aliased withWorktree
    ("INVALID_METADATA", (13, 13, 13, 17)),  # conversation name
]


@pytest.fixture
def gone_alias(workspace: Workspace) -> None:
    settings = json.loads(workspace.settings_path.read_text())
    settings["modelAliases"]["gone"] = "anthropic/opus"
    workspace.settings_path.write_text(json.dumps(settings, indent=2) + "\n")


@pytest.mark.parametrize("profile", PROFILES)
async def test_every_rule_family_is_reported_at_once_on_its_exact_range(
    start, workspace: Workspace, gone_alias: None, profile: str
) -> None:
    client = await start(profile)
    uri = workspace.uri(workspace.write("families.workflow.js", FAMILIES))
    open_document(client, uri, FAMILIES)
    items = await diagnostics(client, profile, uri)
    assert spans(items) == sorted(EXPECTED)
    assert {item.source for item in items} == {"piflow"}
    assert {item.severity for item in items} == {types.DiagnosticSeverity.Error}
    alias = next(item for item in items if item.range.start.line == 2)
    assert alias.message.startswith("Unknown model alias gone resolved to anthropic/opus (settings: ")


@pytest.mark.parametrize(("profile", "start_column", "end_column"), [("vscode_1.95", 28, 43), ("neovim_0.11", 31, 46)])
async def test_ranges_count_in_the_negotiated_encoding(
    start, workspace: Workspace, profile: str, start_column: int, end_column: int
) -> None:
    """UTF-16 code units for VS Code; UTF-8 bytes for Neovim, which offers them."""
    text = 'await agent("é😀", { model: "openai/gtp-4o" });\n'
    client = await start(profile)
    uri = workspace.uri(workspace.write("wide.workflow.js", text))
    open_document(client, uri, text)
    items = await diagnostics(client, profile, uri)
    assert spans(items) == [("UNKNOWN_MODEL", (0, start_column, 0, end_column))]


@pytest.mark.parametrize(("name", "language_id"), [("plain.flow.js", "javascript"), ("nvim.js", "javascript.piflow")])
async def test_scripts_are_known_by_name_language_or_project_globs(
    start, workspace: Workspace, name: str, language_id: str
) -> None:
    """`*.workflow.js`, the plugins' language ids, and piflow.toml's `scripts` globs (for any client)."""
    (workspace.project / "piflow.toml").write_text('[piflow]\nscripts = ["**/*.workflow.js", "**/*.flow.js"]\n')
    client = await start("neovim_0.11")
    text = 'await agent("x", { role: "nobody" });\n'
    uri = workspace.uri(workspace.write(name, text))
    open_document(client, uri, text, language_id=language_id)
    assert spans(await published(client, uri)) == [("UNKNOWN_AGENT_TYPE", (0, 25, 0, 33))]


async def test_unknown_models_are_information_without_a_model_registry(start, workspace: Workspace) -> None:
    (workspace.agent / "models.json").unlink()
    client = await start("neovim_0.11")
    text = 'await agent("x", { model: "openai/whatever" });\n'
    uri = workspace.uri(workspace.write("unverified.workflow.js", text))
    open_document(client, uri, text)
    (item,) = await published(client, uri)
    assert item.severity == types.DiagnosticSeverity.Information
    assert item.code == "UNKNOWN_MODEL"


async def test_syntax_errors_from_tree_sitter_while_typing_and_the_engine_compile_on_open(
    start, workspace: Workspace
) -> None:
    """A duplicate capture group is an early error only the engine compile finds (on open and save)."""
    text = 'agent("x");\nlet v = /(?<a>x)(?<a>y)/;\n'
    client = await start("neovim_0.11")
    uri = workspace.uri(workspace.write("early.workflow.js", text))
    open_document(client, uri, text)
    params = await client.expect(
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == uri and len(p.diagnostics) == 1
    )
    (item,) = params.diagnostics
    assert item.code == "INVALID_SYNTAX"
    assert "Duplicate capture group name" in item.message
    assert (item.range.start.line, item.range.start.character) == (1, 9)


async def test_pull_reports_are_unchanged_for_the_same_result_id(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'await agent("x", { role: "nobody" });\n'
    uri = workspace.uri(workspace.write("pull.workflow.js", text))
    open_document(client, uri, text)
    first = await pulled(client, uri)
    assert isinstance(first, types.RelatedFullDocumentDiagnosticReport)
    if not first.result_id.endswith(".1"):  # the engine compile's verdict follows: the server asks to pull again
        await client.expect(types.WORKSPACE_DIAGNOSTIC_REFRESH)
        first = await pulled(client, uri, first.result_id)
        assert isinstance(first, types.RelatedFullDocumentDiagnosticReport)
    assert spans(list(first.items)) == [("UNKNOWN_AGENT_TYPE", (0, 25, 0, 33))]
    again = await pulled(client, uri, first.result_id)
    assert isinstance(again, types.RelatedUnchangedDocumentDiagnosticReport)
    assert again.result_id == first.result_id


async def test_quick_edits_never_publish_an_older_version_after_a_newer_one(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    text = 'await agent("x", { role: "reviewer" });\n'
    uri = workspace.uri(workspace.write("typing.workflow.js", text))
    open_document(client, uri, text)
    await published(client, uri)
    mark = len(client.log)
    for version, letter in enumerate("nobody", start=2):  # "reviewer" → "reviewernobody", one letter at a time
        change_document(client, uri, version, [((0, 34 + version - 2, 0, 34 + version - 2), letter)])
    await client.expect(
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        lambda p: p.uri == uri and [d.message for d in p.diagnostics] == ["Unknown agent type: reviewernobody"],
        after=mark,
    )
    shown = [p.diagnostics[0].message for m, p in client.log[mark:] if m == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]
    assert shown == sorted(shown, key=len)  # typing order: each publication at least as new as the one before


async def test_broken_configuration_shows_on_the_script(start, workspace: Workspace) -> None:
    (workspace.roles / "broken.md").write_text("---\ntools: read\n---\nbody\n")
    client = await start("neovim_0.11")
    text = 'await agent("x");\n'
    uri = workspace.uri(workspace.write("config.workflow.js", text))
    open_document(client, uri, text)
    (item,) = await published(client, uri)
    assert item.code == "INVALID_METADATA"
    assert "Role tools must be an array of non-empty strings" in item.message
    assert item.range.start.line == 0


async def _revalidated(client: Client, profile: str, uri: str, mark: int) -> list[types.Diagnostic]:
    if profile == "neovim_0.11":
        return await published(client, uri, after=mark)
    await client.expect(types.WORKSPACE_DIAGNOSTIC_REFRESH, after=mark)
    report = await pulled(client, uri)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
    return list(report.items)


@pytest.mark.parametrize("profile", ["vscode_1.95", "neovim_0.11"])
async def test_open_scripts_are_checked_again_when_settings_change(start, workspace: Workspace, profile: str) -> None:
    """VS Code watches the files for the server (a dynamic registration); Neovim 0.11 cannot, so the server polls."""
    client = await start(profile)
    text = 'await agent("x", { model: "cheap" });\n'
    uri = workspace.uri(workspace.write("alias.workflow.js", text))
    open_document(client, uri, text)
    assert spans(await diagnostics(client, profile, uri)) == [("UNKNOWN_MODEL", (0, 26, 0, 33))]
    if profile == "vscode_1.95":
        registration = await client.expect(types.CLIENT_REGISTER_CAPABILITY)
        assert registration.registrations[0].method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    mark = len(client.log)  # at once: a change made any time after the configuration was read is seen
    settings = json.loads(workspace.settings_path.read_text())
    settings["modelAliases"]["cheap"] = "openai/gpt-4o-mini"
    workspace.settings_path.write_text(json.dumps(settings) + "\n")
    if profile == "vscode_1.95":
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                [types.FileEvent(workspace.uri(workspace.settings_path), types.FileChangeType.Changed)]
            )
        )
    assert await _revalidated(client, profile, uri, mark) == []


async def test_settings_file_errors_point_at_the_offending_key(start, workspace: Workspace) -> None:
    text = '{\n  "concurrency": 0,\n  "modelAliases": {}\n}\n'
    workspace.settings_path.write_text(text)
    client = await start("neovim_0.11")
    uri = workspace.uri(workspace.settings_path)
    open_document(client, uri, text, language_id="json")
    (item,) = await published(client, uri)
    assert item.code == "INVALID_SETTINGS"
    assert item.message == f"{workspace.settings_path}.concurrency must be an integer from 1 to 16"
    assert (item.range.start.line, item.range.start.character, item.range.end.character) == (1, 17, 18)


async def test_settings_json_syntax_errors_show_while_typing(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    uri = workspace.uri(workspace.settings_path)
    text = workspace.settings_path.read_text()
    open_document(client, uri, text, language_id="json")
    assert await published(client, uri) == []
    mark = len(client.log)
    change_document(client, uri, 2, [((0, 1, 0, 1), "}")])
    (item,) = await published(client, uri, after=mark)
    assert item.code == "CONFIG_ERROR"
    assert item.message.startswith(f"Invalid workflow settings JSON at {workspace.settings_path}: ")


async def test_role_files_are_checked_as_typed(start, workspace: Workspace) -> None:
    text = "---\ndescription: Reviews\ntools: read\n---\nYou review.\n"
    client = await start("neovim_0.11")
    uri = workspace.uri(workspace.roles / "sloppy.md")
    open_document(client, uri, text, language_id="markdown")
    (item,) = await published(client, uri)
    assert item.code == "INVALID_METADATA"
    assert item.message == "Role tools must be an array of non-empty strings"
    assert item.range.start.line == 2


async def test_piflow_toml_errors_carry_their_line(start, workspace: Workspace) -> None:
    text = '[piflow]\nbackend = "scripted"\ncolour = "blue"\n'
    path = workspace.project / "piflow.toml"
    path.write_text(text)
    client = await start("neovim_0.11")
    uri = workspace.uri(path)
    open_document(client, uri, text, language_id="toml")
    items = await published(client, uri)
    assert [(item.code, item.range.start.line) for item in items] == [("CONFIG_ERROR", 2)]
    assert "unknown key piflow.colour" in items[0].message


async def test_models_json_errors_point_at_the_provider(start, workspace: Workspace) -> None:
    text = '{\n  "providers": {\n    "local": { "models": [{ "id": "m" }] }\n  }\n}\n'
    path = workspace.agent / "models.json"
    path.write_text(text)
    client = await start("neovim_0.11")
    uri = workspace.uri(path)
    open_document(client, uri, text, language_id="json")
    (item,) = await published(client, uri)
    assert item.code == "CONFIG_ERROR"
    assert item.message == f"{path}:3:5: providers.local needs a baseUrl when it defines models"
    assert (item.range.start.line, item.range.start.character, item.range.end.character) == (2, 4, 11)
