"""Runs outlive the editor: the server launches owner processes and follows runs through the store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Workspace, open_document
from test_runs import SCRIPT, SLOW, execute, latencies, state_of

from held import HOLD_MS
from piflow.engine.owner import EDITOR_RUN_NICENESS

AGENT_KEYS = ("id", "label", "role", "model", "state", "attempts", "tokens", "costUsd", "activity", "parentId")


async def _cli(workspace: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "piflow", *args],
        cwd=workspace.project, env=workspace.env, capture_output=True, text=True, timeout=60,
    )


async def _stored_state(workspace: Workspace, run_id: str, wanted: str, timeout: float = 60) -> None:
    """Wait, with no editor open, until the store shows the run in `wanted` (as `piflow show` reads it)."""
    async def wait() -> None:
        while True:
            shown = await _cli(workspace, "show", run_id, "--json")
            if shown.returncode == 0 and json.loads(shown.stdout)["state"] == wanted:
                return
            await asyncio.sleep(0.2)

    await asyncio.wait_for(wait(), timeout)


async def test_a_run_launched_from_the_editor_completes_after_the_server_is_killed(start, workspace: Workspace) -> None:
    fixtures = workspace.write("slow.fixtures.json", json.dumps({"defaults": {"latencyMs": 800}}))
    first = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("slow.workflow.js", SLOW))
    open_document(first, uri, SLOW)
    run_id = (await execute(first, "piflow.run", {"uri": uri, "fixtures": str(fixtures)}))["runId"]
    await state_of(first, run_id, "running")
    assert first._server is not None
    first._server.kill()  # SIGKILL: no shutdown, no goodbye
    await first._server.wait()
    await _stored_state(workspace, run_id, "completed")
    second = await start("vscode_1.95", customNotifications=True)
    view = await state_of(second, run_id, "completed")
    assert view["result"] == ["[scripted] first", "[scripted] second", "[scripted] third"]
    assert view["uri"] == uri


async def test_a_checkpoint_asked_while_no_editor_was_open_is_answered_from_the_reopened_editor(
    start, workspace: Workspace
) -> None:
    first = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("haiku.workflow.js", SCRIPT))
    open_document(first, uri, SCRIPT)
    run_id = (await execute(first, "piflow.run", {"uri": uri}))["runId"]
    await first.shutdown_session()  # the editor closes before the run asks its question
    await _stored_state(workspace, run_id, "awaiting_input")
    second = await start("vscode_1.95", customNotifications=True)
    assert await second.expect("piflow/runStarted", lambda p: p["runId"] == run_id) == {
        "runId": run_id, "uri": uri, "workflowName": "haiku"
    }
    question = await second.expect("piflow/checkpoint", lambda p: p["runId"] == run_id)
    assert (question["name"], question["prompt"]) == ("ship", "Ship the haiku?")
    progress = await second.expect("piflow/runProgress", lambda p: p["runId"] == run_id)
    assert progress["reset"] is True and progress["state"] == "awaiting_input"
    assert [c["name"] for c in progress["checkpoints"]] == ["ship"]
    answer = await execute(second, "piflow.respond", {"runId": run_id, "name": "ship", "approved": True})
    assert answer["accepted"] is True
    finished = await second.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert finished["result"] == {"draft": "[scripted] Write a haiku", "verdict": "approved"}


async def test_the_editors_unsaved_text_is_what_runs(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("draft.workflow.js", 'return "saved";\n'))
    open_document(client, uri, 'return "unsaved";\n')
    run_id = (await execute(client, "piflow.run", {"uri": uri}))["runId"]
    view = await state_of(client, run_id, "completed")
    assert view["result"] == "unsaved" and view["uri"] == uri


FAN_OUT = """phase("fan");
const outs = await parallel("many", {
  t0: () => agent("task 0", { label: "t0" }), t1: () => agent("task 1", { label: "t1" }),
  t2: () => agent("task 2", { label: "t2" }), t3: () => agent("task 3", { label: "t3" }),
  t4: () => agent("task 4", { label: "t4" }), t5: () => agent("task 5", { label: "t5" }),
});
phase("last");
return [Object.keys(outs).length, await agent("last", { label: "last" })];
"""


async def test_progress_after_the_first_carries_only_the_agents_that_changed(start, workspace: Workspace) -> None:
    fixtures = workspace.write("slow.fixtures.json", json.dumps({"defaults": {"latencyMs": 300}}))
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("fan.workflow.js", FAN_OUT))
    open_document(client, uri, FAN_OUT)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": str(fixtures), "concurrency": 2}))["runId"]
    await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id, timeout=60)
    progress = [p for p in client.received("piflow/runProgress") if p["runId"] == run_id]
    assert progress[0]["reset"] is True
    assert len(progress) >= 3 and all(p["reset"] is False for p in progress[1:])
    known: dict[str, dict[str, Any]] = {}
    for message in progress:  # a client upserts by id: every agent listed is news
        for agent in message["agents"]:
            assert set(agent) == set(AGENT_KEYS)
            assert known.get(agent["id"]) != agent
            known[agent["id"]] = agent
    assert max(len(p["agents"]) for p in progress[1:]) < 7  # never the whole run again
    assert progress[-1]["agentCounts"] == {"total": 7, "settled": 7}
    view = await execute(client, "piflow.showRun", {"runId": run_id})
    assert known == {a["id"]: {k: a[k] for k in AGENT_KEYS} for a in view["agentList"]}


def _stat(pid: int) -> list[str]:
    """Fields 3.. of /proc/<pid>/stat (after the command name)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _niceness(pid: int) -> int:
    return int(_stat(pid)[16])  # field 19 of proc(5)


def _parent(pid: int) -> int:
    return int(_stat(pid)[1])


def _processes(argument: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if argument in Path(f"/proc/{entry}/cmdline").read_text(errors="replace"):
                    found.append(int(entry))
            except OSError:
                continue
    return found


async def test_a_run_launched_from_the_editor_runs_at_a_lower_priority_than_typing(
    start, workspace: Workspace
) -> None:
    fixtures = latencies(workspace, first=HOLD_MS)  # the owner and its worker live until the test stops the run
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("nice.workflow.js", SLOW))
    open_document(client, uri, SLOW)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": fixtures}))["runId"]
    await state_of(client, run_id, "running")
    owners = [pid for pid in _processes("--owner-process") if os.readlink(f"/proc/{pid}/cwd") == str(workspace.project)]
    assert owners, "no owner process found for the run"
    workers = [pid for pid in _processes("piflow.engine.worker") if _parent(pid) in owners]
    lower = min(19, _niceness(os.getpid()) + EDITOR_RUN_NICENESS)  # the editor's priority, lowered
    assert [_niceness(pid) for pid in owners] == [lower]
    assert workers and all(_niceness(pid) == lower for pid in workers)
    await execute(client, "piflow.stop", {"runId": run_id})
    await state_of(client, run_id, "stopped")
