"""Runs from the editor: lenses, commands, notifications, the plugin-less fallbacks, other processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from conftest import Client, Workspace, open_document
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from held import HOLD_MS
from piflow.engine.store import RunStore, default_store_path

SCRIPT = """phase("draft");
const draft = await agent("Write a haiku", { label: "poet" });
const verdict = await checkpoint({ name: "ship", prompt: "Ship the haiku?", context: { draft } });
return { draft, verdict };
"""

SLOW = """phase("one");
const a = await agent("first", { label: "first" });
phase("two");
const b = await agent("second", { label: "second" });
const c = await agent("third", { label: "third" });
return [a, b, c];
"""


async def execute(client: Client, command: str, argument: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, [argument]))


async def lenses(client: Client, uri: str) -> list[types.CodeLens]:
    found = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    return list(found or [])


async def titles(client: Client, uri: str) -> list[str]:
    return [lens.command.title for lens in await lenses(client, uri) if lens.command is not None]


async def press(client: Client, uri: str, title: str) -> Any:
    """Execute the command of the lens whose title starts with `title`."""
    lens = next(lens for lens in await lenses(client, uri) if lens.command and lens.command.title.startswith(title))
    assert lens.command is not None and lens.command.arguments
    return await execute(client, lens.command.command, lens.command.arguments[0])


async def state_of(client: Client, run_id: str, *wanted: str, timeout: float = 30) -> dict[str, Any]:
    async def wait() -> dict[str, Any]:
        while True:
            view: dict[str, Any] = await execute(client, "piflow.showRun", {"runId": run_id})
            if view["state"] in wanted:
                return view
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(wait(), timeout)


def latencies(workspace: Workspace, **by_label: int) -> str:
    """A fixture file where each named agent takes its latency (ms) and the others answer at once.
    A resume reads its run's fixture file again, so a rewrite changes what the next owner answers."""
    rules = [{"match": {"label": label}, "latencyMs": ms} for label, ms in by_label.items()]
    return str(workspace.write("slow.fixtures.json", json.dumps({"responses": rules})))


async def test_run_from_a_lens_reports_progress_and_asks_the_plugin(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("haiku.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    assert await titles(client, uri) == ["▶ Run", "▶ Run with args…"]
    run_id = (await press(client, uri, "▶ Run"))["runId"]
    started = await client.expect("piflow/runStarted", lambda p: p["runId"] == run_id)
    assert started == {"runId": run_id, "uri": uri, "workflowName": "haiku"}
    progress = await client.expect("piflow/runProgress", lambda p: p["runId"] == run_id and p["agents"])
    assert progress["workflowName"] == "haiku" and progress["uri"] == uri
    agent = progress["agents"][0]
    assert agent["label"] == "poet" and set(agent) == {
        "id", "label", "role", "model", "state", "attempts", "tokens", "costUsd", "activity", "parentId"
    }
    assert set(progress["budget"]) == {"limits", "usage", "events"}
    question = await client.expect("piflow/checkpoint", lambda p: p["runId"] == run_id)
    assert question == {
        "runId": run_id, "uri": uri, "name": "ship", "prompt": "Ship the haiku?",
        "context": {"draft": "[scripted] Write a haiku"},
    }
    waiting = await client.expect("piflow/runProgress", lambda p: p["runId"] == run_id and p["checkpoints"])
    assert waiting["state"] == "awaiting_input"
    approve = next(lens for lens in await lenses(client, uri) if lens.command and lens.command.title == "✓ Approve")
    assert approve.range.start.line == 2  # above the checkpoint(...) call
    answer = await execute(client, "piflow.respond", {"runId": run_id, "name": "ship", "approved": True})
    assert answer == {"accepted": True, "state": "checkpoint_answered", "approved": True, "reason": "checkpoint"}
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert finished == {
        "runId": run_id, "uri": uri, "state": "completed",
        "result": {"draft": "[scripted] Write a haiku", "verdict": "approved"},
    }
    ours = [(m, p) for m, p in client.log if m.startswith("piflow/") and p.get("runId") == run_id]
    assert ours[-2:] == [("piflow/runProgress", ours[-2][1]), ("piflow/runFinished", finished)]
    assert ours[-2][1]["state"] == "completed"  # the last snapshot before the end shows the end
    reports = [p.value for p in client.received(types.PROGRESS)]
    assert reports[0]["kind"] == "begin" and reports[-1] == {"kind": "end", "message": "completed"}
    assert not client.received(types.WINDOW_SHOW_MESSAGE_REQUEST)  # the plugin asks, not the server


async def test_without_a_plugin_checkpoints_are_asked_and_the_end_is_shown(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    client.answer = lambda params: "Approve" if "checkpoint ship" in params.message else None
    uri = workspace.uri(workspace.write("haiku.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await press(client, uri, "▶ Run"))["runId"]
    question = await client.expect(types.WINDOW_SHOW_MESSAGE_REQUEST)
    assert question.message.startswith("Workflow haiku checkpoint ship: Ship the haiku?\nContext: ")
    assert [action.title for action in question.actions] == ["Approve", "Reject"]
    done = await client.expect(types.WINDOW_SHOW_MESSAGE, lambda p: "completed" in p.message)
    assert done.message == 'Workflow haiku completed: {"draft": "[scripted] Write a haiku", "verdict": "approved"}'
    assert (await state_of(client, run_id, "completed"))["result"]["verdict"] == "approved"
    kinds = [p.value["kind"] for p in client.received(types.PROGRESS)]
    assert kinds[0] == "begin" and "report" in kinds and kinds[-1] == "end"
    assert not [m for m, _ in client.log if m.startswith("piflow/")]


async def test_a_progress_bar_that_begins_late_shows_where_the_run_already_is(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    client.hold_progress = asyncio.Event()  # the client is slow to create the run's progress token
    uri = workspace.uri(workspace.write("haiku.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await press(client, uri, "▶ Run"))["runId"]
    await client.expect(types.WINDOW_SHOW_MESSAGE_REQUEST)  # dismissed: the run waits at its checkpoint
    client.hold_progress.set()  # at once: the bar must not show the run as running after the question
    report = await client.expect(types.PROGRESS, lambda p: p.value["kind"] == "report")
    assert report.value["message"] == "awaiting input · phase draft · 1/1 agents"
    kinds = [p.value["kind"] for p in client.received(types.PROGRESS)]
    assert kinds[:2] == ["begin", "report"]
    await execute(client, "piflow.respond", {"runId": run_id, "name": "ship", "approved": True})
    await client.expect(types.PROGRESS, lambda p: p.value["kind"] == "end")
    assert client.received(types.PROGRESS)[-1].value == {"kind": "end", "message": "completed"}


async def test_pause_resume_and_stop_through_commands(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("slow.workflow.js", SLOW))
    open_document(client, uri, SLOW)
    # The pause lands while `first` runs (the owner reads requests every 0.2 s, and a pause lets the
    # running agent finish): 3 s of it is a margin for a loaded machine, where 400 ms per agent was not.
    # `third` holds the resumed run until the test stops it, so the stop always finds it running.
    fixtures = latencies(workspace, first=3000, third=HOLD_MS)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": fixtures}))["runId"]
    await state_of(client, run_id, "running")
    assert "⏸ Pause" in await titles(client, uri)
    assert (await press(client, uri, "⏸ Pause"))["runId"] == run_id
    paused = await state_of(client, run_id, "paused")
    assert paused["agents"]["total"] < 3
    listed = (await execute(client, "piflow.listRuns", {"uri": uri}))["runs"]
    assert [run["agents"] for run in listed] == [paused["agents"]]  # counted in the store, as the view counts
    assert f"↻ Resume {run_id[:8]} (paused)" in await titles(client, uri)
    assert (await press(client, uri, "↻ Resume"))["state"] == "running"
    await state_of(client, run_id, "running")
    stopped = await press(client, uri, "■ Stop")
    assert stopped == {"runId": run_id, "state": "stopped", "stopped": True}
    assert (await state_of(client, run_id, "stopped"))["state"] == "stopped"
    assert await titles(client, uri) == ["▶ Run", "▶ Run with args…"]
    with pytest.raises(JsonRpcException) as raised:
        await execute(client, "piflow.resume", {"runId": run_id})
    assert raised.value.code == -32803
    assert raised.value.data == {"code": "RESUME_INCOMPATIBLE", "message": "Cannot resume stopped run"}


async def test_a_run_whose_owner_was_interrupted_resumes_from_the_editor(
    start, workspace: Workspace
) -> None:
    """An owner that ends (SIGTERM) leaves its run interrupted; ↻ Resume starts a new owner."""
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("slow.workflow.js", SLOW))
    open_document(client, uri, SLOW)
    fixtures = latencies(workspace, first=HOLD_MS)  # the run has its owner until the test ends it
    run_id = (await execute(client, "piflow.run", {"uri": uri, "fixtures": fixtures}))["runId"]
    await state_of(client, run_id, "running")
    with RunStore.open(default_store_path(workspace.project, workspace.env)) as store:
        owner = store.lease_owner(run_id)
    assert owner is not None
    os.kill(owner[0], signal.SIGTERM)
    assert (await state_of(client, run_id, "interrupted"))["state"] == "interrupted"
    latencies(workspace)  # the resumed run's agents answer at once
    assert f"↻ Resume {run_id[:8]} (interrupted)" in await titles(client, uri)
    assert (await press(client, uri, "↻ Resume"))["state"] == "running"
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id and p["state"] == "completed",
                                   timeout=60)
    assert finished["result"] == ["[scripted] first", "[scripted] second", "[scripted] third"]


async def test_a_checkpoint_answered_from_a_terminal(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95", customNotifications=True)
    uri = workspace.uri(workspace.write("haiku.workflow.js", SCRIPT))
    open_document(client, uri, SCRIPT)
    run_id = (await execute(client, "piflow.run", {"uri": uri}))["runId"]
    await client.expect("piflow/checkpoint", lambda p: p["runId"] == run_id)
    approve = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "piflow", "approve", run_id[:8], "ship"],
        cwd=workspace.project, env=workspace.env, capture_output=True, text=True, timeout=60,
    )
    assert approve.returncode == 0, approve.stderr
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert finished["result"]["verdict"] == "approved"


async def test_runs_launched_in_a_terminal_show_in_the_editor(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95", customNotifications=True)
    path = workspace.write("haiku.workflow.js", SCRIPT)
    uri = workspace.uri(path)
    open_document(client, uri, SCRIPT)
    await titles(client, uri)  # the editor follows the project's run store from now on
    terminal = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "piflow", "run", str(path), cwd=workspace.project, env=workspace.env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    question = await client.expect("piflow/checkpoint", timeout=60)
    assert question["uri"] == uri
    assert "✓ Approve" in await titles(client, uri)
    await execute(client, "piflow.respond", {"runId": question["runId"], "name": "ship", "approved": False})
    finished = await client.expect("piflow/runFinished", lambda p: p["runId"] == question["runId"])
    assert finished["result"]["verdict"] == "rejected"
    await asyncio.wait_for(terminal.communicate(), 60)


async def test_list_and_show_runs(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'return await agent("once", { label: "once" });\n'
    uri = workspace.uri(workspace.write("once.workflow.js", text))
    open_document(client, uri, text)
    run_id = (await execute(client, "piflow.run", {"uri": uri, "args": {"n": 1}}))["runId"]
    view = await state_of(client, run_id, "completed")
    assert view["uri"] == uri and view["result"] == "[scripted] once"
    assert view["agentList"][0]["label"] == "once"
    listed = (await execute(client, "piflow.listRuns", {"uri": uri}))["runs"]
    assert [(run["runId"], run["state"], run["workflowName"], run["agents"]) for run in listed] == [
        (run_id, "completed", "once", {"total": 1, "settled": 1})
    ]
    assert (await execute(client, "piflow.listRuns", {}))["runs"][0]["uri"] == uri
    no_argument = await client.workspace_execute_command_async(types.ExecuteCommandParams("piflow.listRuns"))
    lua_empty_table = await client.workspace_execute_command_async(types.ExecuteCommandParams("piflow.listRuns", [[]]))
    assert no_argument == lua_empty_table == {"runs": listed}
    assert (await execute(client, "piflow.showRun", {"runId": run_id[:8]}))["runId"] == run_id


async def test_run_hints_show_each_agent_calls_outcome(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'const a = await agent("one", { label: "one" });\nreturn await agent("two");\n'
    uri = workspace.uri(workspace.write("hints.workflow.js", text))
    open_document(client, uri, text)
    run_id = (await execute(client, "piflow.run", {"uri": uri}))["runId"]
    await state_of(client, run_id, "completed")
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(9, 0))
        )
    )
    labels = [(hint.position.line, hint.position.character, hint.label) for hint in hints or []]
    assert [(line, column) for line, column, _ in labels] == [(0, 46), (1, 25)]
    assert all(isinstance(label, str) and label.startswith("✓ completed · ") for _, _, label in labels)


async def test_a_script_with_errors_cannot_run(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    text = 'await agent("x", { role: "nobody" });\n'
    uri = workspace.uri(workspace.write("broken.workflow.js", text))
    open_document(client, uri, text)
    assert await titles(client, uri) == ["▶ Run (fix 1 error first)"]
    explained = await press(client, uri, "▶ Run (fix")
    assert explained == {"errors": [{"code": "UNKNOWN_AGENT_TYPE", "message": "Unknown agent type: nobody", "line": 0}]}
    shown = await client.expect(types.WINDOW_SHOW_MESSAGE)
    assert "line 1: UNKNOWN_AGENT_TYPE: Unknown agent type: nobody" in shown.message
    with pytest.raises(JsonRpcException) as raised:
        await execute(client, "piflow.run", {"uri": uri})
    assert raised.value.data == {"code": "UNKNOWN_AGENT_TYPE", "message": "Unknown agent type: nobody"}


async def test_the_engine_compile_runs_before_a_launch(start, workspace: Workspace) -> None:
    """An early error only the engine compile finds refuses the run even before the compile on open ends."""
    client = await start("vscode_1.95")
    text = 'agent("x");\nlet v = /(?<a>x)(?<a>y)/;\n'
    uri = workspace.uri(workspace.write("early.workflow.js", text))
    open_document(client, uri, text)
    with pytest.raises(JsonRpcException) as raised:
        await execute(client, "piflow.run", {"uri": uri})
    assert raised.value.data["code"] == "INVALID_SYNTAX"


async def test_run_with_args_offers_the_args_file_without_a_plugin(start, workspace: Workspace) -> None:
    client = await start("neovim_0.11")
    client.answer = lambda params: next(
        (action.title for action in params.actions or [] if action.title.startswith("echo.args")), None
    )
    text = "return args;\n"
    uri = workspace.uri(workspace.write("echo.workflow.js", text))
    workspace.write("echo.args.json", '{"topic": "tests"}')
    open_document(client, uri, text)
    assert await press(client, uri, "▶ Run with args") == {"asked": True}
    done = await client.expect(types.WINDOW_SHOW_MESSAGE, lambda p: "completed" in p.message)
    assert done.message == 'Workflow echo completed: {"topic": "tests"}'


async def test_command_arguments_are_validated(start, workspace: Workspace) -> None:
    client = await start("vscode_1.95")
    with pytest.raises(JsonRpcException) as raised:
        await execute(client, "piflow.respond", {"runId": "x", "approved": True, "extra": 1})
    assert raised.value.code == -32602
    with pytest.raises(JsonRpcException) as unknown:
        await execute(client, "piflow.stop", {"runId": "12345678"})
    assert unknown.value.data == {"code": "RESUME_INCOMPATIBLE", "message": "Unknown workflow run: 12345678"}



TWO_AGENTS = 'const a = await agent("one", { label: "one" });\nreturn [a, await agent("two", { label: "two" })];\n'


@pytest.mark.parametrize("plugin", [True, False])
async def test_a_raised_budget_is_approved_before_the_run_resumes(start, workspace: Workspace, plugin: bool) -> None:
    client = await start("vscode_1.95" if plugin else "neovim_0.11", customNotifications=plugin)
    client.answer = lambda params: "Approve" if "raise its budget" in params.message else None
    uri = workspace.uri(workspace.write("budget.workflow.js", TWO_AGENTS))
    open_document(client, uri, TWO_AGENTS)
    launched = await execute(client, "piflow.run", {"uri": uri, "budget": {"agentLaunches": {"hard": 1}}})
    run_id = launched["runId"]
    await state_of(client, run_id, "budget_exhausted")
    assert f"↻ Resume {run_id[:8]} (budget_exhausted)" in await titles(client, uri)
    reply = await execute(client, "piflow.resume", {"runId": run_id, "budget": {"agentLaunches": {"hard": 5}}})
    assert reply["state"] == "budget_exhausted" and reply["proposalId"]
    if plugin:
        approval = await client.expect("piflow/budgetApproval", lambda p: p["runId"] == run_id)
        assert approval["proposalId"] == reply["proposalId"]
        assert approval["previous"] == {"agentLaunches": {"hard": 1}}
        assert approval["proposed"] == {"agentLaunches": {"hard": 5}}
        assert approval["consumed"]["agentLaunches"] == 1
        answer = {"runId": run_id, "proposalId": approval["proposalId"], "approved": True}
        assert (await execute(client, "piflow.respond", answer))["state"] == "running"
    else:
        question = await client.expect(types.WINDOW_SHOW_MESSAGE_REQUEST)
        assert "raise its budget" in question.message
    view = await state_of(client, run_id, "completed")
    assert view["result"] == ["[scripted] one", "[scripted] two"]
