"""Agents on Temporal workers keep what the embedded engine gives them: a conversation continues on
another machine (its state travels with the run's workflow), and extension tools installed on the
workers run there. Real dev server, real `piflow worker`s, a real chat-completions server on loopback."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from temporal_support import machine, openai_project, until_state

from backends.chat_server import ChatServer, Stream, text_stream, tool_stream, usage
from piflow.engine.engine import LaunchRequest
from piflow.engine.lifecycle import ENDED
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from temporal_cluster import DevServer

CONVERSATION = """
const chat = conversation("chat");
const first = await chat.run("I am Ada.");
await checkpoint({name: "handover", prompt: "Continue on another worker?", context: null});
const second = await chat.run("Who am I?");
return [first, second];
"""

EXTENSION = '''
from pathlib import Path

EXTENSION = {
    "version": "1.0.0", "headline": "Tickets", "description": "The project's ticket tracker",
    "tools": {"ticket": {
        "description": "Read one ticket by id",
        "input": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "run": lambda value, context: (Path(context.cwd) / "tickets" / (value["id"] + ".txt")).read_text(),
    }},
}
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chat: ChatServer) -> Path:
    """A project on the openai backend (`local/m1` is the loopback server), this process's home isolated."""
    return openai_project(tmp_path, monkeypatch, chat)


def conversation_turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


async def test_a_conversation_continues_on_another_machine(
    tmp_path: Path, dev_server: DevServer, chat: ChatServer, project: Path
) -> None:
    chat.script(Stream(text_stream("Nice to meet you, Ada.", counts=usage(50, 6))),
                Stream(text_stream("You are Ada.", counts=usage(80, 4))))
    task_queue = f"piflow-conversation-{os.getpid()}-{tmp_path.name}"
    first = machine(dev_server, tmp_path / "machine-a", task_queue, chat)
    second = machine(dev_server, tmp_path / "machine-b", task_queue, chat)
    try:
        first.start(1)
        async with TemporalRuns(TemporalSettings(address=dev_server.address, task_queue=task_queue),
                                str(project)) as runs:
            run_id = await runs.launch(LaunchRequest(script=CONVERSATION, cwd=str(project)))
            waiting = await until_state(runs, run_id, {"awaiting_input", *ENDED}, 120)
            assert waiting.state == "awaiting_input", (waiting.error, first.logs())
            first.stop_all()  # turn 1's session lived on machine A; only the run's workflow remembers it
            second.start(1)
            assert await runs.respond(run_id, "handover", True)
            final = await until_state(runs, run_id, ENDED, 120)
    finally:
        first.stop_all()
        second.stop_all()
    assert (final.state, final.result) == ("completed", ["Nice to meet you, Ada.", "You are Ada."]), final.error
    assert len(chat.requests) == 2, "turn 1 was journaled, not asked again"
    one, two = (conversation_turns(request.body) for request in chat.requests)
    assert two[:2] == [one[0], ("assistant", "Nice to meet you, Ada.")], "turn 2 carries turn 1's messages"
    assert two[2][0] == "user" and "Who am I?" in two[2][1]
    assert chat.requests[1].body["messages"][0] == chat.requests[0].body["messages"][0], "the same system prompt"


async def test_an_extension_tool_installed_on_the_workers_runs_there(
    tmp_path: Path, dev_server: DevServer, chat: ChatServer, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"  # installed as users install an extension: a module and its entry point
    (site / "tickets_ext-1.0.0.dist-info").mkdir(parents=True)
    (site / "tickets_ext.py").write_text(EXTENSION)
    (site / "tickets_ext-1.0.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tickets-ext\nVersion: 1.0.0\n")
    (site / "tickets_ext-1.0.0.dist-info" / "entry_points.txt").write_text(
        "[piflow.extensions]\ntickets = tickets_ext:EXTENSION\n")
    monkeypatch.syspath_prepend(str(site))  # for the launch's validation here and the workers' PYTHONPATH
    sys.modules.pop("tickets_ext", None)
    (project / "tickets").mkdir()
    (project / "tickets" / "42.txt").write_text("The login page is slow.")
    chat.script(Stream(tool_stream("ticket", {"id": "42"}, counts=usage(60, 8))),
                Stream(text_stream("Ticket 42: slow login.", counts=usage(90, 6))))
    task_queue = f"piflow-tools-{os.getpid()}-{tmp_path.name}"
    pool = machine(dev_server, tmp_path / "machine", task_queue, chat)
    try:
        pool.start(1)
        async with TemporalRuns(TemporalSettings(address=dev_server.address, task_queue=task_queue),
                                str(project)) as runs:
            run_id = await runs.launch(LaunchRequest(
                script='return await agent("Summarize ticket 42.", {label: "triage", tools: ["ticket"]});',
                cwd=str(project)))
            final = await until_state(runs, run_id, ENDED, 120)
    finally:
        pool.stop_all()
    assert (final.state, final.result) == ("completed", "Ticket 42: slow login."), (final.error, pool.logs())
    offered = [tool["function"]["name"] for tool in chat.requests[0].body["tools"]]
    assert offered == ["ticket"]
    replies = [m["content"] for m in chat.requests[1].body["messages"] if m["role"] == "tool"]
    assert replies == ["The login page is slow."]
