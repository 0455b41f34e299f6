"""What a cold resume does before the script runs again, kept to what the run needs (issue 15).

A resume whose inputs did not change leaves the launch snapshot as it is (a 10,000-agent one is
~1 MB to re-encode and write), and the run's backend is made only when an agent attempt needs it
(a resume whose agents all replay never imports the openai or pi backend).
"""

from __future__ import annotations

import json
from pathlib import Path

from piflow.engine.backends import DeferredBackend
from piflow.engine.backends.base import AgentBackend
from piflow.engine.backends.scripted import ScriptedBackend
from piflow.engine.engine import LaunchRequest
from piflow.engine.environment import load_environment
from piflow.engine.snapshot import build_snapshot, check_cold_resume

SCRIPT = 'const r = await agent("hi", { label: "a", model: "fast" });\nreturn r;\n'


def _aliases(aliases: dict[str, str]) -> None:
    settings = Path.home() / ".pi" / "agent" / "pi-extensible-workflows" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"modelAliases": aliases}), encoding="utf-8")


def test_an_unchanged_resume_leaves_the_launch_snapshot_as_it_was(project: Path) -> None:
    _aliases({"fast": "anthropic/claude-sonnet-4-5"})
    env = load_environment(str(project))
    snapshot = build_snapshot(LaunchRequest(script=SCRIPT, cwd=str(project)), env, name="s", budget=None,
                              concurrency=1, backend="scripted")
    updated, warning = check_cold_resume(snapshot, load_environment(str(project)))
    assert (updated, warning) == (snapshot, None)


def test_a_resume_after_an_alias_was_removed_pins_and_blocks_it(project: Path) -> None:
    _aliases({"fast": "anthropic/claude-sonnet-4-5"})
    env = load_environment(str(project))
    snapshot = build_snapshot(LaunchRequest(script=SCRIPT, cwd=str(project)), env, name="s", budget=None,
                              concurrency=1, backend="scripted")
    _aliases({"slow": "anthropic/claude-sonnet-4-5"})
    updated, warning = check_cold_resume(snapshot, load_environment(str(project)))
    assert updated["blockedAliases"] == {"fast": "anthropic/claude-sonnet-4-5"}
    assert updated["modelAliases"] == {"slow": "anthropic/claude-sonnet-4-5"}
    assert warning is not None and "fast: anthropic/claude-sonnet-4-5 -> (missing)" in warning


def test_a_deferred_backend_is_made_once_and_only_when_first_needed() -> None:
    made: list[AgentBackend] = []

    def make() -> AgentBackend:
        made.append(ScriptedBackend(None))
        return made[-1]

    backend = DeferredBackend(make)
    assert made == []
    assert backend.name == "scripted"  # the made backend's own attributes, `steer` included
    assert getattr(backend, "steer", None) == getattr(made[0], "steer", None)
    assert backend.backend is made[0] and len(made) == 1
