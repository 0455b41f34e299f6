"""End-to-end runs through the real worker, store and scripted backend (spec F, G, I, J)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from engine_support import EmbeddedRuns, Runs, RunScript, awaiting, finished, wait_for, write_fixtures

from piflow.engine import events
from piflow.engine.agent_details import AgentDetailView
from piflow.engine.control import ControlOutcome
from piflow.engine.engine import Engine
from piflow.engine.lifecycle import CheckpointState
from piflow.engine.store import RunStore
from piflow.engine.views import CheckpointView
from piflow.errors import WorkflowError

FAN_OUT = """
phase("scan");
const found = await parallel("scan", {
  api: () => agent("Scan the API", { label: "api" }),
  ui: () => agent("Scan the UI", { label: "ui" }),
});
return found;
"""


async def test_fan_out_completes_with_results_and_events(runs: Runs) -> None:
    run_id = await runs.launch(FAN_OUT, name="scan")
    outcome = await runs.finish(run_id)
    assert outcome.state == "completed", outcome.error
    assert outcome.result == {"api": "[scripted] Scan the API", "ui": "[scripted] Scan the UI"}
    assert (outcome.view.summary.workflow_name, outcome.view.summary.phase) == ("scan", "scan")
    agents = outcome.agents
    assert [(a.label, a.state, a.attempts) for a in agents] == [("api", "completed", 1), ("ui", "completed", 1)]
    assert [a.structural_path for a in agents] == [["scan", "api"], ["scan", "ui"]]
    assert all(a.journal_path and a.journal_path.startswith("agent/scan/") for a in agents)
    if isinstance(runs, EmbeddedRuns):  # what only the embedded store shows: the run's events and journal
        seen = [e.type for e in runs.store.events(run_id)]
        assert seen[0] == events.RUN_STARTED
        assert seen[-2:] == [events.RUN_STATE_CHANGED, events.RUN_COMPLETED]
        assert events.PHASE_CHANGED in seen
        assert runs.store.journal(run_id).keys() == {a.journal_path for a in agents}


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


async def test_a_times_rule_answers_once_per_run(run_script: RunScript, project: Path) -> None:
    """On Temporal the run's workflow counts `times`, not each worker (two serve these tests)."""
    fixtures = write_fixtures(project, {"responses": [{"match": {"prompt": "^scan"}, "text": "first", "times": 1}]})
    names = "abcdefgh"
    tasks = ", ".join(f'{n}: () => agent("scan {n}")' for n in names)
    outcome = await run_script(f'return await parallel("scan", {{{tasks}}})', fixtures=fixtures)
    assert outcome.result == {n: "first" if n == "a" else f"[scripted] scan {n}" for n in names}, outcome.error


async def test_agent_failure_carries_failed_at_and_fails_the_run(run_script: RunScript, project: Path) -> None:
    fixtures = write_fixtures(project, {"responses": [{"fail": {"code": "AGENT_FAILED", "message": "boom"}}]})
    record = await run_script('try { await agent("x") } catch (e) { return [e.code, e.message, e.failedAt] }',
                              fixtures=fixtures)
    assert record.result == ["AGENT_FAILED", "boom", "agent/callsite%3A12%3A22/occurrence%3A1"]
    record = await run_script('await agent("x")', fixtures=fixtures)
    assert record.state == "failed"
    assert record.error is not None and record.error["code"] == "AGENT_FAILED"


async def test_retries_then_success(runs: Runs, project: Path) -> None:
    """`times` counts per run, on every executor (on Temporal across all workers, issue 13)."""
    fixtures = write_fixtures(project, {"responses": [
        {"fail": {"code": "AGENT_FAILED", "message": "flaky"}, "times": 2},
        {"text": "third time"},
    ]})
    run_id = await runs.launch('return await agent("x", {retries: 2})', fixtures=fixtures)
    outcome = await runs.finish(run_id)
    assert (outcome.state, outcome.result) == ("completed", "third time"), outcome.error
    [agent] = (await runs.view(run_id, details=True)).agent_list
    assert isinstance(agent, AgentDetailView)
    assert (agent.state, agent.agent.attempts) == ("completed", 3)
    assert [(a.number, a.error.message if a.error else None) for a in agent.attempt_list] == [
        (1, "flaky"), (2, "flaky"), (3, None)]


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


async def test_checkpoint_reject_and_labels(runs: Runs) -> None:
    script = """
    const a = await checkpoint({name: "ship", prompt: "first?", context: null});
    const b = await checkpoint({name: "ship", prompt: "second?", context: {n: 2}});
    return [a, b];
    """
    run_id = await runs.launch(script)
    view = await runs.until(run_id, awaiting)
    assert (view.state, awaiting(view)) == ("awaiting_input", ["ship"])
    assert await runs.respond(run_id, "ship", False)
    await runs.until(run_id, lambda v: awaiting(v) == ["ship#2"])
    assert await runs.respond(run_id, "ship", True) is False  # already answered
    assert await runs.respond(run_id, "ship#2", True)
    assert (await runs.finish(run_id)).result == ["rejected", "approved"]


async def test_invalid_checkpoint_is_rejected(run_script: RunScript) -> None:
    outcome = await run_script('try { await checkpoint({name: "x", prompt: "p"}) } catch (e) { return e.message }')
    assert outcome.result == "checkpoint requires only name, prompt, and JSON context"


async def test_pause_blocks_new_agents_until_resume(runs: Runs, project: Path) -> None:
    fixtures = write_fixtures(project, {"defaults": {"latencyMs": 3000}})  # long enough to pause under load
    run_id = await runs.launch(
        'const a = await agent("one", {label: "one"}); const b = await agent("two", {label: "two"}); return [a, b]',
        fixtures=fixtures)
    await runs.until(run_id, lambda v: v.agents)
    assert await runs.pause(run_id) in ("pausing", "paused")
    await runs.until(run_id, lambda v: v.state == "paused")
    await anyio.sleep(1.0)
    view = await runs.view(run_id)
    assert [(a.label, a.state) for a in view.agents] == [("one", "completed")], "no new agent starts while paused"
    await runs.resume(run_id)
    outcome = await runs.finish(run_id)
    assert (outcome.state, outcome.result) == ("completed", ["[scripted] one", "[scripted] two"])
    assert len(outcome.agents) == 2


async def test_stop_cancels_agents_and_is_final(runs: Runs, project: Path) -> None:
    fixtures = write_fixtures(project, {"defaults": {"latencyMs": 30000}})
    run_id = await runs.launch('await parallel("p", {a: () => agent("a"), b: () => agent("b")})', fixtures=fixtures)
    await runs.until(run_id, lambda v: [a for a in v.agents if a.state == "running"] == v.agents and len(v.agents) == 2)
    assert await runs.stop(run_id) == ControlOutcome("stopped", run_id=run_id, stopped=True)
    outcome = await runs.finish(run_id, timeout=20)
    assert (outcome.state, outcome.error) == ("stopped", None)  # a manual stop is no error
    assert {a.state for a in outcome.agents} == {"cancelled"}
    assert (await runs.stop(run_id)).reason == "already_terminal"
    assert (await runs.stop("00000000-nope")).reason == "unknown_run"
    with pytest.raises(WorkflowError, match="Cannot resume stopped run"):
        await runs.resume(run_id)


async def test_runaway_script_fails_the_run(runs: Runs) -> None:
    """A script that never waits misses the worker's heartbeat and fails its run (spec A.2), on
    Temporal too: the step running it ends, and the workflow with it."""
    outcome = await runs.run("while (true) {}", timeout=60)
    assert (outcome.state, outcome.error) == (
        "failed", {"code": "WORKER_UNRESPONSIVE", "message": "Workflow worker missed its five-second heartbeat"})


async def test_a_runaway_script_is_stopped_within_seconds(runs: Runs) -> None:
    """A stop reaches a script that never waits, on Temporal too: the workflow sees the signal while
    its step runs the script (each step activity waits for it at most 1.5 s) and ends the step."""
    run_id = await runs.launch("while (true) {}")
    await anyio.sleep(0.3)
    began = time.monotonic()
    assert (await runs.stop(run_id)).stopped
    outcome = await runs.finish(run_id, timeout=30)
    assert (outcome.state, outcome.error) == ("stopped", None)
    assert time.monotonic() - began < 4.5, "before the script's worker missed its heartbeat (5 s)"


async def test_script_errors_fail_the_run_with_their_codes(runs: Runs) -> None:
    outcome = await runs.run('throw new Error("my own words")')
    assert outcome.state == "failed"
    assert outcome.error == {"code": "INTERNAL_ERROR", "message": "my own words", "authored": True}
    with pytest.raises(WorkflowError) as err:  # the launch's preflight rejects unknown roles
        await runs.launch('await agent("x", {role: "nobody"})')
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


async def test_run_view_has_budget_and_checkpoints(runs: Runs) -> None:
    script = 'await agent("x", {label: "x"}); return await checkpoint({name: "go", prompt: "Go?", context: 1})'
    run_id = await runs.launch(script, budget={"tokens": {"soft": 1, "hard": 100000}})
    view = await runs.until(run_id, awaiting)
    assert view.state == "awaiting_input"
    assert view.checkpoints == [CheckpointView("go", "Go?", 1, CheckpointState.AWAITING)]
    assert view.budget.limits == {"tokens": {"soft": 1, "hard": 100000}}
    assert [e["type"] for e in view.budget.events] == ["soft_crossed"]
    assert [(a.label, a.state) for a in view.agents] == [("x", "completed")]
    assert await runs.respond(run_id, "go", True)
    assert (await runs.finish(run_id)).result == "approved"


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
