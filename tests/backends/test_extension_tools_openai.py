"""Tools registered by an installed piflow extension, called by a model on the openai backend over
real HTTP: the model sees the tool's schema, piflow runs the Python function in the agent's
directory, and its reply (or its failure) reaches the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from chat_server import ChatServer, Stream, text_stream, tool_stream

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.extensions import load_extensions
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

EXTENSION_SOURCE = '''
from pathlib import Path


def ticket(value, context):
    """Reads a ticket of the project the agent works in."""
    if value["id"] == "0":
        raise LookupError("ticket 0 does not exist")
    return {"id": value["id"], "text": (Path(context.cwd) / "tickets" / (value["id"] + ".txt")).read_text()}


EXTENSION = {
    "version": "1.0.0",
    "headline": "Tickets",
    "description": "The project's ticket tracker",
    "tools": {
        "ticket": {
            "description": "Read one ticket by id",
            "input": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "run": ticket,
        },
    },
}
'''

SCRIPT = 'return await agent("Summarize ticket 42.", {label: "triage", tools: ["ticket", "read"]});'


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extension installed as users install one: a module and its `piflow.extensions` entry point."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "tickets_ext.py").write_text(EXTENSION_SOURCE)
    dist = root / "tickets_ext-1.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tickets-ext\nVersion: 1.0.0\n")
    (dist / "entry_points.txt").write_text("[piflow.extensions]\ntickets = tickets_ext:EXTENSION\n")
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop("tickets_ext", None)


def tool_replies(body: dict[str, object]) -> list[object]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [message["content"] for message in messages if message["role"] == "tool"]


async def run_script(project: Path, script: str) -> tuple[str, object, list[str], str | None]:
    """Launch `script` with the installed extensions; its state, result, activities and transcript."""
    activities: list[str] = []
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store, extensions=load_extensions()) as engine:
            run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project)))
            with anyio.fail_after(60):
                while (record := store.get_run(run_id)) is None or record.state in ("queued", "running"):
                    activities += [a.activity for a in store.agents(run_id) if a.activity]
                    await anyio.sleep(0.005)
                record = await engine.wait(run_id)
        transcript = None
        for agent in store.agents(run_id):
            transcript = store.attempts(agent.id)[-1].transcript_path
    return record.state, record.result if record.state == "completed" else record.error, activities, transcript


@pytest.mark.usefixtures("installed")
async def test_the_model_sees_an_extension_tool_and_piflow_runs_it_in_the_agents_directory(
    project: Path, server: ChatServer
) -> None:
    (project / "tickets").mkdir()
    (project / "tickets" / "42.txt").write_text("Login fails on Safari")
    # The reply after the tool call streams slowly (`delay` before each chunk), as a model's does:
    # the tool's activity stays shown until it streams, long enough for run_script's store poll to
    # see it on a loaded machine (a reply at once left `ticket` up for about a millisecond).
    server.script(
        Stream(tool_stream("ticket", {"id": "42"}, call_id="c1")),
        Stream(text_stream("Ticket 42: login fails on Safari."), delay=0.1),
    )

    state, result, activities, transcript = await run_script(project, SCRIPT)

    assert state == "completed", result
    assert result == "Ticket 42: login fails on Safari."
    first, second = server.bodies()
    offered = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert list(offered) == ["ticket", "read"]
    assert offered["ticket"]["description"] == "Read one ticket by id"
    assert offered["ticket"]["parameters"]["required"] == ["id"]
    assert [json.loads(str(reply)) for reply in tool_replies(second)] == [
        {"id": "42", "text": "Login fails on Safari"}]
    assert "ticket" in activities
    assert transcript is not None
    lines = [json.loads(line) for line in Path(transcript).read_text().splitlines()]
    assert [(line["tool"]["name"], line["tool"]["isError"]) for line in lines if "tool" in line] == [
        ("ticket", False)]


@pytest.mark.usefixtures("installed")
async def test_a_failing_or_misused_extension_tool_is_a_tool_error_the_model_reads(
    project: Path, server: ChatServer
) -> None:
    server.script(
        Stream(tool_stream("ticket", {"id": "0"}, call_id="c1")),
        Stream(tool_stream("ticket", {"number": 42}, call_id="c2")),
        Stream(text_stream("No such ticket.")),
    )

    state, result, _activities, _transcript = await run_script(project, SCRIPT)

    assert (state, result) == ("completed", "No such ticket.")
    bodies = server.bodies()
    assert tool_replies(bodies[1]) == ["ticket failed: ticket 0 does not exist"]
    assert tool_replies(bodies[2])[-1] == "Invalid input for ticket: it must match the tool's input schema"


@pytest.mark.usefixtures("installed")
async def test_an_agent_gets_only_the_extension_tools_it_names(project: Path, server: ChatServer) -> None:
    server.script(Stream(text_stream("Done.")))

    state, _result, _activities, _transcript = await run_script(
        project, 'return await agent("Look around.", {label: "plain", tools: ["ls"]});')

    assert state == "completed"
    [body] = server.bodies()
    assert [tool["function"]["name"] for tool in body["tools"]] == ["ls"]


async def test_a_tool_no_extension_registers_is_unknown_at_launch(project: Path, server: ChatServer) -> None:
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store, extensions=load_extensions()) as engine:
            with pytest.raises(WorkflowError) as error:
                await engine.launch(LaunchRequest(script=SCRIPT, cwd=str(project)))
    assert error.value.code == "UNKNOWN_TOOL"
    assert "ticket" in error.value.message
    assert server.bodies() == []
