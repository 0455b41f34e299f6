"""A cold resume reuses the launch snapshot's syntax verdict, and only for the very text it covers."""

from __future__ import annotations

from pathlib import Path

import pytest

from piflow.engine.engine import LaunchRequest
from piflow.engine.environment import load_environment
from piflow.engine.snapshot import build_snapshot, check_cold_resume
from piflow.errors import WorkflowError

SCRIPT = 'export const meta = { name: "s" };\nconst done = await agent("hi");\nreturn done;\n'


def _snapshot(project: Path, script: str) -> dict[str, object]:
    env = load_environment(str(project))
    request = LaunchRequest(script=script, cwd=str(project))
    return build_snapshot(request, env, name="s", budget=None, concurrency=1, backend="scripted")


def test_a_launch_snapshot_resumes_with_its_own_verdict(project: Path) -> None:
    snapshot = _snapshot(project, SCRIPT)
    updated, warning = check_cold_resume(snapshot, load_environment(str(project)))
    assert updated["script"] == SCRIPT and warning is None


def test_a_snapshot_whose_script_changed_is_checked_again_exactly(project: Path) -> None:
    snapshot = _snapshot(project, SCRIPT)
    snapshot["script"] = SCRIPT + "const done = 2;\n"  # the recorded digest no longer covers the text
    with pytest.raises(WorkflowError) as raised:
        check_cold_resume(snapshot, load_environment(str(project)))
    assert (raised.value.code, raised.value.message) == (
        "INVALID_SYNTAX",
        "Invalid workflow syntax: Identifier 'done' has already been declared (4:6)",
    )
