"""The editor shows a script's own error as the script wrote it: the end-of-run message of a client
without piflow's plugin and the plugin's `piflow/runFinished` carry the author's words."""

from __future__ import annotations

from conftest import Workspace, open_document
from lsprotocol import types
from test_runs import execute, press

SCRIPT = 'await phase("release");\nthrow new Error("The release was rejected");\n'


async def test_the_end_of_a_failed_run_shows_the_scripts_own_message(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    uri = workspace.uri(workspace.write("release.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    await press(client, uri, "▶ Run")
    shown = await client.expect(types.WINDOW_SHOW_MESSAGE, lambda p: "failed" in p.message, timeout=60)
    assert shown.message == "Workflow release failed: The release was rejected"
    assert shown.type == types.MessageType.Error


async def test_the_plugin_gets_the_message_as_written(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("release.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await press(client, uri, "▶ Run"))["runId"]
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id, timeout=60)
    assert finished["state"] == "failed"
    # `authored` tells the plugin to show the message without the code.
    written = {"code": "INTERNAL_ERROR", "message": "The release was rejected", "authored": True}
    assert finished["error"] == written
    assert (await execute(client, "piflow.showRun", {"runId": run_id}))["error"] == written
