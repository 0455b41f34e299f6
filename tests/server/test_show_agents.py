"""`piflow.showRun` and `piflow.showAgent`: what each agent answered or why it failed, over real LSP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import Client, Workspace, open_document
from lsprotocol import types
from pygls.exceptions import JsonRpcException

BIG = "y" * (65 * 1024)
FIXTURES = {
    "responses": [
        {"match": {"label": "writer"}, "text": "a haiku\nin two lines"},
        {"match": {"label": "big"}, "json": {"text": BIG}},
        {"match": {"label": "breaker"}, "fail": {"code": "AGENT_TIMEOUT", "message": "Agent attempt timed out"}},
    ]
}
SCRIPT = """const poem = await agent("Write", { label: "writer" });
const big = await agent("Say a lot", { label: "big" });
await agent("Break", { label: "breaker" });
return poem;
"""


async def execute(client: Client, command: str, argument: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, [argument]))


async def finished(client: Client, run_id: str) -> dict[str, Any]:
    async def wait() -> dict[str, Any]:
        while True:
            view: dict[str, Any] = await execute(client, "piflow.showRun", {"runId": run_id})
            if view["state"] in ("completed", "failed"):
                return view
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(wait(), 60)


async def test_show_run_and_show_agent_carry_outputs_and_errors(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    fixtures = workspace.write("agents.fixtures.json", json.dumps(FIXTURES))
    uri = workspace.uri(workspace.write("agents.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": str(fixtures)}))["runId"]
    view = await finished(client, run_id)
    assert view["state"] == "failed"
    writer, big, breaker = view["agentList"]
    assert (writer["output"], writer["outputPreview"]) == ("a haiku\nin two lines", "a haiku in two lines")
    [attempt] = writer["attemptList"]
    assert attempt["setup"]["model"] == writer["model"] and "systemPrompt" in attempt["setup"]
    assert {k: v for k, v in attempt.items() if k != "setup"} == {
        "number": 1, "state": "completed", "tokens": writer["tokens"], "costUsd": 0.0}
    assert "output" not in big and big["outputTruncated"] is True
    assert big["outputPreview"] == ('{"text":"' + BIG)[:199] + "…"
    timed_out = {"code": "AGENT_TIMEOUT", "message": "Agent attempt timed out"}
    assert (breaker["error"], breaker["outputPreview"], breaker["transcriptPath"]) == (timed_out, None, None)
    assert [attempt["state"] for attempt in breaker["attemptList"]] == ["failed"]

    full = await execute(client, "piflow.showAgent", {"runId": run_id[:8], "agentId": big["id"]})
    assert full["output"] == {"text": BIG} and full["outputTruncated"] is False
    assert full["label"] == "big" and full["attemptList"][0]["state"] == "completed"
    assert full["attemptList"][0]["setup"]["tools"] == big["attemptList"][0]["setup"]["tools"]  # the agent view audits
    with pytest.raises(JsonRpcException, match="Unknown workflow agent"):
        await execute(client, "piflow.showAgent", {"runId": run_id, "agentId": f"{run_id}:99"})
