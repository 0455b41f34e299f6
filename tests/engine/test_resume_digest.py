"""A cold resume skips the F.3 preflight when nothing it reads changed since the launch passed it.

The launch records a digest of the resume check's inputs (script, aliases, models, tools, settings
path, piflow's version); whether the preflight ran is observed with cProfile, not by replacing it.
"""

from __future__ import annotations

import cProfile
import json
import pstats
from pathlib import Path
from typing import Any

import pytest

from piflow.engine.engine import LaunchRequest
from piflow.engine.environment import load_environment
from piflow.engine.snapshot import build_snapshot, check_cold_resume
from piflow.errors import WorkflowError

SCRIPT = 'const r = await agent("hi", { label: "a", model: "fast" });\nreturn r;\n'


def _set_aliases(aliases: dict[str, str]) -> None:
    settings = Path.home() / ".pi" / "agent" / "pi-extensible-workflows" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"modelAliases": aliases}), encoding="utf-8")


def _snapshot(project: Path, script: str = SCRIPT) -> dict[str, Any]:
    env = load_environment(str(project))
    request = LaunchRequest(script=script, cwd=str(project))
    return build_snapshot(request, env, name="s", budget=None, concurrency=1, backend="scripted")


def _resume(project: Path, snapshot: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """`check_cold_resume`'s re-pinned snapshot, and how many times it ran the preflight."""
    profile = cProfile.Profile()
    updated, _ = profile.runcall(check_cold_resume, snapshot, load_environment(str(project)))
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    calls = sum(count for (path, _, name), (count, *_) in stats.items()
                if name == "preflight" and path.endswith("analysis/preflight.py"))
    return updated, calls


@pytest.fixture(autouse=True)
def fast_alias(project: Path) -> None:
    _set_aliases({"fast": "anthropic/claude-sonnet-4-5"})


def test_an_unchanged_resume_does_not_analyse_the_snapshot_again(project: Path) -> None:
    updated, preflights = _resume(project, _snapshot(project))
    assert preflights == 0
    assert updated["script"] == SCRIPT


def test_changed_aliases_check_the_script_again_and_the_next_resume_reuses_that_verdict(project: Path) -> None:
    snapshot = _snapshot(project)
    _set_aliases({"fast": "openai/gpt-4o"})
    updated, preflights = _resume(project, snapshot)
    assert preflights == 1
    _, preflights = _resume(project, updated)
    assert preflights == 0


def test_a_snapshot_without_the_digest_or_from_another_piflow_is_checked_again(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = _snapshot(project)
    older = {key: value for key, value in snapshot.items() if key != "preflightDigest"}
    assert _resume(project, older)[1] == 1
    monkeypatch.setattr("piflow.engine.snapshot.__version__", "99.0.0")  # a newer piflow, whose rules may differ
    assert _resume(project, snapshot)[1] == 1


def test_a_changed_snapshot_script_gets_the_specs_error_from_the_facts_walk(project: Path) -> None:
    snapshot = _snapshot(project)
    snapshot["script"] = SCRIPT.replace('model: "fast"', 'role: "reviewer"')  # a role no definition covers
    with pytest.raises(WorkflowError) as raised:
        check_cold_resume(snapshot, load_environment(str(project)))
    assert raised.value.code == "UNKNOWN_AGENT_TYPE"
    assert raised.value.message == "Unknown agent type: reviewer"
