"""The bundled pi-subagents examples run end to end on the scripted backend from their fixtures, as
`scripts/demo` runs them: a fleet (runs.all + runs.run), a lanes review board, and a host CI step
gating a fix. Each runs in a fresh copy of examples/ (ci-gate writes logs/ next to the script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from isolation import isolated_environment

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target)
    return target


def _run(copy: Path, tmp_path: Path, script: str) -> dict[str, Any]:
    env = isolated_environment(tmp_path, tmp_path / "home", tmp_path / "agent")
    ran = subprocess.run(
        [sys.executable, "-m", "piflow", "run", script, "--fixtures", "subagents.fixtures.yaml", "--json"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    final: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (final["state"], final["error"]) == ("completed", None), ran.stdout + ran.stderr
    return final


def test_the_fleet_fans_out_then_summarises(copy: Path, tmp_path: Path) -> None:
    final = _run(copy, tmp_path, "fleet.workflow.js")
    summary = "Two findings: validate order quantities; refresh the cart badge after checkout."
    assert final["result"] == {"summary": summary}


def test_the_review_board_blocks_only_the_lane_whose_reviewer_blocked(copy: Path, tmp_path: Path) -> None:
    final = _run(copy, tmp_path, "review-board.workflow.js")
    assert final["result"] == {
        "ready": False,
        "blocked": ["ui at review"],
        "board": [
            {"key": "api", "state": "complete", "stages": ["write:completed", "fix:completed", "review:completed"]},
            {"key": "ui", "state": "blocked", "stages": ["write:completed", "fix:completed", "review:blocked"]},
        ],
    }


def test_the_ci_gate_fixes_after_a_failing_host_step(copy: Path, tmp_path: Path) -> None:
    final = _run(copy, tmp_path, "ci-gate.workflow.js")
    result = final["result"]
    assert (result["gated"], result["fixed"], result["ci"]) == (True, True, "12 checks passed")
    assert result["fix"].startswith("[run fix; id=")
    assert "test_order_totals" in (copy / "logs" / "ci.log").read_text()
    assert (copy / "logs" / "ci-after-fix.log").read_text() == "12 checks passed\n"


def test_a_green_ci_gate_launches_no_child(copy: Path, tmp_path: Path) -> None:
    (copy / "logs").mkdir()
    (copy / "logs" / ".fixed").touch()
    final = _run(copy, tmp_path, "ci-gate.workflow.js")
    assert final["result"] == {"gated": True, "fixed": False, "ci": "12 checks passed"}
