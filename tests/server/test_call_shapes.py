"""The editor sees the workflow calls analysis and the runtime see: parenthesised and awaited
callees are calls, member calls are not (a real `piflow serve`)."""

from __future__ import annotations

from conftest import Client, Workspace, diagnostics, open_document
from lsprotocol import types

SCRIPT = """phase("shapes");
const a = await (agent)("Plain in parens", { model: "fast" });
const b = await ((agent))("Doubly wrapped", { model: "fast" });
const c = await (conversation)("chat", { model: "fast" });
const d = await helpers.agent("Not a call", { model: "fast" });
return { a, b, c, d };
"""


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri)


async def hover_at(client: Client, uri: str, line: int, character: int) -> str | None:
    hover = await client.text_document_hover_async(types.HoverParams(doc(uri), types.Position(line, character)))
    if hover is None:
        return None
    assert isinstance(hover.contents, types.MarkupContent)
    return hover.contents.value


async def test_parenthesised_and_awaited_callees_are_calls_everywhere(start, workspace: Workspace) -> None:
    client = await start("neovim_0.12")
    uri = workspace.uri(workspace.write("shapes.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    found = await diagnostics(client, "neovim_0.12", uri)
    assert [d.message for d in found if "direct" in d.message] == []  # `(conversation)(...)` is direct

    assert "agent(prompt: string" in (await hover_at(client, uri, 1, 18) or "")
    assert "agent(prompt: string" in (await hover_at(client, uri, 2, 19) or "")
    assert "conversation(" in (await hover_at(client, uri, 3, 19) or "")
    assert await hover_at(client, uri, 4, 26) is None  # helpers.agent(...) is a member call

    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(doc(uri), types.Range(types.Position(0, 0), types.Position(9, 0)))
    )
    assert sorted(h.position.line for h in hints or []) == [1, 2, 3]  # alias hints on the three calls only

    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri)))
    assert symbols is not None
    [phase] = symbols
    assert isinstance(phase, types.DocumentSymbol)
    assert [child.name for child in phase.children or []] == ["Plain in parens", "Doubly wrapped", "chat"]
