"""`piflow.showRun` of a pi-subagents run, over real LSP: the children, emits, console lines, host
steps and lane board the editor's run view shows."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conftest import Client, Workspace, open_document
from lsprotocol import types

SCRIPT = """// piflow: pi-subagents
const VERDICT = { type: "object", properties: { verdict: { type: "string" } }, required: ["verdict"] };
console.info("go");
const scan = await runs.run("scan", { agent: "worker", task: "Scan" });
emit({ scanned: scan.ok });
await runs.host("ci", { kind: "command", command: "exit 0", timeoutMs: 60000 });
return await runs.lanes([{ key: "ui", stages: [
  { key: "write", agent: "worker", task: "Write the ui" },
  { key: "review", agent: "reviewer", task: "Review the ui", outputSchema: VERDICT },
  { key: "fix", resume: "previous", task: "Fix the ui" },
] }]);
"""
FIXTURES = {"responses": [{"match": {"key": "ui.review"}, "json": {"verdict": "blocked"}},
                          {"match": {"key": "scan"}, "text": "found 3", "tokens": {"input": 2, "output": 3}}]}


async def _execute(client: Client, command: str, argument: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, [argument]))


async def test_show_run_carries_children_emits_console_host_steps_and_the_lane_board(
    start: Any, workspace: Workspace
) -> None:
    client = await start("vscode_1.95")
    fixtures = workspace.write("fleet.fixtures.json", json.dumps(FIXTURES))
    uri = workspace.uri(workspace.write("fleet.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await _execute(client, "piflow.run", {"uri": uri, "fixtures": str(fixtures)}))["runId"]

    async def completed() -> dict[str, Any]:
        while True:
            view: dict[str, Any] = await _execute(client, "piflow.showRun", {"runId": run_id})
            if view["state"] in ("completed", "failed"):
                return view
            await asyncio.sleep(0.05)

    view = await asyncio.wait_for(completed(), 90)
    assert view["state"] == "completed", view["error"]
    shown = view["subagents"]
    scan = shown["children"][0]
    assert (scan["key"], scan["agent"], scan["state"], scan["tokens"]) == ("scan", "worker", "completed", 5)
    assert scan["outputReference"].endswith("/scan.md")
    assert shown["emits"] == [{"scanned": True}]
    assert shown["console"] == [{"level": "info", "message": "go"}]
    assert [(h["key"], h["state"], h["exitCode"]) for h in shown["hostSteps"]] == [("ci", "passed", 0)]
    [lane] = shown["lanes"][0]["lanes"]
    assert [(s["key"], s["state"]) for s in lane["stages"]] == [("write", "completed"), ("review", "blocked"),
                                                                 ("fix", "skipped")]
