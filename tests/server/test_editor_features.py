"""Hover, completion, definition, symbols, inlay hints and quick fixes on a real script."""

from __future__ import annotations

import itertools

import pytest
from conftest import Client, Workspace, diagnostics, open_document
from lsprotocol import types

SCRIPT = """export const meta = { name: "review", description: "Review a change" };
phase("scan");
const notes = await agent("Scan the diff", { model: "fast", tools: ["read"] });
const reviews = await parallel("reviews", {
  api: () => agent("Review the API", { role: "reviewer" }),
  ui: () => agent("Review the UI", { label: "ui-review", model: "openai/gpt-4o" }),
});
phase("ship");
const verdict = await checkpoint({ name: "ship", prompt: "Ship?", context: reviews });
return { notes, reviews, verdict };
"""


@pytest.fixture
async def opened(start, workspace: Workspace) -> tuple[Client, str]:
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("review.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    return client, uri


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri)


async def hover_text(client: Client, uri: str, line: int, character: int) -> str:
    hover = await client.text_document_hover_async(types.HoverParams(doc(uri), types.Position(line, character)))
    assert hover is not None
    assert isinstance(hover.contents, types.MarkupContent)
    return hover.contents.value


async def test_hover_documents_primitives_and_options(opened: tuple[Client, str]) -> None:
    client, uri = opened
    assert "agent(prompt: string, options?: AgentOptions)" in await hover_text(client, uri, 2, 21)
    assert "parallel(name: string, tasks" in await hover_text(client, uri, 3, 24)
    assert "(agent option)" in await hover_text(client, uri, 2, 47)


async def test_hover_on_an_alias_shows_its_target_and_availability(opened: tuple[Client, str]) -> None:
    client, uri = opened
    text = await hover_text(client, uri, 2, 55)
    assert "**`fast`** → `openai/gpt-4o-mini` (model alias" in text
    assert "✓ available" in text


async def test_hover_on_a_role_shows_description_model_tools_and_file(
    opened: tuple[Client, str], workspace: Workspace
) -> None:
    client, uri = opened
    text = await hover_text(client, uri, 4, 49)
    assert "Reviews a change for correctness" in text
    assert "model: `openai/gpt-4o`" in text
    assert "tools: `read`, `grep`" in text
    assert (workspace.roles / "reviewer.md").as_uri() in text


VERSIONS = itertools.count(2)
"""Document versions only grow: a change that repeats a version may be taken for one already seen."""


async def completions(client: Client, uri: str, text: str, line: int, character: int) -> list[str]:
    """Labels offered after replacing the document with `text` and asking at a position."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=next(VERSIONS)),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )
    result = await client.text_document_completion_async(
        types.CompletionParams(doc(uri), types.Position(line, character))
    )
    assert isinstance(result, types.CompletionList)
    return [item.label for item in result.items]


async def test_completion_offers_models_and_aliases_inside_model(opened: tuple[Client, str]) -> None:
    client, uri = opened
    labels = await completions(client, uri, 'agent("x", { model: "', 0, 21)
    assert labels == ["deep", "fast", "openai/gpt-4o", "openai/gpt-4o-mini"]


async def test_completion_offers_thinking_levels_after_a_model(opened: tuple[Client, str]) -> None:
    client, uri = opened
    labels = await completions(client, uri, 'agent("x", { model: "openai/gpt-4o:h', 0, 36)
    assert labels == ["off", "minimal", "low", "medium", "high", "xhigh", "max"]


async def test_completion_offers_roles_tools_and_option_keys(opened: tuple[Client, str]) -> None:
    client, uri = opened
    assert await completions(client, uri, 'agent("x", { role: "re', 0, 22) == ["reviewer"]
    assert "grep" in await completions(client, uri, 'agent("x", { tools: ["read", "', 0, 30)
    keys = await completions(client, uri, 'agent("x", { label: "a", ', 0, 25)
    assert keys == ["label", "model", "thinking", "tools", "role", "outputSchema", "retries", "timeoutMs"]


async def test_completion_offers_primitive_snippets(opened: tuple[Client, str]) -> None:
    client, uri = opened
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument("par")],
        )
    )
    result = await client.text_document_completion_async(types.CompletionParams(doc(uri), types.Position(0, 3)))
    assert isinstance(result, types.CompletionList)
    (item,) = result.items
    assert item.label == "parallel"
    assert item.insert_text_format == types.InsertTextFormat.Snippet
    assert isinstance(item.text_edit, types.TextEdit)
    assert item.text_edit.new_text.startswith('await parallel("${1:name}"')


async def test_definition_of_a_role_is_its_file(opened: tuple[Client, str], workspace: Workspace) -> None:
    client, uri = opened
    location = await client.text_document_definition_async(
        types.DefinitionParams(doc(uri), types.Position(4, 49))
    )
    assert isinstance(location, types.Location)
    assert location.uri == (workspace.roles / "reviewer.md").as_uri()


async def test_definition_of_an_alias_is_its_line_in_settings(opened: tuple[Client, str], workspace: Workspace) -> None:
    client, uri = opened
    location = await client.text_document_definition_async(
        types.DefinitionParams(doc(uri), types.Position(2, 55))
    )
    assert isinstance(location, types.Location)
    assert location.uri == workspace.settings_path.as_uri()
    line = workspace.settings_path.read_text().splitlines()[location.range.start.line]
    assert line[location.range.start.character :].startswith('"fast"')


async def test_document_symbols_follow_phases_operations_and_branches(opened: tuple[Client, str]) -> None:
    client, uri = opened
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri)))
    assert symbols is not None

    def tree(items: object) -> list[object]:
        return [(s.name, tree(s.children or [])) if s.children else s.name for s in items]  # type: ignore[attr-defined]

    assert tree(symbols) == [
        ("scan", ["Scan the diff", ("reviews", [("api", ["reviewer"]), ("ui", ["ui-review"])])]),
        ("ship", ["ship"]),
    ]


async def test_inlay_hint_shows_what_an_alias_resolves_to(opened: tuple[Client, str]) -> None:
    client, uri = opened
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(doc(uri), types.Range(types.Position(0, 0), types.Position(20, 0)))
    )
    assert hints is not None
    assert [(h.position.line, h.position.character, h.label) for h in hints] == [(2, 58, "→ openai/gpt-4o-mini")]


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply edits (ASCII text: UTF-16 columns are characters) from last to first."""
    lines = text.split("\n")
    offsets = [sum(len(line) + 1 for line in lines[:number]) for number in range(len(lines))]
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = offsets[edit.range.start.line] + edit.range.start.character
        end = offsets[edit.range.end.line] + edit.range.end.character
        text = text[:start] + edit.new_text + text[end:]
    return text


async def quick_fixes(client: Client, uri: str, items: list[types.Diagnostic]) -> list[types.CodeAction]:
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(doc(uri), items[0].range, types.CodeActionContext(diagnostics=items))
    )
    return [action for action in actions or [] if isinstance(action, types.CodeAction)]


async def test_quick_fix_suggests_the_model_meant(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'await agent("x", { model: "openai/gpt-4o-mnii" });\n'
    uri = workspace.uri(workspace.write("typo.workflow.js", text))
    open_document(client, uri, text)
    items = await diagnostics(client, "vscode_1.95", uri)
    actions = await quick_fixes(client, uri, items)
    assert actions[0].title == "Change to 'openai/gpt-4o-mini'"
    assert actions[0].is_preferred
    assert actions[0].edit is not None and actions[0].edit.changes is not None
    assert apply(text, list(actions[0].edit.changes[uri])) == 'await agent("x", { model: "openai/gpt-4o-mini" });\n'


async def test_quick_fix_removes_model_and_tools_beside_a_role(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'await agent("x", { role: "reviewer", model: "openai/gpt-4o", tools: ["read"] });\n'
    uri = workspace.uri(workspace.write("role.workflow.js", text))
    open_document(client, uri, text)
    items = await diagnostics(client, "vscode_1.95", uri)
    (action,) = await quick_fixes(client, uri, items)
    assert action.edit is not None and action.edit.changes is not None
    assert apply(text, list(action.edit.changes[uri])) == 'await agent("x", { role: "reviewer" });\n'
