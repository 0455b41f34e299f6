"""Extension functions, variables and named workflows registered from Python (spec L)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from engine_support import finished

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.extensions import ExtensionRegistry, FunctionContext, load_extensions
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

calls: list[dict[str, Any]] = []


async def summarize(value: dict[str, Any], context: FunctionContext) -> dict[str, Any]:
    calls.append(value)
    answer = await context.agent(f"Summarize {value['text']}", {"label": "summarizer"})
    return {"summary": answer, "run": context.run["workflow"]}


EXTENSION = {
    "version": "1.0.0",
    "headline": "Text tools",
    "description": "Helpers for text",
    "functions": {
        "summarize": {
            "description": "Summarize a text with an agent",
            "input": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "output": {"type": "object", "required": ["summary"]},
            "run": summarize,
        },
    },
    "variables": {
        "team": {"description": "The team", "schema": {"type": "array"}, "resolve": lambda ctx: ["ada", "lin"]},
    },
    "workflows": {"hello": {"description": "Say hello", "script": "return `hello ${args}`"}},
}


def registry() -> ExtensionRegistry:
    reg = ExtensionRegistry()
    reg.register(EXTENSION, "text-tools")
    return reg


async def test_functions_variables_and_replay(project: Path, store: RunStore) -> None:
    calls.clear()
    script = 'const s = await summarize({text: "the diff"}); return {s, team}'
    async with Engine(store, extensions=registry()) as engine:
        run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project), name="ext"))
        record = await finished(engine, run_id)
    assert record.state == "completed"
    assert record.result == {"s": {"summary": "[scripted] Summarize the diff", "run": "ext"}, "team": ["ada", "lin"]}
    [agent] = store.agents(run_id)
    assert agent.label == "summarizer"
    assert "function/summarize/1" in store.journal(run_id)
    assert len(calls) == 1


async def test_bad_input_and_unknown_function(project: Path, store: RunStore) -> None:
    script = 'try { await summarize({text: 5}) } catch (e) { return [e.code, e.message] }'
    async with Engine(store, extensions=registry()) as engine:
        run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project)))
        assert (await finished(engine, run_id)).result == ["RESULT_INVALID", "Invalid input for summarize"]


def test_registration_rules() -> None:
    reg = registry()
    with pytest.raises(WorkflowError, match="Global name is already registered: summarize"):
        reg.register({**EXTENSION, "variables": {}, "workflows": {}}, "again")
    with pytest.raises(WorkflowError, match="Global name is reserved: agent"):
        ExtensionRegistry().register({**EXTENSION, "functions": {"agent": EXTENSION["functions"]["summarize"]}})
    with pytest.raises(WorkflowError, match="semantic version, headline, and description"):
        ExtensionRegistry().register({**EXTENSION, "version": "one"})
    with pytest.raises(WorkflowError, match="summarize input must describe one object"):
        bad = {**EXTENSION["functions"]["summarize"], "input": {"type": "string"}}
        ExtensionRegistry().register({**EXTENSION, "functions": {"summarize": bad}})
    with pytest.raises(WorkflowError, match="Invalid agent setup hook: audit"):
        ExtensionRegistry().register({**EXTENSION, "agentSetupHooks": {"audit": {"setup": 5}}})
    with pytest.raises(WorkflowError, match="Agent setup hook already registered: audit"):
        hooked = ExtensionRegistry()
        hooked.register({**EXTENSION, "agentSetupHooks": {"audit": {"setup": lambda s, c: None}}})
        hooked.register({"version": "1.0.0", "headline": "h", "description": "d",
                         "agentSetupHooks": {"audit": {"setup": lambda s, c: None}}})
    reg.frozen = True
    with pytest.raises(WorkflowError) as err:
        reg.register(EXTENSION)
    assert err.value.code == "REGISTRY_FROZEN"
    catalog = reg.catalog()
    assert [f["name"] for f in catalog["functions"]] == ["summarize"]
    assert catalog["variables"][0]["headline"] == "Text tools"


def test_entry_point_extensions_are_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "demo_ext.py").write_text(
        "EXTENSION = {'version': '0.1.0', 'headline': 'Demo', 'description': 'A demo',\n"
        "  'workflows': {'greet': {'description': 'Greets', 'script': 'return 1'}}}\n"
    )
    dist = tmp_path / "demo_ext-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-ext\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[piflow.extensions]\ndemo = demo_ext:EXTENSION\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("demo_ext", None)
    assert "greet" in load_extensions().workflows


async def test_setup_hooks_adjust_every_attempt_in_priority_order(project: Path, store: RunStore) -> None:
    order: list[str] = []

    def late(setup: dict[str, Any], context: dict[str, Any]) -> None:
        order.append(f"late:{context['attempt']}")
        setup["prompt"] = setup["prompt"] + " (checked)"

    async def early(setup: dict[str, Any], context: dict[str, Any]) -> None:
        order.append("early")
        setup["options"]["tools"] = ["read"]

    reg = ExtensionRegistry()
    reg.register({"version": "1.0.0", "headline": "Policy", "description": "Adds a note",
                  "agentSetupHooks": {"late": {"setup": late}, "early": {"priority": 1, "setup": early}}})
    async with Engine(store, extensions=reg) as engine:
        run_id = await engine.launch(LaunchRequest(script='return await agent("task")', cwd=str(project)))
        record = await finished(engine, run_id)
    assert record.result == "[scripted] task (checked)"
    assert order == ["early", "late:1"]
    [agent] = store.agents(run_id)
    assert agent.state == "completed"


async def test_a_throwing_setup_hook_fails_the_agent_without_retry(project: Path, store: RunStore) -> None:
    def broken(setup: dict[str, Any], context: dict[str, Any]) -> None:
        raise RuntimeError("no credentials")

    reg = ExtensionRegistry()
    reg.register({"version": "1.0.0", "headline": "Broken", "description": "Fails",
                  "agentSetupHooks": {"broken": {"setup": broken}}})
    async with Engine(store, extensions=reg) as engine:
        script = 'try { await agent("task", {retries: 3}) } catch (e) { return [e.code, e.message] }'
        run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project)))
        record = await finished(engine, run_id)
    assert record.result == ["AGENT_FAILED", "Agent setup hook broken failed: no credentials"]
    [agent] = store.agents(run_id)
    assert agent.attempts == 1


async def test_registered_workflows_run_by_name(project: Path, store: RunStore) -> None:
    async with Engine(store, extensions=registry()) as engine:
        run_id = await engine.launch(LaunchRequest(script="", workflow="hello", args="team", cwd=str(project)))
        record = await finished(engine, run_id)
        assert (record.workflow_name, record.result) == ("hello", "hello team")
        with pytest.raises(WorkflowError, match="Workflow is unavailable: nope"):
            await engine.launch(LaunchRequest(script="", workflow="nope", cwd=str(project)))
