"""`runs.steer` on the pi backend: a pi-subagents child running as a real pi session (`pi --mode
rpc`, installed by `scripts/install-pi`) is steered through pi's RPC `steer`/`follow_up`, and the
loopback chat server sees the message in the child's next model request."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import ChatServer, Stream, text_stream, tool_stream

from piflow.engine.backends.pi import PiBackend
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

STEER = "Use the blue plan."
WORKER = """---
name: worker
description: Summarises notes.
model: local/m1
tools: read
---
You summarise.
"""


@dataclasses.dataclass(frozen=True)
class Held:
    """A model reply held until the workflow creates `release`; `arrived` tells the workflow the
    request is in (how a script steers a child whose model turn is in flight, without timing)."""

    arrived: Path
    release: Path
    chunks: list[dict[str, Any] | str]
    limit: float = 120.0

    def send(self, handler: Any) -> None:
        self.arrived.touch()
        deadline = time.monotonic() + self.limit
        while not self.release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        Stream(self.chunks).send(handler)


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            texts.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
    return texts


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer, pi_command: list[str]) -> Path:
    """A project whose children run on the pi backend against the loopback server (isolated HOME)."""
    home = tmp_path / "home"
    agent_dir = home / ".pi" / "agent"
    (agent_dir / "agents").mkdir(parents=True)
    for name, value in {"HOME": home, "XDG_STATE_HOME": home / "state", "XDG_CONFIG_HOME": home / "config"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.setenv("PIFLOW_PI_COMMAND", shlex.join(pi_command))
    providers = {"local": {"baseUrl": server.url, "api": "openai-completions", "apiKey": "sk-literal",
                           "models": [{"id": "m1"}]}}
    (agent_dir / "models.json").write_text(json.dumps({"providers": providers}))
    (agent_dir / "agents" / "worker.md").write_text(WORKER)
    root = tmp_path / "project"
    root.mkdir()
    (root / "piflow.toml").write_text('[piflow]\nbackend = "pi"\nmodel = "local/m1"\n')
    (root / "notes.md").write_text("piflow notes\n")
    return root


async def _run(project: Path, script: str) -> Any:
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script="// piflow: pi-subagents\n" + script, cwd=str(project)))
            with anyio.fail_after(240):
                record = await engine.wait(run_id)
            assert record.state == "completed", record.error
            return record.result


def _steered(mode: str) -> str:
    """A script that steers child `w` while its first model request is held by the server."""
    return f"""const child = runs.run("w", {{agent: "worker", task: "Summarise notes.md."}});
await runs.host("wait", {{kind: "command", command: "until [ -f arrived ]; do sleep 0.05; done", timeoutMs: 120000}});
const receipt = await runs.steer("w", {json.dumps(STEER)}, {{mode: "{mode}"}});
await runs.host("release", {{kind: "command", command: "touch released", timeoutMs: 10000}});
return {{receipt, output: (await child).output}};"""


async def test_a_steer_reaches_the_running_pi_child_before_its_next_model_call(
    project: Path, server: ChatServer
) -> None:
    held = Held(project / "arrived", project / "released", tool_stream("read", {"path": "notes.md"}))
    server.script(held, Stream(text_stream("Blue plan: piflow notes.")))

    result = await _run(project, _steered("steer"))

    assert result["receipt"]["state"] == "delivered"
    assert result["receipt"]["key"] == "w"
    assert result["output"] == "Blue plan: piflow notes."
    first, second = server.bodies()
    assert STEER not in json.dumps(first)
    assert user_texts(second)[-1] == STEER  # after the read's tool result, before the model's next turn
    assert second["messages"][-2]["role"] == "tool"


async def test_a_follow_up_is_delivered_when_the_child_would_stop(project: Path, server: ChatServer) -> None:
    # Unlike a steer, a follow-up waits out the tool loop: it comes after the child's final answer.
    held = Held(project / "arrived", project / "released", tool_stream("read", {"path": "notes.md"}))
    server.script(held, Stream(text_stream("Plain summary.")), Stream(text_stream("Blue summary.")))

    result = await _run(project, _steered("follow_up"))

    assert result["receipt"]["state"] == "delivered"
    assert result["output"] == "Blue summary."  # the follow-up's turn is the child's last word
    _first, after_tool, after_answer = server.bodies()
    assert STEER not in json.dumps(after_tool)
    assert user_texts(after_answer)[-1] == STEER
    assert after_answer["messages"][-2] == {"role": "assistant", "content": "Plain summary."}


async def test_a_steer_for_an_agent_not_yet_running_is_queued_for_its_attempt(
    server: ChatServer, pi_command: list[str], tmp_path: Path
) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    provider = {"baseUrl": server.url, "api": "openai-completions", "apiKey": "sk", "models": [{"id": "m1"}]}
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"local": provider}}))
    (tmp_path / "home").mkdir()
    environ = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]}
    pi = PiBackend(command=pi_command, agent_dir=agent_dir, environ=environ)
    (tmp_path / "notes.txt").write_text("notes\n")
    request = dataclasses.replace(attempt_request(), cwd=str(tmp_path))
    server.script(Stream(tool_stream("read", {"path": "notes.txt"})), Stream(text_stream("Steered.")))

    assert await pi.steer(request.agent_id, STEER, "steer") == "queued"
    assert await pi.run_attempt(request, BudgetControl()) == "Steered."

    assert STEER in user_texts(server.bodies()[-1])


async def test_a_pi_child_is_stopped_at_the_tool_call_past_its_hard_tool_budget(
    project: Path, server: ChatServer
) -> None:
    # pi runs its own tools; piflow counts each as it starts and stops the session at the one past the limit.
    server.script(Stream(tool_stream("read", {"path": "notes.md"}, call_id="c1")),
                  Stream(tool_stream("read", {"path": "notes.md"}, call_id="c2")),
                  Stream(text_stream("never reached")))
    script = """try { await runs.run("a", {agent: "worker", task: "Work", toolBudget: {hard: 1}}); }
catch (error) { return error.message; }"""

    result = await _run(project, script)

    assert result == ("Run 'a' failed: Tool budget hard limit reached after 1 tool calls (hard 1). The child was "
                      "stopped before calling read; raise toolBudget.hard or narrow the task.")
    assert len(server.bodies()) == 2  # stopped at the second read: no third model request
