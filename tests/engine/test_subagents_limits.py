"""Limits of pi-subagents children enforced by the engine: `toolBudget.hard` stops a child at the
call that would pass it, with the spec's message (SUBAGENTS_SPEC C, budgets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import LaunchFn
from engine_support import finished, write_fixtures

from piflow.engine.engine import Engine
from piflow.errors import WorkflowError

SCRIPT = """// piflow: pi-subagents
const out = {};
for (const key of ["frugal", "greedy"]) {
  try {
    out[key] = (await runs.run(key, { agent: "worker", task: "Work", toolBudget: { hard: 2 } })).ok;
  } catch (error) { out[key] = error.message; }
}
return out;
"""


async def test_a_child_past_its_hard_tool_budget_fails_with_the_spec_message(
    engine: Engine, launch: LaunchFn, project: Path
) -> None:
    fixtures = write_fixtures(project, {"responses": [{"match": {"key": "frugal"}, "toolCalls": 2},
                                                      {"match": {"key": "greedy"}, "toolCalls": 5}]})
    record = await finished(engine, await launch(SCRIPT, backend="scripted", fixtures=fixtures), timeout=60)
    assert record.state == "completed", record.error
    assert record.result == {
        "frugal": True,
        "greedy": "Run 'greedy' failed: Tool budget hard limit reached after 2 tool calls (hard 2). The child was "
                  "stopped before calling scripted; raise toolBudget.hard or narrow the task.",
    }
    greedy = next(a for a in engine.store.agents(record.id) if a.label == "greedy")
    assert greedy.state == "failed" and greedy.attempts == 1  # a spent budget is not retried


async def test_a_bad_tool_call_count_in_fixtures_is_refused_with_its_place(
    launch: LaunchFn, project: Path
) -> None:
    fixtures = write_fixtures(project, {"responses": [{"match": {"key": "frugal"}, "toolCalls": -1}]})
    with pytest.raises(WorkflowError, match=r"responses\[0\]\.toolCalls must be a non-negative integer"):
        await launch(SCRIPT, backend="scripted", fixtures=fixtures)
