"""An agent's `fallbackModels` (SUBAGENTS_SPEC B): used only on provider failures, in order, without
spending the child's retries; each attempt records the model that ran it."""

from __future__ import annotations

from pathlib import Path

from conftest import LaunchFn
from engine_support import finished, write_fixtures

from piflow.engine import events
from piflow.engine.engine import Engine

AGENT = """---
name: flaky
description: Works on a provider that falls over.
model: lab/primary
fallbackModels: lab/backup, lab/last
---
You work.
"""

SCRIPT = """// piflow: pi-subagents
const out = {};
for (const key of ["overloaded", "broken", "exhausted"]) {
  try { out[key] = (await runs.run(key, { agent: "flaky", task: `do ${key}` })).output; }
  catch (error) { out[key] = error.message; }
}
return out;
"""


def _write_agent(project: Path) -> None:
    agents = Path.home() / ".pi" / "agent" / "agents"
    agents.mkdir(parents=True)
    (agents / "flaky.md").write_text(AGENT)


async def test_a_provider_failure_moves_to_the_next_fallback_model_and_a_task_failure_does_not(
    engine: Engine, launch: LaunchFn, project: Path
) -> None:
    _write_agent(project)
    unavailable = {"code": "AGENT_FAILED", "message": "503 Service Unavailable: the model is overloaded"}
    fixtures = write_fixtures(project, {"responses": [
        # "overloaded": the primary model is down, the first fallback answers
        {"match": {"key": "overloaded", "model": "lab/primary"}, "fail": unavailable},
        {"match": {"key": "overloaded", "model": "lab/backup"}, "text": "done on backup"},
        # "broken": a task failure on the primary model is the child's own, never a reason to switch
        {"match": {"key": "broken"}, "fail": {"code": "AGENT_FAILED", "message": "The tests still fail"}},
        # "exhausted": every model is down; the last provider failure is the child's error
        {"match": {"key": "exhausted"}, "fail": unavailable},
    ]})
    record = await finished(engine, await launch(SCRIPT, backend="scripted", fixtures=fixtures), timeout=60)
    assert record.state == "completed", record.error
    assert record.result == {
        "overloaded": "done on backup",
        "broken": "Run 'broken' failed: The tests still fail",
        "exhausted": f"Run 'exhausted' failed: {unavailable['message']}",
    }
    children = {agent.label: agent for agent in engine.store.agents(record.id)}

    def models(key: str) -> list[str]:
        attempts = engine.store.attempts(children[key].id)
        return [(attempt.setup.model if attempt.setup else None) or "?" for attempt in attempts]

    assert models("overloaded") == ["lab/primary", "lab/backup"]
    assert children["overloaded"].model == "lab/backup" and children["overloaded"].state == "completed"
    assert models("broken") == ["lab/primary"] and children["broken"].model == "lab/primary"
    assert models("exhausted") == ["lab/primary", "lab/backup", "lab/last"]
    assert children["exhausted"].state == "failed"
    warnings = [event.payload["message"] for event in engine.store.events_of_types(record.id, [events.RUN_WARNING])]
    assert any("overloaded: model lab/primary failed with a provider failure" in text and "lab/backup" in text
               for text in warnings), warnings
