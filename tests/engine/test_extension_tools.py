"""Agent tools registered by extensions: registration rules, and one root tool list for `piflow check`
and a launch (an extension tool passes both; on pi, which cannot run it, both refuse it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_support import finished

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.extensions import ExtensionRegistry, load_extensions
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

OBJECT: dict[str, Any] = {"type": "object", "properties": {"id": {"type": "string"}}}
TOOL: dict[str, Any] = {"description": "Read one ticket", "input": OBJECT, "run": lambda value, context: "ok"}
EXTENSION_SOURCE = """
EXTENSION = {"version": "1.0.0", "headline": "Tickets", "description": "Tickets",
             "tools": {"ticket": {"description": "Read one ticket", "input": {"type": "object"},
                                  "run": lambda value, context: "ok"}}}
"""
USES_TICKET = 'await agent("Triage", {label: "t", tools: ["ticket"]});\n'


def extension(**tools: Any) -> dict[str, Any]:
    return {"version": "1.0.0", "headline": "Tickets", "description": "Tickets", "tools": tools}


def refused(tools: dict[str, Any]) -> WorkflowError:
    with pytest.raises(WorkflowError) as error:
        ExtensionRegistry().register(extension(**tools))
    return error.value


def test_an_extension_may_register_only_tools() -> None:
    registry = ExtensionRegistry()
    registry.register(extension(ticket=TOOL), "tickets")
    assert list(registry.agent_tools()) == ["ticket"]
    assert registry.agent_tools()["ticket"].definition()["function"]["parameters"] == OBJECT


@pytest.mark.parametrize(
    ("tools", "code", "message"),
    [
        ({"read": TOOL}, "DUPLICATE_NAME", "Agent tool name is reserved: read"),
        ({"agent": TOOL}, "DUPLICATE_NAME", "Agent tool name is reserved: agent"),
        ({"workflow_result": TOOL}, "DUPLICATE_NAME", "Agent tool name is reserved: workflow_result"),
        ({"has space": TOOL}, "INVALID_METADATA", "Invalid agent tool: has space"),
        ({"ticket": {**TOOL, "run": 5}}, "INVALID_METADATA", "Invalid agent tool: ticket"),
        ({"ticket": {**TOOL, "output": {}}}, "INVALID_METADATA", "Invalid agent tool: ticket"),
        ({"ticket": {**TOOL, "input": {"type": "string"}}}, "INVALID_SCHEMA", "ticket input must describe one object"),
    ],
)
def test_a_bad_tool_is_refused_with_its_reason(tools: dict[str, Any], code: str, message: str) -> None:
    error = refused(tools)
    assert (error.code, error.message) == (code, message)


def test_a_tool_name_is_registered_once_and_a_refusal_keeps_nothing() -> None:
    registry = ExtensionRegistry()
    registry.register(extension(ticket=TOOL), "tickets")
    with pytest.raises(WorkflowError, match="Agent tool already registered: ticket"):
        registry.register(extension(other=TOOL, ticket=TOOL), "again")
    assert list(registry.tools) == ["ticket"]


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The extension installed with its entry point; the PYTHONPATH that finds it."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "tickets_tool_ext.py").write_text(EXTENSION_SOURCE)
    dist = root / "tickets_tool_ext-1.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tickets-tool-ext\nVersion: 1.0.0\n")
    (dist / "entry_points.txt").write_text("[piflow.extensions]\ntickets = tickets_tool_ext:EXTENSION\n")
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop("tickets_tool_ext", None)
    return str(root)


def check(project: Path, site: str, script: str) -> subprocess.CompletedProcess[str]:
    (project / "one.workflow.js").write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([site, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "piflow", "check", "one.workflow.js"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


async def test_check_and_launch_both_accept_an_extension_tool(project: Path, store: RunStore, installed: str) -> None:
    done = check(project, installed, USES_TICKET)
    assert done.returncode == 0, done.stdout + done.stderr

    async with Engine(store, extensions=load_extensions()) as engine:
        run_id = await engine.launch(LaunchRequest(script=USES_TICKET, cwd=str(project)))
        assert (await finished(engine, run_id)).state == "completed"


async def test_check_and_launch_both_refuse_a_tool_nothing_registers(
    project: Path, store: RunStore, installed: str
) -> None:
    script = USES_TICKET.replace("ticket", "tickets")
    done = check(project, installed, script)
    assert done.returncode != 0 and "UNKNOWN_TOOL" in done.stdout, done.stdout + done.stderr

    async with Engine(store, extensions=load_extensions()) as engine:
        with pytest.raises(WorkflowError) as error:
            await engine.launch(LaunchRequest(script=script, cwd=str(project)))
    assert error.value.code == "UNKNOWN_TOOL"


async def test_on_pi_an_extension_tool_is_unknown_to_check_and_launch(
    project: Path, store: RunStore, installed: str
) -> None:
    (project / "piflow.toml").write_text('[piflow]\nbackend = "pi"\n')
    done = check(project, installed, USES_TICKET)
    assert done.returncode != 0 and "UNKNOWN_TOOL" in done.stdout, done.stdout + done.stderr

    async with Engine(store, extensions=load_extensions()) as engine:
        with pytest.raises(WorkflowError) as error:
            await engine.launch(LaunchRequest(script=USES_TICKET, cwd=str(project)))
    assert error.value.code == "UNKNOWN_TOOL"
