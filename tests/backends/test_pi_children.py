"""Child agents (spec J.5) on the pi backend: the real pi CLI (`scripts/install-pi`) calls piflow's
`agent`, `get_subagent_result` and `steer_subagent` tools through the bridge, against the loopback
chat-completions server; the engine runs the children (as pi sessions too)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from chat_server import ChatServer, Stream, text_stream, tool_stream, usage

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

LEAD = 'return await agent("Delegate the survey.", {label: "lead", tools: ["read", "agent"]});'
CHILD_TOOLS = ["agent", "get_subagent_result", "steer_subagent"]


@pytest.fixture
def pi_project(project: Path, pi_command: list[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The loopback project of conftest, run by the pi backend (pi reads the same models.json)."""
    monkeypatch.setenv("PIFLOW_PI_COMMAND", shlex.join(pi_command))
    (project / "piflow.toml").write_text('[piflow]\nbackend = "pi"\nmodel = "local/m1"\n')
    return project


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [_text(message.get("content")) for message in body["messages"] if message["role"] == "tool"]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


@dataclass(frozen=True)
class ToChild:
    """A reply calling `name` on the child whose id the request's `agent` tool result carries."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def send(self, handler: Any) -> None:
        body = handler.chat.requests[-1].body
        spawned = next(json.loads(text) for text in tool_messages(body) if text.startswith('{"id"'))
        Stream(tool_stream(self.name, {"id": spawned["id"], **self.arguments}, call_id=self.name)).send(handler)


@dataclass(frozen=True)
class ByAgent:
    """A reply for whichever agent asks: `child` when the request is the child's (its task names
    `child_task`), else `parent` — for exchanges where pi decides how many calls a message takes."""

    child_task: str
    child: Stream
    parent: Stream

    def send(self, handler: Any) -> None:
        body = handler.chat.requests[-1].body
        users = [_text(message.get("content")) for message in body["messages"] if message["role"] == "user"]
        (self.child if self.child_task in users[0] else self.parent).send(handler)


async def _run(project: Path, script: str, **fields: Any) -> tuple[Any, list[Any]]:
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            # Concurrency 1 fixes the order of requests: the child runs only once its parent waits.
            run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project), concurrency=1, **fields))
            with anyio.fail_after(240):  # three pi start-ups (probe, lead, child) on a loaded machine
                record = await engine.wait(run_id)
        return record, store.agents(run_id)


async def test_a_pi_agent_spawns_a_child_and_collects_its_result(pi_project: Path, server: ChatServer) -> None:
    server.script(
        Stream(tool_stream("agent", {"prompt": "List the files.", "label": "scout"}, call_id="c1",
                           counts=usage(50, 5))),
        ToChild("get_subagent_result"),
        Stream(text_stream("a.txt and b.txt", counts=usage(30, 4))),
        Stream(text_stream("The scout found a.txt and b.txt.", counts=usage(70, 8))),
    )
    record, agents = await _run(pi_project, LEAD)
    assert record.state == "completed", record.error
    assert record.result == "The scout found a.txt and b.txt."
    lead, scout = agents
    assert scout.parent_id == lead.id and scout.label == "scout"
    bodies = server.bodies()
    assert len(bodies) == 4
    assert sorted(tool_names(bodies[0])) == sorted(["read", *CHILD_TOOLS])
    agent_tool = next(tool["function"] for tool in bodies[0]["tools"] if tool["function"]["name"] == "agent")
    assert agent_tool["parameters"]["required"] == ["prompt", "label"]
    assert json.loads(tool_messages(bodies[1])[0]) == {"id": scout.id}
    assert f"Parent: {lead.id}" in _text(bodies[2]["messages"][1]["content"])  # the child's task prompt
    assert sorted(tool_names(bodies[2])) == sorted(["read", *CHILD_TOOLS])  # it inherits the lead's tools
    assert json.loads(tool_messages(bodies[3])[-1]) == {"id": scout.id, "ok": True, "value": "a.txt and b.txt"}
    assert record.usage["agentLaunches"] == 2
    assert (scout.tokens_input, scout.tokens_output) == (30, 4)


async def test_a_pi_agent_is_refused_results_and_steering_out_of_scope(pi_project: Path, server: ChatServer) -> None:
    server.script(
        Stream(tool_stream("get_subagent_result", {"id": "someone-else"}, call_id="c1")),
        Stream(tool_stream("steer_subagent", {"id": "someone-else", "message": "hi"}, call_id="c2")),
        Stream(tool_stream("agent", {"prompt": "x", "label": ""}, call_id="c3")),
        Stream(text_stream("ok")),
    )
    record, agents = await _run(pi_project, LEAD)
    assert record.state == "completed", record.error
    assert len(agents) == 1  # no child started
    bodies = server.bodies()
    assert tool_messages(bodies[1]) == [
        "The workflow requested the unavailable agent role Results are scoped to direct children."]
    assert tool_messages(bodies[2])[-1] == (
        "The workflow requested the unavailable agent role Steering is scoped to direct children.")
    assert tool_messages(bodies[3])[-1] == "The workflow metadata is invalid: Invalid child agent parameters."


async def test_a_pi_agent_without_the_agent_tool_gets_no_child_tools(pi_project: Path, server: ChatServer) -> None:
    server.script(Stream(text_stream("done")))
    record, _agents = await _run(pi_project, 'return await agent("x", {tools: ["read"]});')
    assert record.state == "completed", record.error
    assert tool_names(server.bodies()[0]) == ["read"]


async def test_a_child_stopped_by_the_budget_ends_its_pi_parent(pi_project: Path, server: ChatServer) -> None:
    server.script(
        Stream(tool_stream("agent", {"prompt": "List the files.", "label": "scout"}, call_id="c1")),
        ToChild("get_subagent_result"),
        Stream(text_stream("never sent")),
    )
    record, agents = await _run(pi_project, LEAD, budget={"agentLaunches": {"hard": 1}})
    assert record.state == "budget_exhausted", record.error
    lead = next(agent for agent in agents if agent.label == "lead")
    assert lead.error is not None and lead.error["code"] == "BUDGET_EXHAUSTED"
    assert len(server.bodies()) == 2  # the child never ran, and the lead made no further model call


async def test_a_pi_agent_steers_its_child(pi_project: Path, server: ChatServer) -> None:
    # The child is still queued when it is steered (concurrency 1), so the message reaches its pi
    # session right after its task prompt; pi may answer the task first and the message next.
    answer = ByAgent("Task:\nSurvey.", Stream(text_stream("docs/ has one file")), Stream(text_stream("done")))
    server.script(
        Stream(tool_stream("agent", {"prompt": "Survey.", "label": "scout"}, call_id="c1")),
        ToChild("steer_subagent", {"message": "Only look at docs/."}),
        ToChild("get_subagent_result"),
        answer, answer, answer,
    )
    record, _agents = await _run(pi_project, LEAD)
    assert record.state == "completed", record.error
    assert record.result == "done"
    bodies = server.bodies()
    assert tool_messages(bodies[2])[-1] == "Steering delivered."
    child = [body for body in bodies if "Task:\nSurvey." in _text(body["messages"][1]["content"])]
    assert child, "the child made no request"
    assert ("user", "Only look at docs/.") in [(m["role"], _text(m["content"])) for m in child[-1]["messages"]]
