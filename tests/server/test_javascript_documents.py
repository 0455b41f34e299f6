"""Workflow scripts stay `javascript` in the editors: piflow serves only the JavaScript files that are scripts."""

from __future__ import annotations

import asyncio

from conftest import Workspace, open_document, published, spans
from lsprotocol import types

TEXT = 'await agent("x", { role: "nobody" });\n'


async def test_plain_javascript_gets_nothing_from_piflow(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    plain = workspace.uri(workspace.write("src/util.js", TEXT))
    script = workspace.uri(workspace.write("review.workflow.js", TEXT))
    open_document(client, plain, TEXT)
    open_document(client, script, TEXT)
    assert spans(await published(client, script)) == [("UNKNOWN_AGENT_TYPE", (0, 25, 0, 33))]
    document = types.TextDocumentIdentifier(plain)
    hover = await client.text_document_hover_async(types.HoverParams(document, types.Position(0, 8)))
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(document))
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(document))
    await asyncio.sleep(0.5)
    assert (hover, lenses or None, symbols or None) == (None, None, None)
    assert [params.uri for params in client.received(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)] == [script]


async def test_javascript_named_by_the_project_globs_is_a_script(start, workspace: Workspace) -> None:
    (workspace.project / "piflow.toml").write_text('[piflow]\nscripts = ["flows/*.js"]\n')
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("flows/nightly.js", TEXT))
    open_document(client, uri, TEXT)
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(0, 8))
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "agent(prompt: string" in hover.contents.value
