"""The live lane board over real LSP: a pi-subagents run's `piflow/runProgress` carries its
`runs.lanes` boards as they change (blocked and skipped stages included); other runs carry none."""

from __future__ import annotations

import json
from typing import Any

from conftest import Workspace, open_document
from lsprotocol import types

SCRIPT = """// piflow: pi-subagents
const VERDICT = { type: "object", properties: { verdict: { type: "string" } }, required: ["verdict"] };
return await runs.lanes([
  { key: "api", stages: [
    { key: "write", agent: "worker", task: "Write the api" },
    { key: "test", agent: "worker", task: "Test the api" },
  ] },
  { key: "ui", stages: [
    { key: "write", agent: "worker", task: "Write the ui" },
    { key: "review", agent: "reviewer", task: "Review the ui", outputSchema: VERDICT },
    { key: "fix", resume: "previous", task: "Fix the ui" },
  ] },
]);
"""
FIXTURES = {"responses": [{"match": {"key": "ui.review"}, "json": {"verdict": "blocked"}},
                          {"match": {"key": "api.test"}, "latencyMs": 15000}]}


async def test_run_progress_carries_the_live_lane_board(start: Any, workspace: Workspace) -> None:
    client = await start("vscode_1.95", customNotifications=True)
    fixtures = workspace.write("board.fixtures.json", json.dumps(FIXTURES))
    uri = workspace.uri(workspace.write("board.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await client.workspace_execute_command_async(
        types.ExecuteCommandParams("piflow.run", [{"uri": uri, "fixtures": str(fixtures)}])))["runId"]

    def stages(progress: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
        [board] = progress["lanes"]
        return {lane["key"]: [(s["key"], s["state"]) for s in lane["stages"]] for lane in board["lanes"]}

    # while api.test still runs (15 s: a margin for a loaded machine), ui is already blocked on the board
    # (the first stages of all lanes run as one batch; later stages go on lane by lane)
    live = await client.expect("piflow/runProgress", lambda p: p["runId"] == run_id and p.get("lanes") and
                               stages(p)["ui"][1][1] == "blocked", timeout=90)
    assert live["state"] == "running"
    assert stages(live)["ui"] == [("write", "completed"), ("review", "blocked"), ("fix", "skipped")]
    assert stages(live)["api"] == [("write", "completed"), ("test", "running")]
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id, timeout=90)
    assert finished["state"] == "completed"
    last = [p for p in client.received("piflow/runProgress") if p["runId"] == run_id][-1]
    assert stages(last)["api"] == [("write", "completed"), ("test", "completed")]
    assert last["lanes"][0]["lanes"][1]["state"] == "blocked"
