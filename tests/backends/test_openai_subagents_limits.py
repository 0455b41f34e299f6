"""pi-subagents children on the openai backend, over real HTTP: an agent's `fallbackModels` take over
when the provider answers 5xx, and `toolBudget.hard` counts the tool calls of the openai tool loop."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from chat_server import Body, ChatServer, Stream, text_stream, tool_stream

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

AGENT = """---
name: flaky
description: Works on a provider that falls over.
model: local/m1
fallbackModels: local/m2
tools: read
---
You work.
"""


def _setup(project: Path) -> None:
    agent_dir = Path.home() / ".pi" / "agent"
    models = json.loads((agent_dir / "models.json").read_text())
    models["providers"]["local"]["models"].append({"id": "m2"})
    (agent_dir / "models.json").write_text(json.dumps(models))
    (agent_dir / "agents").mkdir()
    (agent_dir / "agents" / "flaky.md").write_text(AGENT)
    (project / "notes.md").write_text("notes\n")


async def _run(project: Path, script: str) -> tuple[object, list[str]]:
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script="// piflow: pi-subagents\n" + script, cwd=str(project)))
            with anyio.fail_after(60):
                record = await engine.wait(run_id)
            assert record.state == "completed", record.error
            [child] = store.agents(run_id)
            return record.result, [(a.setup.model if a.setup else None) or "?" for a in store.attempts(child.id)]


async def test_a_5xx_from_the_provider_moves_the_child_to_its_fallback_model(project: Path, server: ChatServer) -> None:
    _setup(project)
    server.script(Body({"error": {"message": "The server is overloaded, try again later"}}, status=503),
                  Stream(text_stream("answered by m2")))
    result, models = await _run(project, 'return (await runs.run("a", {agent: "flaky", task: "Work"})).output;')
    assert result == "answered by m2"
    assert models == ["local/m1", "local/m2"]
    assert [body["model"] for body in server.bodies()] == ["m1", "m2"]


async def test_the_openai_tool_loop_counts_tool_calls_against_the_hard_tool_budget(
    project: Path, server: ChatServer
) -> None:
    _setup(project)
    server.script(Stream(tool_stream("read", {"path": "notes.md"}, call_id="c1")),
                  Stream(tool_stream("read", {"path": "notes.md"}, call_id="c2")),
                  Stream(text_stream("never reached")))
    script = """try { await runs.run("a", {agent: "flaky", task: "Work", toolBudget: {hard: 1}}); }
catch (error) { return error.message; }"""
    result, models = await _run(project, script)
    assert result == ("Run 'a' failed: Tool budget hard limit reached after 1 tool calls (hard 1). The child was "
                      "stopped before calling read; raise toolBudget.hard or narrow the task.")
    assert models == ["local/m1"]  # a spent tool budget is not a provider failure: no fallback
    assert len(server.bodies()) == 2  # the second read never ran, so no third request
