"""A run's failed agents: their error on their call in the script, until the script runs again."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from conftest import Client, Workspace, open_document, pulled
from lsprotocol import types

from piflow.analysis import ScriptDocument
from piflow.analysis.inspect import inspect_document
from piflow.analysis.positions import TextIndex
from piflow.server.outcomes import launched_calls, launched_spans
from piflow.server.snapshot import DocumentKind, Snapshot

SCRIPT = """const draft = await agent("Write", { label: "writer" });
const critique = await agent("Criticise", { label: "critic" });
return { draft, critique };
"""
REFUSAL = "The critic's model refused: content policy"


async def execute(client: Client, command: str, argument: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, [argument]))


async def run_problems(client: Client, profile: str, uri: str, count: int) -> list[types.Diagnostic]:
    """The document's `piflow run` diagnostics once there are `count` of them (pushed or pulled)."""

    async def wait() -> list[types.Diagnostic]:
        while True:
            if profile == "neovim_0.11":
                items = list(client.diagnostics.get(uri, []))
            else:
                report = await pulled(client, uri)
                assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
                items = list(report.items)
            found = [item for item in items if item.source == "piflow run"]
            if len(found) == count:
                return found
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(wait(), 60)


async def finished(client: Client, run_id: str, state: str) -> None:
    async def wait() -> None:
        while (await execute(client, "piflow.showRun", {"runId": run_id}))["state"] != state:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(wait(), 60)


@pytest.mark.parametrize("profile", ["vscode_1.95", "neovim_0.11"])
async def test_a_failed_agent_shows_its_error_on_its_call_until_the_next_run(
    start, workspace: Workspace, profile: str
) -> None:
    refusing = workspace.write("refusing.json", json.dumps(
        {"responses": [{"match": {"label": "critic"}, "fail": {"code": "AGENT_FAILED", "message": REFUSAL}}]}
    ))
    client = await start(profile)
    uri = workspace.uri(workspace.write("critic.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": str(refusing)}))["runId"]
    await finished(client, run_id, "failed")

    (problem,) = await run_problems(client, profile, uri, 1)
    assert problem.message == REFUSAL
    assert problem.code == "AGENT_FAILED"
    assert problem.severity == types.DiagnosticSeverity.Error
    call = (1, 23, 1, 62)  # `agent("Criticise", { label: "critic" })`
    assert (problem.range.start.line, problem.range.start.character,
            problem.range.end.line, problem.range.end.character) == call

    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(5, 0))
    ))
    assert [hint.label for hint in hints or [] if hint.position.line == 1] == ["✗ failed"]

    again = (await execute(client, "piflow.run", {"uri": uri}))["runId"]
    assert await run_problems(client, profile, uri, 0) == []
    await finished(client, again, "completed")
    assert await run_problems(client, profile, uri, 0) == []


async def test_a_failure_the_script_caught_is_a_warning(start, workspace: Workspace) -> None:
    text = 'let note;\ntry { note = await agent("Risky", { label: "risky" }); } catch (error) { note = "none"; }\n' \
           "return note;\n"
    failing = workspace.write("failing.json", json.dumps(
        {"responses": [{"match": {"label": "risky"}, "fail": {"code": "AGENT_TIMEOUT", "message": "too slow"}}]}
    ))
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("caught.workflow.js", text))
    open_document(client, uri, text)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": str(failing)}))["runId"]
    await finished(client, run_id, "completed")
    (problem,) = await run_problems(client, "vscode_1.95", uri, 1)
    assert (problem.message, problem.code, problem.severity) == (
        "too slow", "AGENT_TIMEOUT", types.DiagnosticSeverity.Warning
    )


def _described(text: str, calls: tuple[Any, ...] | None) -> Snapshot:
    return Snapshot("file:///critic.workflow.js", DocumentKind.SCRIPT, 2, TextIndex(text), False,
                    cast(Any, None), calls=calls)  # the project is not read


def test_a_run_launched_from_the_open_document_takes_its_calls_from_the_document() -> None:
    calls = tuple(inspect_document(ScriptDocument(SCRIPT)))
    assert launched_calls(SCRIPT, _described(SCRIPT, calls)) == launched_spans(SCRIPT)  # the same calls
    # they are the document's, not found again: a snapshot's own calls are what comes back
    assert launched_calls(SCRIPT, _described(SCRIPT, calls[:1])) == launched_spans(SCRIPT)[:1]
    edited = SCRIPT.replace("Write", "Draft")
    assert launched_calls(SCRIPT, _described(edited, calls)) is None  # edited since: the launched text is analysed
    assert launched_calls(SCRIPT, _described(SCRIPT, None)) is None  # calls not found yet
    assert launched_calls(SCRIPT, None) is None  # not open
