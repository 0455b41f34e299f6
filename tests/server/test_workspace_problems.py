"""Scripts that are not open are checked too: pushed to push clients, pulled by `workspace/diagnostic`."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Client, Workspace, change_document, open_document, spans
from lsprotocol import types

BROKEN = 'await agent("x", { role: "nobody" });\n'
ALSO_BROKEN = 'await agent("y", { tools: ["bsh"] });\n'
CLEAN = 'await agent("x", { label: "fine" });\n'


@pytest.fixture
def project(workspace: Workspace) -> Workspace:
    """Scripts by name and by piflow.toml glob, and files that are not the project's scripts."""
    (workspace.project / "piflow.toml").write_text('[piflow]\nscripts = ["**/*.workflow.js", "flows/*.js"]\n')
    workspace.write("review.workflow.js", BROKEN)
    workspace.write("flows/nightly.js", ALSO_BROKEN)
    workspace.write("node_modules/dep/vendored.workflow.js", BROKEN)
    workspace.write(".cache/old.workflow.js", BROKEN)
    workspace.write("tools/helper.js", BROKEN)
    return workspace


def uri_of(workspace: Workspace, relative: str) -> str:
    return workspace.uri(workspace.project / relative)


async def pushed(client: Client, uri: str, where=lambda items: True, after: int = 0) -> list[types.Diagnostic]:
    params = await client.expect(
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == uri and where(p.diagnostics), after=after
    )
    return list(params.diagnostics)


async def test_scripts_on_disk_are_published_to_push_clients(start, project: Workspace) -> None:
    client = await start("neovim_0.11")
    review, nightly = uri_of(project, "review.workflow.js"), uri_of(project, "flows/nightly.js")
    assert spans(await pushed(client, review)) == [("UNKNOWN_AGENT_TYPE", (0, 25, 0, 33))]
    assert spans(await pushed(client, nightly)) == [("UNKNOWN_TOOL", (0, 27, 0, 32))]
    await asyncio.sleep(1)  # the scan is over: nothing else comes
    assert {params.uri for params in client.received(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)} == {review, nightly}


async def test_a_script_fixed_on_disk_loses_its_problems(start, project: Workspace) -> None:
    client = await start("neovim_0.11")
    review = uri_of(project, "review.workflow.js")
    await pushed(client, review)
    mark = len(client.log)
    project.write("review.workflow.js", CLEAN)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        [types.FileEvent(review, types.FileChangeType.Changed)]
    ))
    assert await pushed(client, review, after=mark) == []


async def test_closing_a_document_shows_its_file_again(start, project: Workspace) -> None:
    """The editor's unsaved text had no problem; once closed, the file on disk (which has one) speaks."""
    client = await start("neovim_0.11")
    review = uri_of(project, "review.workflow.js")
    await pushed(client, review)
    open_document(client, review, BROKEN)
    change_document(client, review, 2, [((0, 17, 0, 35), '{ label: "x" }')])
    await pushed(client, review, where=lambda items: len(items) == 0, after=len(client.log))
    mark = len(client.log)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(review)))
    assert spans(await pushed(client, review, after=mark)) == [("UNKNOWN_AGENT_TYPE", (0, 25, 0, 33))]


async def workspace_report(client: Client, previous: list[types.PreviousResultId]) -> types.WorkspaceDiagnosticReport:
    return await client.workspace_diagnostic_async(types.WorkspaceDiagnosticParams(previous_result_ids=previous))


async def test_pull_clients_get_the_workspace_report_with_result_ids(start, project: Workspace) -> None:
    client = await start("vscode_1.95")
    review, nightly = uri_of(project, "review.workflow.js"), uri_of(project, "flows/nightly.js")
    report = await workspace_report(client, [])
    full = {item.uri: item for item in report.items}
    assert set(full) == {review, nightly}
    assert all(isinstance(item, types.WorkspaceFullDocumentDiagnosticReport) for item in full.values())
    assert spans(full[review].items) == [("UNKNOWN_AGENT_TYPE", (0, 25, 0, 33))]  # type: ignore[union-attr]

    previous = [types.PreviousResultId(uri, item.result_id) for uri, item in full.items() if item.result_id]
    again = await workspace_report(client, previous)
    assert all(isinstance(item, types.WorkspaceUnchangedDocumentDiagnosticReport) for item in again.items)

    (project.project / "flows" / "nightly.js").unlink()
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        [types.FileEvent(nightly, types.FileChangeType.Deleted)]
    ))
    await client.expect(types.WORKSPACE_DIAGNOSTIC_REFRESH)
    after = {item.uri: item for item in (await workspace_report(client, previous)).items}
    assert isinstance(after[nightly], types.WorkspaceFullDocumentDiagnosticReport) and len(after[nightly].items) == 0
    assert isinstance(after[review], types.WorkspaceUnchangedDocumentDiagnosticReport)
    assert not client.received(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)  # it pulls: nothing is pushed

