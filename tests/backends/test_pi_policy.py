"""`disabledAgentResources` on the pi backend, with the real pi CLI against the loopback server: a
disabled skill is not in the system prompt the model gets, a disabled extension's tools are not
offered, and the prompt pi really sent is what the attempt records (spec D, J.3 `setup`)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import ChatServer, Stream, text_stream, usage
from conftest import PRICES

from piflow.config.resources import ResourcePolicy
from piflow.engine.backends.pi import PiBackend

SKILL = "---\nname: {name}\ndescription: {description}\n---\nSteps for {name}.\n"
EXTENSION = """export default function (pi) {
  pi.registerTool({
    name: "ticket", label: "Ticket", description: "Open a ticket.",
    parameters: { type: "object", properties: {} },
    async execute() { return { content: [{ type: "text", text: "opened" }], details: {} }; },
  });
}
"""


@pytest.fixture
def agent_dir(tmp_path: Path, server: ChatServer) -> Path:
    agent = tmp_path / "agent"
    provider = {"baseUrl": server.url, "api": "openai-completions", "apiKey": "sk-test",
                "models": [{"id": "m1", "cost": {**PRICES.to_json(), "cacheWrite": 0}}]}
    for name, description in (("deploy", "Ship the release to production."), ("review", "Review a change.")):
        (agent / "skills" / name).mkdir(parents=True)
        (agent / "skills" / name / "SKILL.md").write_text(SKILL.format(name=name, description=description))
    (agent / "extensions").mkdir()
    (agent / "extensions" / "tickets.js").write_text(EXTENSION)
    (agent / "models.json").write_text(json.dumps({"providers": {"local": provider}}), encoding="utf-8")
    return agent


@pytest.fixture
def pi(pi_command: list[str], agent_dir: Path, tmp_path: Path) -> PiBackend:
    home = tmp_path / "home"
    home.mkdir()
    return PiBackend(command=pi_command, agent_dir=agent_dir, environ={"HOME": str(home), "PATH": os.environ["PATH"]})


async def _attempt(server: ChatServer, pi: PiBackend, tmp_path: Path,
                   policy: ResourcePolicy) -> tuple[str, list[str], BudgetControl]:
    """One attempt offered `read` and the extension's `ticket`: the system prompt and tool names of
    the model's request, and what the attempt reported."""
    server.script(Stream(text_stream("Done.", counts=usage(100, 5))))
    request = dataclasses.replace(attempt_request(tools=("read", "ticket")), cwd=str(tmp_path), resources=policy)
    control = BudgetControl()
    assert await pi.run_attempt(request, control) == "Done."
    [sent] = server.requests
    return (sent.body["messages"][0]["content"], [tool["function"]["name"] for tool in sent.body["tools"]],
            control)


async def test_without_a_policy_pi_offers_every_skill_and_extension_tool(
    server: ChatServer, pi: PiBackend, tmp_path: Path
) -> None:
    system, tools, control = await _attempt(server, pi, tmp_path, ResourcePolicy())
    assert "<name>deploy</name>" in system and "<name>review</name>" in system
    assert tools == ["read", "ticket"]
    assert control.system_prompts and set(control.system_prompts) == {system}


async def test_disabled_skills_leave_the_prompt_and_disabled_extensions_lose_their_tools(
    server: ChatServer, pi: PiBackend, tmp_path: Path, agent_dir: Path
) -> None:
    policy = ResourcePolicy(skills=("deploy",), extensions=(str((agent_dir / "extensions").resolve()),))
    system, tools, control = await _attempt(server, pi, tmp_path, policy)
    assert "deploy" not in system and "Ship the release" not in system
    assert "<name>review</name>" in system
    assert tools == ["read"]
    # what piflow records as the attempt's effective prompt is the one the model got
    assert set(control.system_prompts) == {system}


async def test_when_every_skill_is_disabled_the_skill_list_goes_too(
    server: ChatServer, pi: PiBackend, tmp_path: Path
) -> None:
    system, tools, _ = await _attempt(server, pi, tmp_path, ResourcePolicy(skills=("deploy", "review")))
    assert "<available_skills>" not in system and "The following skills" not in system
    assert tools == ["read", "ticket"]
