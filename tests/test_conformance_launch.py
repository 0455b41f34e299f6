"""Reference outcomes of launch validation (spec B.2): roles from real files, policy checks, params."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance import expected, load_cases, substitute
from piflow.analysis.launch import LaunchContext, RegisteredWorkflow, validate_workflow_launch
from piflow.errors import WorkflowError

# The workflows the reference harness registered (their texts are visible in the recorded outcomes).
REGISTERED = {
    "hello": RegisteredWorkflow(description="Say hello", script="return args.name;"),
    "reviewed": RegisteredWorkflow(description="Reviewed", script='return agent("review", { role: "reviewer" });'),
}

CASES = load_cases("launch")


def _write_roles(directory: Path, roles: dict[str, str] | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in (roles or {}).items():
        (directory / f"{name}.md").write_text(content, encoding="utf-8")


def _outcome(case: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    agent = tmp_path / "agent"
    project = tmp_path / "project"
    _write_roles(agent / "pi-extensible-workflows" / "roles", case.get("globalRoles"))
    _write_roles(project / ".pi" / "pi-extensible-workflows" / "roles", case.get("projectRoles"))
    context = LaunchContext.from_json({**case, "cwd": str(project)}, agent_dir=agent, workflows=REGISTERED)
    try:
        checked = validate_workflow_launch(case["params"], context)
    except WorkflowError as error:
        return {"ok": False, "code": error.code, "message": error.message}
    return {"ok": True, **checked.to_json()}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_launch_case(case: dict[str, Any], tmp_path: Path) -> None:
    want = expected("launch", case["id"])
    got = _outcome(case, tmp_path)
    if not want["ok"]:
        want = {**want, "message": substitute(want["message"], {"<LAUNCH_DIR>": str(tmp_path)})}
    assert got == want
