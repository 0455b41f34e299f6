"""Fixtures of the backend tests: a loopback chat-completions server and a models.json naming it."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_server import ChatServer

from piflow.config.registry import ModelCost, ModelRegistry, load_model_registry
from piflow.engine.backends.openai import OpenAIBackend

API_KEY = "sk-test-key"
PRICES = ModelCost(input=2, output=8, cache_read=0.5)
"""The cost table of `local/m1` (USD per million tokens)."""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = ChatServer()
    chat.start()
    yield chat
    chat.stop()


@pytest.fixture
def registry(tmp_path: Path, server: ChatServer) -> ModelRegistry:
    providers = {
        "local": {
            "baseUrl": server.url + "/",
            "api": "openai-completions",
            "apiKey": "LOCAL_API_KEY",
            "headers": {"X-Team": "piflow"},
            "models": [
                {"id": "m1", "reasoning": True, "cost": PRICES.to_json(), "headers": {"X-Model": "m1"}},
                {"id": "plain"},
            ],
        },
        "keyless": {"baseUrl": server.url, "api": "openai-completions", "models": [{"id": "m"}]},
        "claude": {"baseUrl": server.url, "api": "anthropic-messages", "models": [{"id": "sonnet"}]},
    }
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"providers": providers}), encoding="utf-8")
    return load_model_registry(path, environ={"LOCAL_API_KEY": API_KEY})


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    return tmp_path / "transcripts"


@pytest.fixture
def backend(registry: ModelRegistry, transcripts: Path) -> OpenAIBackend:
    return OpenAIBackend(registry, transcripts_dir=transcripts)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer) -> Path:
    """A project running the openai backend against the loopback server (isolated HOME and XDG dirs)."""
    home = tmp_path / "home"
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    cost = {"input": 2, "output": 8, "cacheRead": 0, "cacheWrite": 0}
    providers = {"local": {"baseUrl": server.url, "api": "openai-completions", "apiKey": "sk-literal",
                           "models": [{"id": "m1", "cost": cost}]}}
    (agent_dir / "models.json").write_text(json.dumps({"providers": providers}))
    root = tmp_path / "project"
    root.mkdir()
    (root / "piflow.toml").write_text('[piflow]\nbackend = "openai"\nmodel = "local/m1"\n')
    return root


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def pi_command() -> list[str]:
    """The real pi CLI, installed once into `.cache/pi` (or skipped, saying why)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not on PATH: scripts/install-pi cannot install the pi CLI from the npm registry")
    done = subprocess.run(
        [str(ROOT / "scripts" / "install-pi")], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"scripts/install-pi failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    return [done.stdout.strip()]
