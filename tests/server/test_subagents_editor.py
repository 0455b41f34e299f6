"""Editor support for pi-subagents scripts over real LSP: completion, hover, definition, lenses, and
run inlay hints after a real run on the scripted backend."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from conftest import Client, Workspace, open_document
from lsprotocol import types

AUDITOR = """---
name: auditor
description: Audits changes for security problems
model: openai/gpt-4o
tools: read, grep
---
You audit code for security problems.
"""

SCRIPT = """// piflow: pi-subagents
const [api] = await runs.all([
  { key: "api-review", agent: "auditor", task: "Review the API", fast: true },
]);
const fix = await runs.run("fix", { agent: "worker", task: "Fix it", model: "openai/gpt-4o:high" });
await runs.steer("fix", "hurry", { mode: "follow_up" });
const board = await runs.lanes([{ key: "web", stages: [{ key: "scan", agent: "scout", task: "Scan" }] }]);
emit({ done: true });
return fix.output;
"""
LINES = SCRIPT.splitlines()
VERSIONS = itertools.count(2)


def at(needle: str, offset: int = 0) -> types.Position:
    """The position of the first `needle` in SCRIPT (plus `offset` characters)."""
    for number, line in enumerate(LINES):
        column = line.find(needle)
        if column >= 0:
            return types.Position(number, column + offset)
    raise AssertionError(needle)


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri)


@pytest.fixture
async def opened(start, workspace: Workspace) -> tuple[Client, str]:
    agents = workspace.agent / "agents"
    agents.mkdir(parents=True)
    (agents / "auditor.md").write_text(AUDITOR, encoding="utf-8")
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("fleet.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    return client, uri


async def hover_text(client: Client, uri: str, position: types.Position) -> str:
    hover = await client.text_document_hover_async(types.HoverParams(doc(uri), position))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    return hover.contents.value


async def completion_items(client: Client, uri: str, text: str) -> list[types.CompletionItem]:
    """Items offered at the end of `text` (the document's whole new content)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=next(VERSIONS)),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )
    lines = text.split("\n")
    position = types.Position(len(lines) - 1, len(lines[-1]))
    result = await client.text_document_completion_async(types.CompletionParams(doc(uri), position))
    assert isinstance(result, types.CompletionList)
    return list(result.items)


async def labels(client: Client, uri: str, text: str) -> list[str]:
    return [item.label for item in await completion_items(client, uri, text)]


PRAGMA = "// piflow: pi-subagents\n"


async def test_completion_offers_runs_methods_with_snippets(opened: tuple[Client, str]) -> None:
    client, uri = opened
    items = await completion_items(client, uri, PRAGMA + "await runs.")
    assert [item.label for item in items] == ["run", "all", "lanes", "host", "steer", "status", "ref", "refs"]
    lanes = next(item for item in items if item.label == "lanes")
    assert isinstance(lanes.text_edit, types.TextEdit) and lanes.text_edit.new_text.startswith("lanes([")
    assert isinstance(lanes.documentation, types.MarkupContent) and "0.59+" in lanes.documentation.value
    assert await labels(client, uri, PRAGMA + "await state.") == ["get", "set"]
    started = await labels(client, uri, PRAGMA + 'await runs.run("a", { agent: "worker", task: "t" });\ne')
    assert "emit" in started


async def test_completion_offers_child_params_with_their_versions(opened: tuple[Client, str]) -> None:
    client, uri = opened
    items = await completion_items(client, uri, PRAGMA + 'await runs.run("a", { task: "t", ')
    names = [item.label for item in items]
    assert names[:3] == ["agent", "task", "model"] and {"fast", "lane", "extensionBindings"} <= set(names)
    assert "turnBudget" not in names  # removed in 0.59
    fast = next(item for item in items if item.label == "fast")
    assert fast.detail == "runs.run param (pi-subagents 0.56+)"
    item_keys = await labels(client, uri, PRAGMA + 'await runs.all([{ ')
    assert item_keys[0] == "key" and "agent" in item_keys
    stage_keys = await labels(client, uri, PRAGMA + 'await runs.lanes([{ key: "l", stages: [{ key: "s", ')
    assert "resume" in stage_keys and "agent" in stage_keys
    assert await labels(client, uri, PRAGMA + 'await runs.lanes([{ ') == ["key", "stages"]
    host = await labels(client, uri, PRAGMA + 'await runs.host("ci", { ')
    assert host == ["kind", "command", "timeoutMs", "output", "role", "provider"]
    assert await labels(client, uri, PRAGMA + 'await runs.steer("a", "m", { ') == ["mode", "index", "ackTimeoutMs"]


async def test_completion_offers_agents_models_thinking_and_enumerated_values(opened: tuple[Client, str]) -> None:
    client, uri = opened
    agents = await completion_items(client, uri, PRAGMA + 'await runs.run("a", { agent: "')
    names = [item.label for item in agents]
    assert {"auditor", "worker", "reviewer", "scout"} <= set(names)
    auditor = next(item for item in agents if item.label == "auditor")
    assert auditor.detail == "Audits changes for security problems"
    assert isinstance(auditor.documentation, types.MarkupContent)
    assert "model: `openai/gpt-4o` · tools: `read`, `grep`" in auditor.documentation.value
    models = await labels(client, uri, PRAGMA + 'await runs.all([{ key: "a", agent: "worker", model: "')
    assert models == ["openai/gpt-4o", "openai/gpt-4o-mini"]  # no workflow aliases for children
    thinking = await labels(client, uri, PRAGMA + 'await runs.run("a", { agent: "worker", model: "openai/gpt-4o:')
    assert thinking == ["off", "minimal", "low", "medium", "high", "xhigh", "max"]
    assert await labels(client, uri, PRAGMA + 'await runs.steer("a", "m", { mode: "') == ["steer", "follow_up", "auto"]
    assert await labels(client, uri, PRAGMA + 'await runs.host("ci", { role: "') == ["ci", "gate"]
    assert await labels(client, uri, PRAGMA + 'await runs.run("a", { context: "') == ["fresh", "fork", "profile"]
    stage = PRAGMA + 'await runs.lanes([{ key: "l", stages: [{ key: "s", agent: "worker" }, { key: "t", resume: "'
    assert await labels(client, uri, stage) == ["previous"]


async def test_hover_documents_methods_params_and_versions(opened: tuple[Client, str]) -> None:
    client, uri = opened
    lanes = await hover_text(client, uri, at("lanes(", 1))
    assert lanes.startswith("```ts\nruns.lanes(lanes:") and "*(pi-subagents 0.59+)*" in lanes
    assert "runs.steer(key: string, message: string" in await hover_text(client, uri, at("steer(", 1))
    assert "emit(value: JSON)" in await hover_text(client, uri, at("emit(", 1))
    fast = await hover_text(client, uri, at("fast:", 1))
    assert fast.startswith("**runs.all item `fast`**: `boolean` *(pi-subagents 0.56+)*")
    mode = await hover_text(client, uri, at('"follow_up"', 2))
    assert mode.startswith("**runs.steer option `mode`**") and "`follow_up`" in mode


async def test_hover_on_an_agent_shows_its_definition(opened: tuple[Client, str], workspace: Workspace) -> None:
    client, uri = opened
    text = await hover_text(client, uri, at('"auditor"', 2))
    assert text.startswith("**agent `auditor`** — Audits changes for security problems")
    assert "model: `openai/gpt-4o` · tools: `read`, `grep`" in text
    assert (workspace.agent / "agents" / "auditor.md").as_uri() in text
    assert "builtin agent" in await hover_text(client, uri, at('"scout"', 2))


async def test_hover_on_a_child_model_shows_the_model_and_thinking(opened: tuple[Client, str]) -> None:
    client, uri = opened
    text = await hover_text(client, uri, at('"openai/gpt-4o:high"', 3))
    assert text.startswith("**`openai/gpt-4o:high`** → `openai/gpt-4o` · thinking high")


async def test_definition_of_an_agent_is_its_file_and_line(opened: tuple[Client, str], workspace: Workspace) -> None:
    client, uri = opened
    location = await client.text_document_definition_async(types.DefinitionParams(doc(uri), at('"auditor"', 3)))
    assert isinstance(location, types.Location)
    assert location.uri == (workspace.agent / "agents" / "auditor.md").as_uri()
    assert location.range.start.line == 1  # the `name:` line
    builtin = await client.text_document_definition_async(types.DefinitionParams(doc(uri), at('"worker"', 2)))
    assert isinstance(builtin, types.Location) and builtin.uri.endswith("/builtin_agents/worker.md")


FLEET = """// piflow: pi-subagents
const reviews = await runs.all(["api", "ui"].map((area) => ({
  key: `review-${area}`, agent: "reviewer", task: `Review the ${area} changes`,
})));
const summary = await runs.run("summary", { agent: "worker", task: runs.refs(reviews) });
return summary.output;
"""


async def execute(client: Client, command: str, argument: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, [argument]))


async def test_a_run_from_the_lens_runs_children_and_hints_show_them_at_their_calls(
    start, workspace: Workspace
) -> None:
    workspace.write("fleet.fixtures.json", json.dumps({
        "defaults": {"tokens": {"input": 1000, "output": 200}, "costUsd": 0.002},
        "responses": [{"match": {"key": "summary"}, "text": "All good.", "tokens": {"input": 50, "output": 10}}],
    }))
    workspace.write("piflow.toml", '[piflow]\nbackend = "scripted"\n\n[scripted]\nfixtures = "fleet.fixtures.json"\n')
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("fleet.workflow.js", FLEET))
    open_document(client, uri, FLEET)
    found = await client.text_document_code_lens_async(types.CodeLensParams(doc(uri)))
    run = next(lens for lens in found or [] if lens.command is not None and lens.command.title == "▶ Run")
    assert run.command is not None and run.command.arguments
    run_id = (await execute(client, run.command.command, run.command.arguments[0]))["runId"]

    async def finished() -> dict[str, Any]:
        while True:
            view: dict[str, Any] = await execute(client, "piflow.showRun", {"runId": run_id})
            if view["state"] not in ("running", "pending"):
                return view
            await asyncio.sleep(0.05)

    view = await asyncio.wait_for(finished(), 60)
    assert view["state"] == "completed" and view["result"] == "All good."
    children = sorted((agent["label"], agent["role"], agent["state"]) for agent in view["agentList"])
    assert children == [("review-api", "reviewer", "completed"), ("review-ui", "reviewer", "completed"),
                        ("summary", "worker", "completed")]
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(doc(uri), types.Range(types.Position(0, 0), types.Position(9, 0)))
    )
    shown = [(hint.position.line, hint.position.character, hint.label) for hint in hints or []]
    assert shown == [
        (3, 1, "×2: 2 completed · 2.4k tok · $0.0040"),  # the runs.all item both review children came from
        (4, 88, "✓ completed · 60 tok · $0.0020"),  # after the runs.run call
    ]


async def test_outline_lists_children_by_key(opened: tuple[Client, str]) -> None:
    client, uri = opened
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri)))
    assert symbols is not None
    outline = [(symbol.name, symbol.detail, symbol.range.start.line) for symbol in symbols
               if isinstance(symbol, types.DocumentSymbol)]
    assert outline == [("api-review", "runs.all item", 2), ("fix", "runs.run", 4),
                       ("web.scan", "runs.lanes stage", 6)]


SEQUENCE = """// piflow: pi-subagents
const first = await runs.run("first", { agent: "worker", task: "one" });
const second = await runs.run("second", { agent: "worker", task: "two" });
const third = await runs.run("third", { agent: "worker", task: "three" });
return [first.output, second.output, third.output];
"""


async def test_pause_and_resume_lenses_control_a_subagents_run(start, workspace: Workspace) -> None:
    # The pause lands while `first` runs (the owner reads requests every 0.2 s, and a pause lets the
    # running child finish): 3 s of it is a margin for a loaded machine, where 400 ms per child was not.
    workspace.write("slow.fixtures.json", json.dumps({"responses": [{"match": {"key": "first"}, "latencyMs": 3000}]}))
    workspace.write("piflow.toml", '[piflow]\nbackend = "scripted"\n\n[scripted]\nfixtures = "slow.fixtures.json"\n')
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("sequence.workflow.js", SEQUENCE))
    open_document(client, uri, SEQUENCE)

    async def press(title: str) -> Any:
        found = await client.text_document_code_lens_async(types.CodeLensParams(doc(uri)))
        lens = next(lens for lens in found or [] if lens.command and lens.command.title.startswith(title))
        assert lens.command is not None and lens.command.arguments
        return await execute(client, lens.command.command, lens.command.arguments[0])

    async def state(*wanted: str) -> dict[str, Any]:
        while True:
            view: dict[str, Any] = await execute(client, "piflow.showRun", {"runId": run_id})
            if view["state"] in wanted:
                return view
            await asyncio.sleep(0.05)

    run_id = (await press("▶ Run"))["runId"]
    await asyncio.wait_for(state("running"), 30)
    await press("⏸ Pause")
    paused = await asyncio.wait_for(state("paused"), 30)
    assert paused["agents"]["settled"] < 3
    assert (await press(f"↻ Resume {run_id[:8]} (paused)"))["state"] == "running"
    done = await asyncio.wait_for(state("completed", "failed"), 60)
    assert done["state"] == "completed"
    assert done["result"] == ["[scripted] one", "[scripted] two", "[scripted] three"]
    assert sorted(agent["label"] for agent in done["agentList"]) == ["first", "second", "third"]
