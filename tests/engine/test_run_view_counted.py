"""The end of `piflow run --json` and `piflow resume --json` counts a run's agents instead of reading
them (issue 15: reading 10,000 agents took ~0.2 s of a resume); everything it shows stays the same."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine_support import finished, write_fixtures

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.lifecycle import AgentState, RunState
from piflow.engine.store import RunStore
from piflow.engine.views import run_view

SCRIPT = """
const results = await parallel("fan", {
  a: () => agent("task a", {label: "a"}),
  b: () => agent("task b", {label: "b"}),
  c: () => agent("task c", {label: "c", retries: 0}).catch(() => "failed"),
});
return results;
"""


async def test_a_view_without_agents_counts_them_and_keeps_everything_else(
    engine: Engine, store: RunStore, project: Path
) -> None:
    fixtures = write_fixtures(project, {"responses": [
        {"match": {"label": "c"}, "fail": {"code": "AGENT_FAILED", "message": "boom"}}, {"text": "done"},
    ]})
    run_id = await engine.launch(LaunchRequest(script=SCRIPT, cwd=str(project), fixtures=fixtures))
    await finished(engine, run_id)
    full = run_view(store, run_id)
    counted = run_view(store, run_id, with_agents=False)
    assert full.state == RunState.COMPLETED
    states = sorted(agent.state for agent in full.agents)
    assert states == [AgentState.COMPLETED, AgentState.COMPLETED, AgentState.FAILED]
    assert counted.agent_list == []
    assert (counted.summary.agents_total, counted.summary.agents_settled) == (3, 3)
    assert replace(counted, agent_list=full.agent_list) == full
