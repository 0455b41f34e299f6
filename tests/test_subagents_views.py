"""What a user sees of a pi-subagents run through the real CLI: `piflow run`'s live lines,
`piflow show` (text and `--json`) and `piflow show --follow`: children with their agents, states,
tokens, costs and output files; emits; console lines; host steps; the lane board."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from isolation import isolated_environment

SCRIPT = """// piflow: pi-subagents
const VERDICT = { type: "object", properties: { verdict: { type: "string" } }, required: ["verdict"] };
console.log("starting the fleet");
console.warn("the ui is fragile");
const [scan, broken] = await runs.all([
  { key: "scan", agent: "worker", task: "Scan the repository" },
  { key: "broken", agent: "worker", task: "Break something" },
]);
emit({ scanned: scan.ok, broken: broken.ok });
await runs.host("ci", { kind: "command", command: "echo tests passed; echo warn >&2", timeoutMs: 60000 });
const board = await runs.lanes([
  { key: "api", stages: [
    { key: "write", agent: "worker", task: "Write the api" },
    { key: "review", agent: "reviewer", task: "Review the api", outputSchema: VERDICT },
  ] },
  { key: "ui", stages: [
    { key: "write", agent: "worker", task: "Write the ui" },
    { key: "review", agent: "reviewer", task: "Review the ui", outputSchema: VERDICT },
    { key: "fix", resume: "previous", task: "Fix the ui" },
  ] },
]);
return board.map((lane) => lane.state);
"""
FIXTURES = {
    "responses": [
        {"match": {"key": "scan"}, "text": "3 files", "tokens": {"input": 7, "output": 5}, "costUsd": 0.25},
        {"match": {"key": "broken"}, "fail": {"code": "AGENT_FAILED", "message": "the model refused"}},
        {"match": {"key": "api.review"}, "json": {"verdict": "approved"}},
        {"match": {"key": "ui.review"}, "json": {"verdict": "blocked"}},
    ]
}


@dataclass
class Fleet:
    root: Path
    env: dict[str, str]
    run_output: str
    run_id: str

    def piflow(self, *args: str) -> str:
        completed = subprocess.run([sys.executable, "-m", "piflow", *args], cwd=self.root, env=self.env,
                                   capture_output=True, text=True, timeout=120, check=False)
        assert completed.returncode == 0, completed.stderr
        return completed.stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    base = tmp_path_factory.mktemp("fleet")
    home, root = base / "home", base / "project"
    (home / ".pi" / "agent").mkdir(parents=True)
    root.mkdir()
    (root / "fixtures.json").write_text(json.dumps(FIXTURES))
    (root / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n\n[scripted]\nfixtures = "fixtures.json"\n')
    (root / "fleet.workflow.js").write_text(SCRIPT)
    env = isolated_environment(base, home, home / ".pi" / "agent")
    completed = subprocess.run([sys.executable, "-m", "piflow", "run", "fleet.workflow.js"], cwd=root, env=env,
                               capture_output=True, text=True, timeout=180, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    listed = json.loads(subprocess.run([sys.executable, "-m", "piflow", "runs", "--json"], cwd=root, env=env,
                                       capture_output=True, text=True, timeout=60, check=True).stdout)
    return Fleet(root, env, completed.stdout, listed[0]["runId"])


def _shown(fleet: Fleet) -> dict[str, Any]:
    view: dict[str, Any] = json.loads(fleet.piflow("show", fleet.run_id, "--json"))
    return view


def test_run_prints_emits_console_host_steps_and_lane_stages_as_they_happen(fleet: Fleet) -> None:
    lines = fleet.run_output.splitlines()
    for expected in ("console.log: starting the fleet", "console.warn: the ui is fragile",
                     'emit: {"scanned":true,"broken":false}', "host ci: running: echo tests passed; echo warn >&2",
                     "lane api: write running", "lane ui: review blocked (verdict blocked)"):
        assert expected in lines, (expected, lines)
    assert any(line.startswith("host ci: passed (exit 0, ") for line in lines), lines
    order = [next(i for i, line in enumerate(lines) if line.startswith(prefix))
             for prefix in ("emit:", "host ci: running", "host ci: passed", "lane api: write running")]
    assert order == sorted(order)  # in the order the script did them


def test_show_json_lists_children_with_agent_state_tokens_cost_and_output_file(fleet: Fleet) -> None:
    children = {child["key"]: child for child in _shown(fleet)["subagents"]["children"]}
    assert list(children)[:2] == ["scan", "broken"]  # in launch order
    assert set(children) == {"scan", "broken", "api.write", "ui.write", "api.review", "ui.review"}
    scan = children["scan"]
    assert (scan["agent"], scan["state"], scan["tokens"], scan["costUsd"]) == ("worker", "completed", 12, 0.25)
    assert Path(scan["outputReference"]).read_text() == "3 files"
    assert len(scan["runId"]) == 32
    broken = children["broken"]
    assert (broken["state"], broken["outputReference"]) == ("failed", None)
    assert "the model refused" in broken["error"]
    assert children["ui.review"]["agent"] == "reviewer"


def test_show_json_has_the_emits_console_lines_host_step_and_lane_board(fleet: Fleet) -> None:
    shown = _shown(fleet)["subagents"]
    assert shown["emits"] == [{"scanned": True, "broken": False}]
    assert shown["console"] == [{"level": "log", "message": "starting the fleet"},
                                {"level": "warn", "message": "the ui is fragile"}]
    [ci] = shown["hostSteps"]
    assert (ci["key"], ci["command"], ci["state"], ci["exitCode"]) == ("ci", "echo tests passed; echo warn >&2",
                                                                        "passed", 0)
    assert isinstance(ci["durationMs"], int) and ci["error"] is None
    assert set(Path(ci["outputPath"]).read_text().splitlines()) == {"tests passed", "warn"}
    [board] = shown["lanes"]
    assert board["call"] == 1
    api, ui = board["lanes"]
    assert (api["key"], api["state"], [(s["key"], s["state"]) for s in api["stages"]]) == (
        "api", "complete", [("write", "completed"), ("review", "completed")])
    assert (ui["state"], ui["failedStage"]) == ("blocked", "review")
    assert [(s["key"], s["state"], s["verdict"]) for s in ui["stages"]] == [
        ("write", "completed", None), ("review", "blocked", "blocked"), ("fix", "skipped", None)]


def test_show_text_has_a_section_for_each(fleet: Fleet) -> None:
    out = fleet.piflow("show", fleet.run_id[:8])
    lines = out.splitlines()
    scan = next(line for line in lines if line.startswith("  scan (worker): completed, 12 tokens, $0.2500, output "))
    assert scan.endswith("scan.md")
    assert "  broken (worker): failed, 0 tokens, $0.0000" in lines
    for section in ("Children:", "Host steps:", "Lanes (runs.lanes #1):", "Emits:", "Console:"):
        assert section in lines
    assert "  ui blocked: write completed, review blocked (verdict blocked), fix skipped" in lines
    assert "  api complete: write completed, review completed (verdict approved)" in lines
    assert '  {"scanned": true, "broken": false}' in lines
    assert "  [warn] the ui is fragile" in lines
    assert any(line.startswith("  host ci: passed (exit 0, ") for line in lines)
    assert 'Result: ["complete", "blocked"]' in lines


def test_show_follow_replays_the_same_lines_for_a_finished_run(fleet: Fleet) -> None:
    lines = fleet.piflow("show", fleet.run_id, "--follow").splitlines()
    assert "lane ui: review blocked (verdict blocked)" in lines
    assert 'emit: {"scanned":true,"broken":false}' in lines
    assert "Lanes (runs.lanes #1):" in lines  # then the run, as `piflow show` prints it
