"""`runs.lanes` (spec A.6): first stages batched, `resume: "previous"`, blocked verdicts, skipped
stages, the limits and the board, run on the scripted backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LaunchFn
from engine_support import finished, write_fixtures

from piflow.engine.engine import Engine
from piflow.engine.store import RunRecord

PRAGMA = "// piflow: pi-subagents\n"
VERDICT = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}


def _lanes_script(lanes: Any) -> str:
    """A script passing `lanes` built at run time (literal lanes would meet the static checks first)."""
    return PRAGMA + f"""
const lanes = JSON.parse({json.dumps(json.dumps(lanes))});
try {{ return await runs.lanes(lanes); }} catch (error) {{ return {{error: error.message}}; }}
"""


async def _run(engine: Engine, launch: LaunchFn, project: Path, lanes: Any,
               responses: list[dict[str, Any]] | None = None) -> RunRecord:
    fixtures = write_fixtures(project, {"defaults": {"latencyMs": 20}, "responses": responses or []})
    run_id = await launch(_lanes_script(lanes), backend="scripted", fixtures=fixtures)
    record = await finished(engine, run_id, timeout=60)
    assert record.state == "completed", record.error
    return record


def _stage(key: str, agent: str = "worker", **params: Any) -> dict[str, Any]:
    return {"key": key, "agent": agent, "task": f"do {key}", **params}


WRITE_FIX_REVIEW = [
    {"key": "api", "stages": [_stage("writer"), {"key": "fix", "resume": "previous", "task": "address the review"},
                              _stage("review", "reviewer")]},
    {"key": "ui", "stages": [_stage("writer"), _stage("review", "reviewer")]},
]


async def test_lanes_run_to_a_complete_board(engine: Engine, launch: LaunchFn, project: Path) -> None:
    record = await _run(engine, launch, project, WRITE_FIX_REVIEW)
    board = record.result
    assert [(lane["key"], lane["state"], [s["key"] for s in lane["stages"]]) for lane in board] == [
        ("api", "complete", ["writer", "fix", "review"]),
        ("ui", "complete", ["writer", "review"]),
    ]
    for lane in board:
        for stage in lane["stages"]:
            assert stage["state"] == "completed" and stage["ok"] is True
            assert stage["outputReference"].endswith(f"{lane['key']}.{stage['key']}.md")
            assert "error" not in stage


async def test_first_stages_launch_together_then_lanes_go_on_their_own(
    engine: Engine, launch: LaunchFn, project: Path
) -> None:
    record = await _run(engine, launch, project, WRITE_FIX_REVIEW)
    agents = sorted(engine.store.agents(record.id), key=lambda agent: agent.n)
    assert {agent.label for agent in agents[:2]} == {"api.writer", "ui.writer"}
    assert {agent.label for agent in agents} == {"api.writer", "api.fix", "api.review", "ui.writer", "ui.review"}


async def test_resume_previous_continues_the_previous_stages_child(
    engine: Engine, launch: LaunchFn, project: Path
) -> None:
    record = await _run(engine, launch, project, WRITE_FIX_REVIEW)
    writer, fix = record.result[0]["stages"][:2]
    assert fix["runId"] != writer["runId"]  # a resumed child returns a new run id (A.10)
    fix_agent = next(a for a in engine.store.agents(record.id) if a.label == "api.fix")
    assert fix_agent.role == "worker"  # the resumed child keeps the writer's agent


async def test_a_blocked_verdict_blocks_its_lane_and_skips_the_rest(
    engine: Engine, launch: LaunchFn, project: Path
) -> None:
    lanes = [
        {"key": "api", "stages": [_stage("writer", outputSchema=VERDICT), _stage("review", "reviewer"),
                                  _stage("merge")]},
        {"key": "ui", "stages": [_stage("writer", outputSchema=VERDICT), _stage("review", "reviewer")]},
    ]
    responses = [
        {"match": {"key": "api.writer"}, "json": {"verdict": "blocked"}},
        {"match": {"key": "ui.writer"}, "json": {"verdict": "done"}},
    ]
    record = await _run(engine, launch, project, lanes, responses)
    api, ui = record.result
    assert api["state"] == "blocked" and api["failedStage"] == "writer"
    assert [(s["key"], s["state"]) for s in api["stages"]] == [("writer", "blocked"), ("review", "skipped"),
                                                               ("merge", "skipped")]
    assert api["stages"][0]["verdict"] == "blocked" and api["stages"][0]["error"] == "Stage returned a blocked verdict."
    assert ui["state"] == "complete" and ui["stages"][0]["verdict"] == "done"
    assert {a.label for a in engine.store.agents(record.id)} == {"api.writer", "ui.writer", "ui.review"}


async def test_prose_saying_blocked_does_not_block(engine: Engine, launch: LaunchFn, project: Path) -> None:
    lanes = [{"key": "api", "stages": [_stage("writer"), _stage("review", "reviewer")]}]
    responses = [{"match": {"key": "api.writer"}, "text": "verdict: blocked"}]
    record = await _run(engine, launch, project, lanes, responses)
    assert record.result[0]["state"] == "complete"


async def test_a_failed_stage_blocks_only_its_lane(engine: Engine, launch: LaunchFn, project: Path) -> None:
    lanes = [{"key": "api", "stages": [_stage("writer"), _stage("review", "reviewer"), _stage("merge")]},
             {"key": "ui", "stages": [_stage("writer"), _stage("review", "reviewer")]}]
    responses = [{"match": {"key": "api.review"}, "fail": {"code": "AGENT_FAILED", "message": "review crashed"}}]
    record = await _run(engine, launch, project, lanes, responses)
    api, ui = record.result
    assert api == {"key": "api", "state": "blocked", "failedStage": "review", "stages": [
        {**api["stages"][0], "state": "completed"},
        {**api["stages"][1], "key": "review", "state": "failed", "ok": False, "error": "review crashed"},
        {"key": "merge", "state": "skipped"},
    ]}
    assert ui["state"] == "complete"


async def test_an_unknown_agent_in_a_later_stage_fails_that_stage(
    engine: Engine, launch: LaunchFn, project: Path
) -> None:
    lanes = [{"key": "api", "stages": [_stage("writer"), _stage("review", "no-such-agent")]}]
    record = await _run(engine, launch, project, lanes)
    lane = record.result[0]
    assert lane["state"] == "blocked" and lane["failedStage"] == "review"
    assert lane["stages"][1]["state"] == "failed" and "no-such-agent" in lane["stages"][1]["error"]


def _lane(key: str, count: int) -> dict[str, Any]:
    return {"key": key, "stages": [_stage(f"s{i}") for i in range(count)]}


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ({"key": "x"}, "runs.lanes(lanes) requires an array."),
        ([], "runs.lanes(lanes) requires at least one lane."),
        ([_lane(f"l{i}", 1) for i in range(33)], "runs.lanes supports at most 32 lanes."),
        ([_lane("l", 17)], "runs.lanes lane 0 supports at most 16 stages."),
        ([_lane(f"l{i}", 13) for i in range(5)], "runs.lanes supports at most 64 total stages."),
        ([{"key": "api", "agent": "worker", "stages": [_stage("writer")]}],
         "runs.lanes lane 0 contains unsupported fields."),
        ([{"key": "api", "stages": [{"key": "writer", "resume": "previous", "task": "go"}]}],
         "runs.lanes lane 0 stage 0 cannot resume previous without a predecessor stage."),
        ([{"key": "api", "stages": [_stage("writer"), _stage("writer")]}],
         "runs.lanes lane 0 contains duplicate stage key 'writer'."),
        ([{"key": "api", "stages": [_stage("writer"), {"key": "fix", "resume": "previous", "agent": "worker",
                                                       "task": "again"}]}],
         "runs.lanes lane 0 stage 1 resume and agent are mutually exclusive."),
        ([{"key": "api", "stages": [_stage("writer"), {"key": "fix", "resume": "latest", "task": "again"}]}],
         "runs.lanes lane 0 stage 1 resume must be 'previous'."),
        ([{"key": "api", "stages": [{"key": "writer", "resume": "run-1234", "task": "again"}]}],
         "runs.lanes lane 0 stage 0 cannot resume a retained run id in runs.lanes; use runs.run(key, { resume: id })"),
        ([{"key": "a.b", "stages": [_stage("c")]}, {"key": "a", "stages": [_stage("b.c")]}],
         "runs.lanes generated child key 'a.b.c' is duplicated."),
        ([{"key": "-api", "stages": [_stage("writer")]}],
         "runs.lanes lane 0 key must be 1-128 characters using letters, numbers, '.', '_' or '-'"),
        ([{"key": "api", "stages": [_stage("writer", clarify=True)]}],
         "runs.lanes lane 0 stage 0 does not support clarify UI."),
    ],
)
async def test_invalid_lanes_fail_before_anything_launches(
    lanes: Any, message: str, engine: Engine, launch: LaunchFn, project: Path
) -> None:
    record = await _run(engine, launch, project, lanes)
    assert record.result["error"].startswith(message)
    assert engine.store.agents(record.id) == []


async def test_lanes_beyond_64_kib_of_json_fail(engine: Engine, launch: LaunchFn, project: Path) -> None:
    lanes = [{"key": "api", "stages": [_stage("writer", task="x" * 70000)]}]
    record = await _run(engine, launch, project, lanes)
    assert record.result["error"] == "runs.lanes canonical JSON exceeds 64 KiB."


async def test_a_generated_key_cannot_be_launched_again(engine: Engine, launch: LaunchFn, project: Path) -> None:
    fixtures = write_fixtures(project, {"responses": []})
    script = PRAGMA + """
await runs.lanes([{key: "api", stages: [{key: "writer", agent: "worker", task: "write"}]}]);
try { await runs.run("api.writer", {agent: "worker", task: "write"}); } catch (error) { return error.message; }
"""
    record = await finished(engine, await launch(script, backend="scripted", fixtures=fixtures), timeout=60)
    assert record.result == "Duplicate workflow key 'api.writer' used with incompatible launch params."
