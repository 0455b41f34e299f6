"""Helpers of the Temporal tests that run real agents: "machines" (worker pools with their own home)
and a pi agent dir whose models.json names the loopback chat-completions server."""

from __future__ import annotations

import json
from collections.abc import Container, Mapping
from pathlib import Path

import anyio
import pytest

from backends.chat_server import ChatServer
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.wire import RunSnapshot
from temporal_cluster import DevServer, Workers


def models(agent_dir: Path, server: ChatServer) -> None:
    """pi's models.json with `local/m1` served by `server`."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    providers = {"local": {"baseUrl": server.url, "api": "openai-completions", "apiKey": "sk-literal",
                           "models": [{"id": "m1"}]}}
    (agent_dir / "models.json").write_text(json.dumps({"providers": providers}))


def temporal_project(root: Path, workers: Workers, scripts: Mapping[str, str]) -> Path:
    """A project under `root` whose runs go to `workers`' cluster and task queue (scripted backend)."""
    project = root / "project"
    project.mkdir()
    (project / "piflow.toml").write_text(
        f'[piflow]\nexecutor = "temporal"\nbackend = "scripted"\n\n[temporal]\naddress = "{workers.server.address}"\n'
        f'task_queue = "{workers.task_queue}"\n')
    for name, text in scripts.items():
        (project / name).write_text(text)
    return project


def openai_project(root: Path, monkeypatch: pytest.MonkeyPatch, chat: ChatServer) -> Path:
    """A project on the openai backend (`local/m1` is `chat`), with this process's home isolated."""
    home = root / "home"
    for variable, path in (("HOME", home), ("XDG_CONFIG_HOME", home / "config"),
                           ("XDG_STATE_HOME", home / "state"), ("PI_CODING_AGENT_DIR", home / "agent")):
        monkeypatch.setenv(variable, str(path))
    models(home / "agent", chat)
    project = root / "project"
    project.mkdir()
    (project / "piflow.toml").write_text('[piflow]\nbackend = "openai"\nmodel = "local/m1"\n')
    return project


def machine(server: DevServer, root: Path, task_queue: str, chat: ChatServer, config: str = "") -> Workers:
    """Workers of one "machine": its own home, with `config` as its ~/.config/piflow/config.toml."""
    pool = Workers(server, root, task_queue)
    environment = pool.environment()
    directory = Path(environment["XDG_CONFIG_HOME"]) / "piflow"
    directory.mkdir(parents=True)
    (directory / "config.toml").write_text(config)
    models(Path(environment["PI_CODING_AGENT_DIR"]), chat)
    return pool


async def until_state(runs: TemporalRuns, run_id: str, states: Container[str], timeout: float) -> RunSnapshot:
    with anyio.fail_after(timeout):
        while True:
            with anyio.move_on_after(5):
                snapshot = await runs.snapshot(run_id)
                if snapshot.state in states:
                    return snapshot
            await anyio.sleep(0.2)
