"""Open documents beyond the few being typed in release their parse tree and statement facts; closed
ones release everything. Neither may change what the editor shows."""

from __future__ import annotations

from conftest import Workspace, change_document, open_document, published
from lsprotocol import types

from piflow.server.documents import WARM_DOCUMENTS

SCRIPT = 'await agent("x", { role: "reviewer" });\nawait agent("y", { role: "scout" });\n'


async def test_a_document_that_released_its_tree_is_checked_right_after_an_edit(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    uris = [workspace.uri(workspace.write(f"many-{n}.workflow.js", SCRIPT)) for n in range(WARM_DOCUMENTS + 2)]
    for uri in uris:
        mark = len(client.log)
        open_document(client, uri, SCRIPT)
        assert [d.message for d in await published(client, uri, mark)] == ["Unknown agent type: scout"]
    first = uris[0]  # opened first: no longer among the most recently used, its tree and facts are gone
    mark = len(client.log)
    change_document(client, first, 2, [((0, 34, 0, 34), "x")])  # "reviewer" → "reviewerx"
    await client.expect(
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        lambda p: p.uri == first
        and sorted(d.message for d in p.diagnostics) == ["Unknown agent type: reviewerx", "Unknown agent type: scout"],
        after=mark,
    )


async def test_a_closed_document_reopened_is_checked_afresh(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    uri = workspace.uri(workspace.write("reopened.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    await published(client, uri)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    mark = len(client.log)
    open_document(client, uri, SCRIPT.replace("scout", "scouts"))
    await client.expect(
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        lambda p: p.uri == uri and [d.message for d in p.diagnostics] == ["Unknown agent type: scouts"],
        after=mark,
    )


async def test_hover_works_in_a_document_that_released_its_tree(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    uris = [workspace.uri(workspace.write(f"hover-{n}.workflow.js", SCRIPT)) for n in range(WARM_DOCUMENTS + 2)]
    for uri in uris:
        mark = len(client.log)
        open_document(client, uri, SCRIPT)
        await published(client, uri, mark)

    async def hover(uri: str) -> str:
        params = types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(0, 8))  # on `agent`
        found = await client.text_document_hover_async(params)
        assert found is not None and isinstance(found.contents, types.MarkupContent)
        return found.contents.value

    for uri in uris:  # each is described (its calls found) with its tree, then the oldest let it go
        assert "agent(prompt: string" in await hover(uri)
    assert "agent(prompt: string" in await hover(uris[0])  # parsed again
    assert "agent(prompt: string" in await hover(uris[-1])  # kept
