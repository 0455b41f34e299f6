"""Child agents (spec J.5) and steering on the openai backend, over real HTTP on loopback (and what
the pi backend is given instead)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import ChatServer, Stream, text_stream, tool_stream, usage

from piflow.engine.backends.openai import OpenAIBackend
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

LEAD = 'return await agent("Delegate the survey.", {label: "lead", tools: ["read", "agent"]});'


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [message["content"] for message in body["messages"] if message["role"] == "tool"]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


async def _run(project: Path, script: str, **fields: Any) -> tuple[Any, list[Any]]:
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project), **fields))
            with anyio.fail_after(60):
                record = await engine.wait(run_id)
        return record, store.agents(run_id)


async def test_the_model_spawns_a_child_and_collects_its_result(project: Path, server: ChatServer) -> None:
    # Concurrency 1 makes the order of requests fixed: the child can only run once its parent waits.
    server.script(
        Stream(tool_stream("agent", {"prompt": "List the files.", "label": "scout"}, call_id="c1",
                           counts=usage(50, 5))),
        ToChild("get_subagent_result"),
        Stream(text_stream("a.txt and b.txt", counts=usage(30, 4))),
        Stream(text_stream("The scout found a.txt and b.txt.", counts=usage(70, 8))),
    )
    record, agents = await _run(project, LEAD, concurrency=1)
    assert record.state == "completed", record.error
    assert record.result == "The scout found a.txt and b.txt."
    lead, scout = agents
    assert scout.parent_id == lead.id and scout.label == "scout" and scout.tools == ["read", "agent"]
    bodies = server.bodies()
    assert tool_names(bodies[0]) == ["read", "agent", "get_subagent_result", "steer_subagent"]
    assert json.loads(tool_messages(bodies[1])[0]) == {"id": scout.id}
    assert f"Parent: {lead.id}" in bodies[2]["messages"][1]["content"]  # the child's task prompt
    assert json.loads(tool_messages(bodies[3])[-1]) == {"id": scout.id, "ok": True, "value": "a.txt and b.txt"}
    assert record.usage["agentLaunches"] == 2
    assert (scout.tokens_input, scout.tokens_output) == (30, 4)
    assert record.usage["tokens"] == sum(a.tokens_input + a.tokens_output for a in agents)  # children count


@dataclass(frozen=True)
class ToChild:
    """A reply calling `name` on the child whose id the request's `agent` tool result carries."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def send(self, handler: Any) -> None:
        body = handler.chat.requests[-1].body
        spawned = next(json.loads(text) for text in tool_messages(body) if text.startswith('{"id"'))
        Stream(tool_stream(self.name, {"id": spawned["id"], **self.arguments}, call_id=self.name)).send(handler)


async def test_results_and_steering_are_scoped_to_direct_children(project: Path, server: ChatServer) -> None:
    server.script(
        Stream(tool_stream("get_subagent_result", {"id": "someone-else"}, call_id="c1")),
        Stream(tool_stream("steer_subagent", {"id": "someone-else", "message": "hi"}, call_id="c2")),
        Stream(tool_stream("agent", {"prompt": "x", "label": ""}, call_id="c3")),
        Stream(text_stream("ok")),
    )
    record, _agents = await _run(project, LEAD)
    assert record.state == "completed", record.error
    bodies = server.bodies()
    assert tool_messages(bodies[1]) == [
        "The workflow requested the unavailable agent role Results are scoped to direct children."]
    assert tool_messages(bodies[2])[-1] == (
        "The workflow requested the unavailable agent role Steering is scoped to direct children.")
    assert tool_messages(bodies[3])[-1] == "The workflow metadata is invalid: Invalid child agent parameters."


async def test_an_agent_without_the_agent_tool_is_offered_no_child_tools(project: Path, server: ChatServer) -> None:
    server.script(Stream(text_stream("done")))
    record, _agents = await _run(project, 'return await agent("x", {tools: ["read"]});')
    assert record.state == "completed", record.error
    assert tool_names(server.bodies()[0]) == ["read"]


async def test_a_steer_message_reaches_the_next_model_turn(project: Path, server: ChatServer) -> None:
    # The parent spawns a child, steers it while it is still queued, then waits: the child's first
    # request carries the steering message after its task.
    server.script(
        Stream(tool_stream("agent", {"prompt": "Survey.", "label": "scout"}, call_id="c1")),
        ToChild("steer_subagent", {"message": "Only look at docs/."}),
        ToChild("get_subagent_result"),
        Stream(text_stream("docs/ has one file")),
        Stream(text_stream("done")),
    )
    record, _agents = await _run(project, LEAD, concurrency=1)
    assert record.state == "completed", record.error
    bodies = server.bodies()
    assert tool_messages(bodies[2])[-1] == "Steering delivered."
    child = [m["content"] for m in bodies[3]["messages"] if m["role"] == "user"]
    assert child[-1] == "Only look at docs/." and "Task:\nSurvey." in child[0]


async def test_steering_a_running_attempt_joins_its_next_request(
    server: ChatServer, backend: OpenAIBackend, tmp_path: Path
) -> None:
    # `runs.steer` of pi-subagents: the message arrives while a tool runs and is sent with the next turn.
    # The tool runs until the test has steered (a fixed `sleep 1` could end first on a loaded machine).
    until_steered = "until [ -f steered ]; do sleep 0.05; done"
    server.script(Stream(tool_stream("bash", {"command": until_steered})), Stream(text_stream("Adjusted.")))
    request = attempt_request(tools=("bash",), cwd=str(tmp_path))
    answers: list[str] = []

    async def steer_while_the_tool_runs() -> None:
        while len(server.requests) < 1:
            await anyio.sleep(0.01)
        answers.append(await backend.steer(request.agent_id, "Stop after the first file.", "steer"))
        (tmp_path / "steered").touch()

    async with anyio.create_task_group() as group:
        group.start_soon(steer_while_the_tool_runs)
        assert await backend.run_attempt(request, BudgetControl()) == "Adjusted."

    assert answers == ["delivered"]
    messages = server.requests[1].body["messages"]
    assert messages[-1] == {"role": "user", "content": "Stop after the first file."}
    assert messages[-2]["role"] == "tool"
    assert await backend.steer("someone", "later", "steer") == "queued"


async def test_a_pi_attempt_without_children_is_not_offered_the_agent_tool(tmp_path: Path) -> None:
    from piflow.engine.backends.pi import PiBackend
    from piflow.errors import WorkflowError

    record = tmp_path / "args"
    pi = tmp_path / "pi"
    pi.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > {record}\n', encoding="utf-8")
    pi.chmod(0o755)
    backend = PiBackend(command=[str(pi)], agent_dir=tmp_path / "agent", environ={"PATH": ""})
    with pytest.raises(WorkflowError):  # the stand-in pi exits without a session
        await backend.run_attempt(attempt_request(tools=("read", "agent")), BudgetControl())
    args = record.read_text(encoding="utf-8").splitlines()
    assert args[args.index("--tools") + 1] == "read"
