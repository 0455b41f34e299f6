"""`piflow doctor` reports where models come from, which backends are usable and what is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from piflow.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".pi" / "agent").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.delenv("HOSTED_API_KEY", raising=False)
    monkeypatch.delenv("PIFLOW_PI_COMMAND", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    return home


def doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_fresh_machine_passes_with_only_information(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = doctor(capsys)
    assert code == 0
    backends = report["backends"]
    assert (backends["scripted"]["level"], backends["openai"]["level"], backends["pi"]["level"]) == (
        "ok", "info", "info"
    )
    assert "not installed" in backends["pi"]["text"]
    checks = report["checks"]
    assert {check["level"] for check in checks} <= {"ok", "info"}
    assert any("models.json not found" in check["text"] and check["level"] == "info" for check in checks)


def test_missing_files_never_get_a_tick(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    missing = [line for line in lines if "not found" in line]
    assert {line.split(" ")[0] for line in missing} == {"·"}
    assert any(line.startswith("· run store:") for line in missing)
    assert any(line.startswith("· model registry:") for line in missing)


def test_trust_is_said_in_words_with_how_to_trust(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    trust = next(line for line in capsys.readouterr().out.splitlines() if "project trusted" in line)
    assert "project trusted: no" in trust and "False" not in trust
    assert "trust_project = true" in trust and "trusted_projects" in trust
    Path("piflow.toml").write_text("[piflow]\ntrust_project = true\n")
    assert main(["doctor"]) == 0
    trust = next(line for line in capsys.readouterr().out.splitlines() if "project trusted" in line)
    assert trust.startswith("✓ project trusted: yes (trust_project = true in ")


def test_models_show_their_source_and_availability(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    providers = {
        "local": {"baseUrl": "http://127.0.0.1:11434/v1", "api": "openai-completions", "models": [{"id": "q"}]},
        "hosted": {"baseUrl": "https://api.example.test/v1", "api": "openai-completions",
                   "apiKey": "HOSTED_API_KEY", "models": [{"id": "big"}]},
    }
    registry = home / ".pi" / "agent" / "models.json"
    registry.write_text(json.dumps({"providers": providers}))
    code, report = doctor(capsys)
    models = {m["model"]: m for m in report["models"]}
    assert models["local/q"]["available"] is True
    assert models["hosted/big"]["available"] is False
    assert models["local/q"]["source"] == str(registry)
    assert report["backends"]["openai"]["ok"] is True
    hosted = next(c for c in report["checks"] if "provider hosted" in c["text"])
    assert hosted["level"] == "warning"  # reported as missing, but no reason to fail
    assert code == 0


def test_broken_configuration_and_an_unusable_default_backend_fail(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".pi" / "agent" / "pi-extensible-workflows" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{")
    Path("piflow.toml").write_text('[piflow]\nbackend = "pi"\n')
    code, report = doctor(capsys)
    assert code == 1
    errors = [c["text"] for c in report["checks"] if c["level"] == "error"]
    assert any("settings" in text for text in errors)
    assert any(text.startswith("default backend pi cannot run") for text in errors)


def test_agents_are_listed_with_where_each_comes_from(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agents = home / ".pi" / "agent" / "agents"
    (agents / "team").mkdir(parents=True)
    (agents / "team" / "writer.md").write_text("---\nname: writer\ndescription: writes\n---\nWrite.\n")
    (agents / "broken.md").write_text("---\nname: broken\n---\nno description\n")
    (home / ".pi" / "agent" / "settings.json").write_text(
        json.dumps({"subagents": {"agentOverrides": {"scout": {"disabled": True}}}})
    )
    code, report = doctor(capsys)
    assert code == 0
    rows = {row["name"]: row for row in report["agents"]}
    assert set(rows) == {"delegate", "oracle", "researcher", "reviewer", "scout", "worker", "writer"}
    assert (rows["writer"]["source"], rows["writer"]["path"]) == ("user", str(agents / "team" / "writer.md"))
    assert rows["scout"]["disabled"] is True and rows["reviewer"]["source"] == "builtin"
    assert any(check["level"] == "warning" and f"{agents / 'broken.md'}:1:" in check["text"]
               and "description" in check["text"] for check in report["checks"])  # fmt: skip
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  agent writer — user {agents / 'team' / 'writer.md'}" in lines
    assert "  agent scout — builtin — disabled by subagents.agentOverrides" in lines
    assert "  agent oracle (also advisor) — builtin" in lines


def test_untrusted_project_agents_are_said_to_be_ignored(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project_agents = Path.cwd() / ".pi" / "agents"
    project_agents.mkdir(parents=True)
    (project_agents / "local.md").write_text("---\nname: local\ndescription: d\n---\nP\n")
    _, report = doctor(capsys)
    assert "local" not in {row["name"] for row in report["agents"]}
    assert any(f"project agents in {project_agents} are ignored" in check["text"] for check in report["checks"])
