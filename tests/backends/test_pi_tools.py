"""The root tools of the pi backend are the tools pi really offers: a probe session reports
`pi.getAllTools()` (built-ins and extension tools, with their source), the answer is cached until pi,
its settings or its extensions change, and `piflow doctor`, `piflow check` and a launch agree that
a pi extension's tool is valid on pi. Real pi CLI (skipped, saying why, when it cannot be
installed), a real pi extension, the loopback chat-completions server as pi's model provider."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from chat_server import ChatServer, Stream, text_stream, tool_stream
from conftest import PRICES

from piflow.cli import main
from piflow.cli_check import project_capabilities
from piflow.config.pi_tools import PI_BUILTIN_TOOLS, cached_pi_tools
from piflow.config.resources import ResourcePolicy
from piflow.engine.backends.pi import current_pi_tools
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

GREET = """export default function (pi) {
  pi.registerTool({
    name: "greet", label: "Greet", description: "Greet someone by name.",
    parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    async execute(_id, params) { return { content: [{ type: "text", text: `Hello, ${params.name}!` }], details: {} }; },
  });
}
"""
SCRIPT = 'return await agent("Greet Ada.", {label: "greeter", tools: ["greet"]});\n'


@pytest.fixture
def agent_dir(tmp_path: Path, server: ChatServer) -> Path:
    """pi's agent dir: the loopback server as provider `local`, and an extension registering `greet`."""
    agent = tmp_path / "home" / ".pi" / "agent"
    (agent / "extensions").mkdir(parents=True)
    (agent / "extensions" / "greet.js").write_text(GREET, encoding="utf-8")
    provider = {"baseUrl": server.url, "api": "openai-completions", "apiKey": "sk-test",
                "models": [{"id": "m1", "cost": {**PRICES.to_json(), "cacheWrite": 0}}]}
    (agent / "models.json").write_text(json.dumps({"providers": {"local": provider}}), encoding="utf-8")
    return agent


@pytest.fixture
def project(tmp_path: Path, agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose runs use the pi backend, in an isolated HOME (no pi on PATH unless a test adds it)."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent_dir))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("PIFLOW_PI_COMMAND", raising=False)
    root = tmp_path / "project"
    root.mkdir()
    (root / "piflow.toml").write_text('[piflow]\nbackend = "pi"\nmodel = "local/m1"\n', encoding="utf-8")
    (root / "greet.workflow.js").write_text(SCRIPT, encoding="utf-8")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def with_pi(pi_command: list[str], project: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The project's environment with the real pi CLI as `$PIFLOW_PI_COMMAND`."""
    monkeypatch.setenv("PIFLOW_PI_COMMAND", pi_command[0])
    return pi_command


def check(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`piflow check greet.workflow.js`, as a fresh process would run it (nothing cached in memory)."""
    project_capabilities.cache_clear()
    code = main(["check", "greet.workflow.js"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.usefixtures("with_pi")
async def test_a_probe_reports_pis_builtins_and_extension_tools_and_is_cached_until_an_extension_changes(
    project: Path, agent_dir: Path
) -> None:
    probed = await current_pi_tools(agent_dir, project, ResourcePolicy())

    assert probed.names == {*PI_BUILTIN_TOOLS, "greet"}
    [greet] = [tool for tool in probed.tools if tool.name == "greet"]
    assert greet.source != "builtin" and Path(greet.path) == (agent_dir / "extensions" / "greet.js").resolve()
    cached = cached_pi_tools(agent_dir, project)
    assert cached is not None and cached.current and cached.names == probed.names

    extension = agent_dir / "extensions" / "greet.js"
    later = extension.stat().st_mtime_ns + 5_000_000_000
    os.utime(extension, ns=(later, later))
    stale = cached_pi_tools(agent_dir, project)
    assert stale is not None and not stale.current and stale.names == probed.names


@pytest.mark.usefixtures("with_pi")
async def test_tools_of_extensions_the_policy_disables_are_not_offered_on_pi(project: Path, agent_dir: Path) -> None:
    policy = ResourcePolicy(extensions=(str((agent_dir / "extensions").resolve()),))

    probed = await current_pi_tools(agent_dir, project, policy, refresh=True)

    assert probed.names == set(PI_BUILTIN_TOOLS)


@pytest.mark.usefixtures("with_pi")
def test_doctor_asks_pi_and_then_check_accepts_the_extension_tool(
    project: Path, agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = check(capsys)
    assert code != 0 and "UNKNOWN_TOOL" in output  # pi not asked yet: its built-ins stand in

    assert main(["doctor"]) == 0
    report = capsys.readouterr().out
    extension = (agent_dir / "extensions" / "greet.js").resolve()
    assert f"✓ pi tool greet: extension {extension}" in report
    assert "✓ root tools on pi: agent, bash, edit, find, greet, grep, ls, read, write" in report

    code, output = check(capsys)
    assert code == 0, output


@pytest.mark.usefixtures("with_pi")
async def test_a_launch_on_pi_asks_pi_for_its_tools_and_the_agent_calls_the_extension_tool(
    project: Path, agent_dir: Path, server: ChatServer
) -> None:
    server.script(
        Stream(tool_stream("greet", {"name": "Ada"})),
        Stream(text_stream("I greeted Ada.")),
    )
    assert cached_pi_tools(agent_dir, project) is None

    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script=SCRIPT, cwd=str(project)))
            with anyio.fail_after(120):
                record = await engine.wait(run_id)

    assert (record.state, record.result, record.error) == ("completed", "I greeted Ada.", None)
    first, second = server.bodies()
    assert [tool["function"]["name"] for tool in first["tools"]] == ["greet"]
    assert [m["content"] for m in second["messages"] if m["role"] == "tool"] == ["Hello, Ada!"]
    cached = cached_pi_tools(agent_dir, project)
    assert cached is not None and cached.current and "greet" in cached.names


def test_without_pi_doctor_says_so_and_the_builtins_stand_in(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor"]) == 1  # the default backend cannot run
    report = capsys.readouterr().out
    assert "· pi tools: pi is not installed — checks on the pi backend assume its built-ins" in report
    assert "✓ root tools on pi: agent, bash, edit, find, grep, ls, read, write" in report

    code, output = check(capsys)
    assert code != 0 and "UNKNOWN_TOOL" in output and "greet" in output


def test_a_changed_resource_policy_makes_the_cached_tool_list_stale(tmp_path: Path) -> None:
    """The probe leaves disabled extensions' tools out, so the policy is part of the cache key."""
    from piflow.config.paths import global_settings_path, project_settings_path
    from piflow.config.pi_tools import PiCommand, pi_tools_fingerprint

    agent_dir, project = tmp_path / "agent", tmp_path / "project"
    project.mkdir()
    command = PiCommand(("/bin/true",))
    before = pi_tools_fingerprint(command, agent_dir, project)
    for settings in (global_settings_path(agent_dir), project_settings_path(project)):
        settings.parent.mkdir(parents=True)
        settings.write_text('{"disabledAgentResources": {"extensions": ["x.ts"]}}', encoding="utf-8")
        after = pi_tools_fingerprint(command, agent_dir, project)
        assert after != before, settings
        before = after
