"""Following runs: the editor sees every run's end, whatever happened to the store meanwhile, and
its controls are plain requests on the store (no engine in the server, reads never write)."""

from __future__ import annotations

import asyncio
import os
import signal

from conftest import Workspace, open_document
from test_runs import SLOW, execute, latencies, state_of

from held import HOLD_MS
from piflow.engine import events
from piflow.engine.store import EventRecord, RunStore, default_store_path
from piflow.server.runs import fold_agent_changes

SCRIPT = 'const a = await agent("first", { label: "first" });\nreturn a;\n'


async def test_a_store_that_could_not_be_read_for_a_while_is_followed_again(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("once.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    store = default_store_path(workspace.project, workspace.env)
    store.parent.mkdir(parents=True, exist_ok=True)
    await asyncio.sleep(1.0)  # the server follows the project's store, which does not exist yet
    store.write_bytes(b"not a database " * 100)  # e.g. a store another process is still creating
    await asyncio.sleep(2.0)  # the server looks at it, and cannot read it
    store.unlink()
    run_id = (await execute(client, "piflow.run", {"uri": uri}))["runId"]
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id, timeout=30)
    assert (finished["state"], finished["result"]) == ("completed", "[scripted] first")


async def test_a_killed_owner_ends_the_run_in_the_editor_and_stop_cancels_its_agent(
    start, workspace: Workspace
) -> None:
    fixtures = latencies(workspace, first=HOLD_MS)  # `first` runs until the test kills its owner
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("slow.workflow.js", SLOW))
    open_document(client, uri, SLOW)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": fixtures}))["runId"]
    await client.expect("piflow/runProgress", lambda p: p["runId"] == run_id and p["agents"]
                        and p["agents"][0]["state"] == "running")
    path = default_store_path(workspace.project, workspace.env)
    with RunStore.open(path) as store:
        owner = store.lease_owner(run_id)
    assert owner is not None
    os.kill(owner[0], signal.SIGKILL)  # no goodbye: the run and its agent stay "running" in the store
    ended = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id, timeout=15)
    assert ended["state"] == "interrupted"  # the editor is told, though the owner recorded nothing
    assert (await state_of(client, run_id, "interrupted"))["state"] == "interrupted"
    with RunStore.open(path) as store:  # what the editor shows is read, never written
        record = store.get_run(run_id)
        assert record is not None and record.state == "running"
    assert (await execute(client, "piflow.stop", {"runId": run_id}))["stopped"] is True
    view = await state_of(client, run_id, "stopped")
    assert [(agent["label"], agent["state"]) for agent in view["agentList"]] == [("first", "cancelled")]
    again = await execute(client, "piflow.stop", {"runId": run_id})
    assert (again["stopped"], again["reason"]) == (False, "already_terminal")


def _agent_event(seq: int, run_id: str, agent_id: str, state: str) -> EventRecord:
    return EventRecord(seq, run_id, events.AGENT_STATE_CHANGED, {"agentId": agent_id, "state": state}, 0.0)


def test_agent_state_changes_reach_the_features_folded_per_run_and_state_in_order() -> None:
    found = [_agent_event(seq, "r1", f"a{seq}", "running") for seq in range(1, 1001)]
    found += [_agent_event(1001, "r2", "b1", "completed"), _agent_event(1002, "r1", "a1", "completed")]
    found.append(EventRecord(1003, "r1", events.PHASE_CHANGED, {"phase": "two"}, 0.0))
    found += [_agent_event(1004, "r1", "a2", "failed"), _agent_event(1005, "r1", "a3", "failed")]
    folded = [(event.seq, event.run_id, event.type, sorted(agents)) for event, agents in fold_agent_changes(found)]
    assert folded == [
        (1000, "r1", events.AGENT_STATE_CHANGED, sorted(f"a{seq}" for seq in range(1, 1001))),
        (1001, "r2", events.AGENT_STATE_CHANGED, ["b1"]),
        (1002, "r1", events.AGENT_STATE_CHANGED, ["a1"]),
        (1003, "r1", events.PHASE_CHANGED, []),
        (1005, "r1", events.AGENT_STATE_CHANGED, ["a2", "a3"]),
    ]
