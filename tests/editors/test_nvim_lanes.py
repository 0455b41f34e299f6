"""The live lane board in Neovim: `:PiflowRuns` lines carry a pi-subagents run's lanes from
`piflow/runProgress`, and its Details list every lane with its stages (blocked, skipped)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_nvim import PLUGIN, isolated_env, nvim_binary

BOARD = [{"call": 1, "lanes": [
    {"key": "api", "state": "complete", "failedStage": None,
     "stages": [{"key": "write", "state": "completed", "verdict": None, "error": None, "runId": "c0"}]},
    {"key": "ui", "state": "blocked", "failedStage": "review", "stages": [
        {"key": "write", "state": "completed", "verdict": None, "error": None, "runId": "c1"},
        {"key": "review", "state": "blocked", "verdict": "blocked", "error": None, "runId": "c2"},
        {"key": "fix", "state": "skipped", "verdict": None, "error": None, "runId": None}]},
]}]  # fmt: skip

SCRIPT = """
local spec = vim.fn.json_decode(table.concat(vim.fn.readfile(vim.env.PIFLOW_SPEC), "\\n"))
local compat = require("piflow.compat")
local runs = require("piflow.runs")
local picker = require("piflow.picker")
local progress = compat.without_nulls(spec.progress)
runs.update(progress)
local snapshot = compat.without_nulls(spec.snapshot)
local lines = picker.details(snapshot)
vim.fn.writefile({ vim.fn.json_encode({ described = runs.describe(runs.get(progress.runId)), details = lines }) },
  vim.env.PIFLOW_OUT)
"""


@pytest.mark.parametrize("version", ["0.12", "0.7"])
def test_runs_list_and_details_show_the_lane_board(version: str, tmp_path: Path) -> None:
    nvim = nvim_binary(version)
    run: dict[str, Any] = {"runId": "3f2a9c41-0000-4000-8000-000000000000", "uri": None, "workflowName": "board",
           "state": "running", "phase": None, "agentCounts": {"total": 4, "settled": 3}, "agents": [],
           "budget": {"limits": {}, "usage": {}, "events": []}, "checkpoints": []}
    snapshot = {**run, "agents": {"total": 4, "settled": 3}, "agentList": [],
                "subagents": {"children": [], "hostSteps": [], "emits": [], "console": [], "lanes": BOARD}}
    (tmp_path / "spec.json").write_text(json.dumps({"progress": {**run, "lanes": BOARD}, "snapshot": snapshot}))
    (tmp_path / "t.lua").write_text(SCRIPT)
    env = isolated_env(tmp_path) | {"PIFLOW_SPEC": str(tmp_path / "spec.json"), "PIFLOW_OUT": str(tmp_path / "o.json")}
    subprocess.run([str(nvim), "--headless", "-u", "NONE", "-i", "NONE", "--cmd", f"set rtp^={PLUGIN}",
                    "-c", f"luafile {tmp_path / 't.lua'}", "-c", "qa!"], env=env, check=True, timeout=60,
                   capture_output=True)
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["described"].endswith("3/4 agents  lanes 1/2 complete, ui blocked")
    lanes = out["details"][out["details"].index("Lanes:"):]
    assert lanes[:3] == [
        "Lanes:",
        "  api complete: write completed",
        "  ui blocked: write completed -> review blocked (verdict blocked) -> fix skipped",
    ]
