"""Hundreds of random edits — binary junk, huge lines, half-typed code — and the server keeps answering.

The test mirrors the document on the client side and, at the end, checks that the server's
diagnostics are those of the mirrored text: incremental sync stayed exact through it all.
"""

from __future__ import annotations

import asyncio
import random
import re

import pytest
from conftest import Client, Workspace, diagnostics, open_document
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from piflow.analysis.analyze import analyze
from piflow.analysis.capabilities import Capabilities
from piflow.config import load_config

SEED_TEXT = """export const meta = { name: "fuzz" };
phase("start");
const r = await agent("Review", { model: "fast", tools: ["read"], role: "reviewer" });
await parallel("batch", { a: () => agent("a"), b: () => agent("b", { model: "openai/gpt-4o" }) });
return r;
"""

FRAGMENTS = [
    'agent("', "{ model: ", '"fast"', "role: 'rev", "tools: [", "]", "})", "await ", "parallel(", "checkpoint({",
    "phase(`x${", "\n", "\r\n", "\r", "//", "/*", "*/", '"', "'", "`", "${", "é", "😀", "\u2028", "\x00", "\ufeff",
    "\ud800", "withWorktree(", "conversation(", "export const meta = ", "import x from 'y';", "=>", ";;;",
]
_BREAKS = re.compile(r"\r\n|\r|\n")


def position(text: str, offset: int, utf8: bool) -> types.Position:
    """The LSP position of a character offset (lines break at CRLF, CR and LF)."""
    line, start = 0, 0
    for match in _BREAKS.finditer(text, 0, offset):
        if match.end() <= offset:
            line, start = line + 1, match.end()
    segment = text[start:offset]
    if utf8:
        return types.Position(line, len(segment.encode("utf-8", "surrogatepass")))
    return types.Position(line, len(segment.encode("utf-16-le", "surrogatepass")) // 2)


def safe_offset(text: str, offset: int) -> int:
    """Never split a CRLF pair or a surrogate pair (no editor would)."""
    offset = max(0, min(offset, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1
    return offset


def random_edit(rng: random.Random, text: str) -> tuple[int, int, str]:
    start = safe_offset(text, rng.randrange(len(text) + 1))
    end = safe_offset(text, start + rng.choice([0, 0, 1, 3, 20, 200]))
    kind = rng.random()
    if kind < 0.02:
        new = "x" * rng.choice([50_000, 120_000])  # a huge line
    elif kind < 0.12:
        new = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).decode("latin-1")  # binary junk
    else:
        new = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(0, 4)))
    return start, end, new


async def ask_everything(client: Client, uri: str, text: str, utf8: bool, rng: random.Random) -> None:
    """One request of each kind at a random position; each must answer (errors fail the test)."""
    where = position(text, safe_offset(text, rng.randrange(len(text) + 1)), utf8)
    document = types.TextDocumentIdentifier(uri)
    whole = types.Range(types.Position(0, 0), types.Position(10_000, 0))
    await asyncio.gather(
        client.text_document_hover_async(types.HoverParams(document, where)),
        client.text_document_completion_async(types.CompletionParams(document, where)),
        client.text_document_definition_async(types.DefinitionParams(document, where)),
        client.text_document_document_symbol_async(types.DocumentSymbolParams(document)),
        client.text_document_code_lens_async(types.CodeLensParams(document)),
        client.text_document_inlay_hint_async(types.InlayHintParams(document, whole)),
        client.text_document_code_action_async(
            types.CodeActionParams(document, types.Range(where, where), types.CodeActionContext(diagnostics=[]))
        ),
    )


@pytest.mark.parametrize(("profile", "edits"), [("vscode_1.95", 300), ("neovim_0.12", 200)])
async def test_random_edits_never_break_the_server(start, workspace: Workspace, profile: str, edits: int) -> None:
    rng = random.Random(f"piflow-{profile}")
    client = await start(profile)
    utf8 = profile.startswith("neovim")
    uri = workspace.uri(workspace.write("fuzz.workflow.js", SEED_TEXT))
    text = SEED_TEXT
    open_document(client, uri, text)
    for version in range(2, edits + 2):
        start_offset, end_offset, new = random_edit(rng, text)
        change = types.TextDocumentContentChangePartial(
            range=types.Range(position(text, start_offset, utf8), position(text, end_offset, utf8)), text=new
        )
        text = text[:start_offset] + new + text[end_offset:]
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(uri=uri, version=version), [change])
        )
        if version % 10 == 0:
            await asyncio.wait_for(ask_everything(client, uri, text, utf8, rng), 60)
        if len(text) > 400_000:  # keep the run quick: start over from a full replacement
            text = SEED_TEXT
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    [types.TextDocumentContentChangeWholeDocument(text)],
                )
            )
    served = await diagnostics(client, profile, uri)
    config = load_config(workspace.project, environ=workspace.env, tolerant=True)
    expected = analyze(text, Capabilities.from_config(config))
    assert [(item.code, item.message) for item in served] == [(f.code, f.message) for f in expected]
    assert client._server is not None and client._server.returncode is None


def test_position_helper_counts_like_lsp() -> None:
    text = "a\r\nbé😀c"
    assert position(text, 7, utf8=False) == types.Position(1, 5)
    assert position(text, 7, utf8=True) == types.Position(1, 8)


async def test_cancelled_requests_are_answered_and_the_server_goes_on(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("cancel.workflow.js", SEED_TEXT))
    open_document(client, uri, SEED_TEXT)
    document = types.TextDocumentIdentifier(uri)
    futures = []
    for number in range(20):
        message_id = f"cancel-{number}"
        futures.append(client.protocol.send_request(
            types.TEXT_DOCUMENT_HOVER, types.HoverParams(document, types.Position(2, 20)), msg_id=message_id
        ))
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=message_id))
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(asyncio.wrap_future(future) for future in futures), return_exceptions=True), 30
    )
    assert len(outcomes) == 20  # every request got an answer: a hover, or "cancelled"
    assert all(isinstance(outcome, (types.Hover, JsonRpcRequestCancelled)) for outcome in outcomes)
    hover = await client.text_document_hover_async(types.HoverParams(document, types.Position(2, 20)))
    assert hover is not None
