"""End-to-end runs through the real worker, store and scripted backend (spec F, G, I, J)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from engine_support import RunScript, finished, wait_for, write_fixtures

from piflow.engine import events
from piflow.engine.control import ControlOutcome
from piflow.engine.engine import Engine
from piflow.engine.lifecycle import CheckpointState
from piflow.engine.store import RunStore
from piflow.engine.views import CheckpointView, run_view
from piflow.errors import WorkflowError

FAN_OUT = """
phase("scan");
const found = await parallel("scan", {
  api: () => agent("Scan the API", { label: "api" }),
  ui: () => agent("Scan the UI", { label: "ui" }),
});
return found;
"""


async def test_fan_out_completes_with_results_and_events(engine: Engine, launch, store: RunStore) -> None:
    seen: list[str] = []
    engine.bus.subscribe(lambda event: seen.append(event.type))
    run_id = await launch(FAN_OUT, name="scan")
    record = await finished(engine, run_id)
    assert record.state == "completed"
    assert record.result == {"api": "[scripted] Scan the API", "ui": "[scripted] Scan the UI"}
    assert seen[0] == events.RUN_STARTED
    assert seen[-2:] == [events.RUN_STATE_CHANGED, events.RUN_COMPLETED]
    assert events.PHASE_CHANGED in seen
    agents = store.agents(run_id)
    assert [(a.label, a.state, a.attempts) for a in agents] == [("api", "completed", 1), ("ui", "completed", 1)]
    assert [a.structural_path for a in agents] == [["scan", "api"], ["scan", "ui"]]
    assert all(a.journal_path and a.journal_path.startswith("agent/scan/") for a in agents)
    assert store.journal(run_id).keys() == {a.journal_path for a in agents}


async def test_fan_out_and_pipeline_results(run_script: RunScript) -> None:
    script = FAN_OUT.replace("return found;", """
    const fixed = await pipeline("fix", {one: "a", two: "b"}, {
      draft: (x) => agent("Draft " + x, {label: "draft"}),
      check: (d) => agent("Check " + d, {label: "check"}),
    });
    return {found, fixed};""")
    outcome = await run_script(script)
    assert (outcome.state, outcome.error) == ("completed", None)
    assert outcome.result == {
        "found": {"api": "[scripted] Scan the API", "ui": "[scripted] Scan the UI"},
        "fixed": {"one": "[scripted] Check [scripted] Draft a", "two": "[scripted] Check [scripted] Draft b"},
    }


async def test_fixture_rules_match_by_label_role_and_prompt(run_script: RunScript, project: Path) -> None:
    fixtures = write_fixtures(project, {"responses": [
        {"match": {"label": "a"}, "text": "from label"},
        {"match": {"prompt": "^json"}, "json": {"ok": True}},
    ]})
    outcome = await run_script('return [await agent("x", {label: "a"}), await agent("json please"), await agent("z")]',
                               fixtures=fixtures)
    assert outcome.result == ["from label", {"ok": True}, "[scripted] z"]


async def test_agent_failure_carries_failed_at_and_fails_the_run(run_script: RunScript, project: Path) -> None:
    fixtures = write_fixtures(project, {"responses": [{"fail": {"code": "AGENT_FAILED", "message": "boom"}}]})
    record = await run_script('try { await agent("x") } catch (e) { return [e.code, e.message, e.failedAt] }',
                              fixtures=fixtures)
    assert record.result == ["AGENT_FAILED", "boom", "agent/callsite%3A12%3A22/occurrence%3A1"]
    record = await run_script('await agent("x")', fixtures=fixtures)
    assert record.state == "failed"
    assert record.error is not None and record.error["code"] == "AGENT_FAILED"


async def test_retries_then_success(engine: Engine, launch, project: Path, store: RunStore) -> None:
    fixtures = write_fixtures(project, {"responses": [
        {"fail": {"code": "AGENT_FAILED", "message": "flaky"}, "times": 2},
        {"text": "third time"},
    ]})
    run_id = await launch('return await agent("x", {retries: 2})', fixtures=fixtures)
    record = await finished(engine, run_id)
    assert record.result == "third time"
    [agent] = store.agents(run_id)
    assert agent.attempts == 3
    attempts = store.attempts(agent.id)
    assert [a.error["message"] if a.error else None for a in attempts] == ["flaky", "flaky", None]


async def test_attempt_timeout_is_agent_timeout(run_script: RunScript, project: Path) -> None:
    fixtures = write_fixtures(project, {"defaults": {"latencyMs": 2000}})
    record = await run_script(
        'try { await agent("x", {timeoutMs: 50}) } catch (e) { return e.code + ": " + e.message }', fixtures=fixtures)
    assert record.result == "AGENT_TIMEOUT: Agent attempt timed out"


async def test_output_schema_is_enforced(run_script: RunScript, project: Path) -> None:
    schema = '{type: "object", properties: {n: {type: "number"}}, required: ["n"]}'
    assert (await run_script(f'return await agent("count", {{outputSchema: {schema}}})')).result == {"n": 0}
    fixtures = write_fixtures(project, {"responses": [{"json": {"n": "not a number"}}]})
    outcome = await run_script(
        f'try {{ await agent("count", {{outputSchema: {schema}}}) }} catch (e) {{ return e.code }}', fixtures=fixtures)
    assert outcome.result == "RESULT_INVALID"


async def test_checkpoints_answered_by_label_in_order(run_script: RunScript) -> None:
    script = """
    const a = await checkpoint({name: "ship", prompt: "first?", context: null});
    const b = await checkpoint({name: "ship", prompt: "second?", context: {n: 2}});
    return [a, b];
    """
    outcome = await run_script(script, answers={"ship": False, "ship#2": True})
    assert outcome.result == ["rejected", "approved"]


async def test_checkpoint_reject_and_labels(engine: Engine, launch, store: RunStore) -> None:
    script = """
    const a = await checkpoint({name: "ship", prompt: "first?", context: null});
    const b = await checkpoint({name: "ship", prompt: "second?", context: {n: 2}});
    return [a, b];
    """
    run_id = await launch(script)
    await wait_for(lambda: store.awaiting_checkpoints(run_id))
    assert store.get_run(run_id).state == "awaiting_input"  # type: ignore[union-attr]
    engine.respond(run_id, name="ship", approved=False)
    await wait_for(lambda: [c for c in store.awaiting_checkpoints(run_id) if c.label == "ship#2"])
    assert engine.respond(run_id, name="ship", approved=True).accepted is False  # already answered
    engine.respond(run_id, name="ship#2", approved=True)
    record = await finished(engine, run_id)
    assert record.result == ["rejected", "approved"]


async def test_invalid_checkpoint_is_rejected(run_script: RunScript) -> None:
    outcome = await run_script('try { await checkpoint({name: "x", prompt: "p"}) } catch (e) { return e.message }')
    assert outcome.result == "checkpoint requires only name, prompt, and JSON context"


async def test_pause_blocks_new_agents_until_resume(engine: Engine, launch, project: Path, store: RunStore) -> None:
    fixtures = write_fixtures(project, {"defaults": {"latencyMs": 150}})
    run_id = await launch('const a = await agent("one"); const b = await agent("two"); return [a, b]',
                          fixtures=fixtures)
    await wait_for(lambda: store.agents(run_id))
    assert engine.pause(run_id) in ("pausing", "paused")
    await wait_for(lambda: store.get_run(run_id).state == "paused")  # type: ignore[union-attr]
    await anyio.sleep(0.3)
    assert len(store.agents(run_id)) == 1, "no new agent starts while paused"
    await engine.resume(run_id)
    record = await finished(engine, run_id)
    assert record.state == "completed"
    assert len(store.agents(run_id)) == 2


async def test_stop_cancels_agents_and_is_final(engine: Engine, launch, project: Path, store: RunStore) -> None:
    fixtures = write_fixtures(project, {"defaults": {"latencyMs": 5000}})
    run_id = await launch('await parallel("p", {a: () => agent("a"), b: () => agent("b")})', fixtures=fixtures)
    await wait_for(lambda: len(store.agents(run_id)) == 2)
    assert engine.stop(run_id) == ControlOutcome("stopped", run_id=run_id, stopped=True)
    record = await finished(engine, run_id)
    assert record.state == "stopped"
    assert {a.state for a in store.agents(run_id)} == {"cancelled"}
    assert engine.stop(run_id).reason == "already_terminal"
    assert engine.stop("00000000-nope").reason == "unknown_run"
    with pytest.raises(WorkflowError, match="Cannot resume stopped run"):
        await engine.resume(run_id)


async def test_runaway_script_is_stopped(engine: Engine, launch) -> None:
    run_id = await launch("while (true) {}")
    await anyio.sleep(0.3)
    engine.stop(run_id)
    record = await finished(engine, run_id, timeout=5)
    assert record.state == "stopped"


async def test_script_errors_fail_the_run_with_their_codes(engine: Engine, launch) -> None:
    run_id = await launch('throw new Error("my own words")')
    record = await finished(engine, run_id)
    assert record.state == "failed"
    assert record.error == {"code": "INTERNAL_ERROR", "message": "my own words", "authored": True}
    with pytest.raises(WorkflowError) as err:  # the launch's preflight rejects unknown roles
        await launch('await agent("x", {role: "nobody"})')
    assert (err.value.code, err.value.message) == ("UNKNOWN_AGENT_TYPE", "Unknown agent type: nobody")


async def test_interrupted_run_resumes_without_redoing_completed_agents(
    project: Path, store: RunStore
) -> None:
    fixtures = write_fixtures(project, {"responses": [{"match": {"label": "slow"}, "latencyMs": 10000}]})
    script = 'const a = await agent("fast", {label: "fast"}); const b = await agent("slow", {label: "slow"}); ' \
             "return [a, b]"
    async with Engine(store) as first:
        from piflow.engine.engine import LaunchRequest

        run_id = await first.launch(LaunchRequest(script=script, cwd=str(project), fixtures=fixtures))
        await wait_for(lambda: len(store.agents(run_id)) == 2)
    assert store.get_run(run_id).state == "interrupted"  # type: ignore[union-attr]
    write_fixtures(project, {"responses": []})
    async with Engine(store) as second:
        await second.resume(run_id[:8])
        record = await finished(second, run_id)
    assert record.state == "completed"
    assert record.result == ["[scripted] fast", "[scripted] slow"]
    completed = [a for a in store.agents(run_id) if a.state == "completed"]
    assert sorted(a.label for a in completed) == ["fast", "slow"], "fast ran once, slow re-ran after the crash"


async def test_run_view_has_budget_and_checkpoints(engine: Engine, launch, store: RunStore) -> None:
    run_id = await launch('await agent("x"); return await checkpoint({name: "go", prompt: "Go?", context: 1})',
                          budget={"tokens": {"soft": 1, "hard": 100000}})
    await wait_for(lambda: store.awaiting_checkpoints(run_id))
    view = run_view(store, run_id)
    assert view.state == "awaiting_input"
    assert view.checkpoints == [CheckpointView("go", "Go?", 1, CheckpointState.AWAITING)]
    assert view.budget.limits == {"tokens": {"soft": 1, "hard": 100000}}
    assert [e["type"] for e in view.budget.events] == ["soft_crossed"]
    engine.respond(run_id, name="go", approved=True)
    assert (await finished(engine, run_id)).result == "approved"


async def test_a_conversation_continues_after_a_checkpoint_on_either_executor(run_script: RunScript) -> None:
    script = """
    const dev = conversation("dev", {label: "dev"});
    const one = await dev.run("first");
    await checkpoint({name: "go", prompt: "Continue?", context: null});
    return [one, await dev.run("second")];
    """
    outcome = await run_script(script, answers={"go": True})
    assert (outcome.state, outcome.result) == ("completed", ["[scripted] first", "[scripted] second"]), outcome.error


async def test_conversation_turns_are_journaled_per_turn_and_replayed(
    project: Path, store: RunStore
) -> None:
    from piflow.engine.engine import LaunchRequest

    script = """
    const dev = conversation("dev", {label: "dev"});
    const one = await dev.run("first");
    const two = await dev.run("second", {timeoutMs: 5000});
    await checkpoint({name: "pause here", prompt: "Continue?", context: null});
    return [one, two, await dev.run("third")];
    """
    async with Engine(store) as first:
        run_id = await first.launch(LaunchRequest(script=script, cwd=str(project)))
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
    turns = sorted(path for path in store.journal(run_id) if "turn%3A" in path)
    assert [path.rsplit("/", 1)[1] for path in turns] == ["turn%3A1", "turn%3A2"]
    async with Engine(store) as second:
        await second.resume(run_id)
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
        second.respond(run_id, name="pause here", approved=True)
        record = await finished(second, run_id)
    assert record.result == ["[scripted] first", "[scripted] second", "[scripted] third"]
    assert len(store.agents(run_id)) == 3, "the two journaled turns were replayed, not re-run"
