"""`piflow doctor` reports where models come from, which backends are usable and what is missing."""

from __future__ import annotations

import json
from pathlib import Path

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


def doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_without_a_registry_only_scripted_is_usable(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = doctor(capsys)
    assert code == 1
    backends = report["backends"]
    assert isinstance(backends, dict)
    assert backends["scripted"]["ok"] is True
    assert backends["openai"]["ok"] is False
    assert "pi CLI not found" in backends["pi"]["text"]
    assert any("models.json not found" in check["text"] for check in report["checks"])  # type: ignore[union-attr]


def test_models_show_their_source_and_availability(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    providers = {
        "local": {"baseUrl": "http://127.0.0.1:11434/v1", "api": "openai-completions", "models": [{"id": "q"}]},
        "hosted": {"baseUrl": "https://api.example.test/v1", "api": "openai-completions",
                   "apiKey": "HOSTED_API_KEY", "models": [{"id": "big"}]},
    }
    registry = home / ".pi" / "agent" / "models.json"
    registry.write_text(json.dumps({"providers": providers}))
    code, report = doctor(capsys)
    models = {m["model"]: m for m in report["models"]}  # type: ignore[union-attr]
    assert models["local/q"]["available"] is True
    assert models["hosted/big"]["available"] is False
    assert models["local/q"]["source"] == str(registry)
    assert report["backends"]["openai"]["ok"] is True  # type: ignore[index]
    assert code == 1  # the hosted provider has no key: reported as missing
