"""Child agents in Neovim: `:PiflowRuns` details list each child agent (spec J.5) right under the
agent that started it, indented one level deeper, and a script's own error reads as written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_nvim import PLUGIN, isolated_env, nvim_binary

SCRIPT = """
local snapshot = vim.fn.json_decode(table.concat(vim.fn.readfile(vim.env.PIFLOW_SPEC), "\\n"))
local lines = require("piflow.picker").details(require("piflow.compat").without_nulls(snapshot))
vim.fn.writefile({ vim.fn.json_encode(lines) }, vim.env.PIFLOW_OUT)
"""


def agent(name: str, state: str, parent: str | None = None) -> dict[str, Any]:
    return {"id": name, "label": name, "role": None, "model": None, "state": state, "attempts": 1, "tokens": 0,
            "costUsd": 0, "activity": None, "parentId": parent, "error": None, "outputPreview": None,
            "outputTruncated": False, "transcriptPath": None, "attemptList": []}


@pytest.mark.parametrize("version", ["0.12", "0.7"])
def test_details_nest_child_agents_and_show_an_authored_error_as_written(version: str, tmp_path: Path) -> None:
    nvim = nvim_binary(version)
    agents = [agent("lead", "waiting_for_child"), agent("solo", "completed"), agent("fixer", "failed", "lead"),
              agent("tester", "completed", "fixer"), agent("orphan", "queued", "gone")]
    snapshot: dict[str, Any] = {
        "runId": "3f2a9c41-0000-4000-8000-000000000000", "uri": None, "workflowName": "release", "state": "failed",
        "phase": None, "agents": {"total": 5, "settled": 3}, "agentList": agents, "tokens": 0, "costUsd": 0,
        "budget": {"limits": {}, "usage": {}, "events": []}, "checkpoints": [],
        "error": {"code": "INTERNAL_ERROR", "message": "The release was rejected", "authored": True}}
    (tmp_path / "spec.json").write_text(json.dumps(snapshot))
    (tmp_path / "t.lua").write_text(SCRIPT)
    env = isolated_env(tmp_path) | {"PIFLOW_SPEC": str(tmp_path / "spec.json"), "PIFLOW_OUT": str(tmp_path / "o.json")}
    subprocess.run([str(nvim), "--headless", "-u", "NONE", "-i", "NONE", "--cmd", f"set rtp^={PLUGIN}",
                    "-c", f"luafile {tmp_path / 't.lua'}", "-c", "qa!"], env=env, check=True, timeout=60,
                   capture_output=True)
    lines: list[str] = json.loads((tmp_path / "o.json").read_text())
    assert "Error: The release was rejected" in lines
    heads = [line.split(" · ")[0] for line in lines[lines.index("Agent details (<CR> on an agent opens it):") + 1:]
             if " · " in line]
    assert heads == ["  lead", "    fixer", "      tester", "  solo", "  orphan"]
