"""A launch snapshot keeps the script as instrumented for the worker; a resume hands that to the
worker instead of instrumenting again, unless the body, its dialect or piflow changed (issue 15).

Which source the worker compiled is observed through what the script does: a kept source edited in
the store (under its key) is what the resumed run executes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import finished, wait_for

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore
from piflow.engine.worker.client import Instrumentation
from piflow.errors import WorkflowError

SCRIPT = """
const go = await checkpoint({name: "go", prompt: "Go?", context: null});
return "as launched";
"""


async def _interrupted(project: Path, store: RunStore) -> str:
    """A run whose owner went away while it awaited its checkpoint."""
    async with Engine(store) as first:
        run_id = await first.launch(LaunchRequest(script=SCRIPT, cwd=str(project)))
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
    return run_id


async def _resumed_result(store: RunStore, run_id: str) -> object:
    async with Engine(store) as second:
        await second.resume(run_id)
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
        second.respond(run_id, name="go", approved=True)
        record = await finished(second, run_id)
    assert record.state == "completed", record.error
    return record.result


async def test_the_launch_snapshot_keeps_the_instrumented_script(project: Path, store: RunStore) -> None:
    run_id = await _interrupted(project, store)
    kept = store.snapshot(run_id)["instrumented"]
    assert kept["key"] == Instrumentation.key_of(SCRIPT, None)
    assert "__pi_extensible_workflows_checkpoint" not in kept["source"]  # (checkpoint is not rewritten)
    assert kept["source"].startswith("async (") and '"as launched"' in kept["source"]


async def test_a_resume_runs_the_kept_source_without_instrumenting_again(project: Path, store: RunStore) -> None:
    run_id = await _interrupted(project, store)
    snapshot = store.snapshot(run_id)
    snapshot["instrumented"]["source"] = snapshot["instrumented"]["source"].replace("as launched", "as kept")
    store.replace_snapshot(run_id, snapshot)
    assert await _resumed_result(store, run_id) == "as kept"


async def test_a_kept_source_under_another_key_is_instrumented_again_and_replaced(
    project: Path, store: RunStore
) -> None:
    """A snapshot from another piflow (or of another body or dialect) has another key: the resume
    instruments the body again and keeps that for the next resume."""
    run_id = await _interrupted(project, store)
    snapshot = store.snapshot(run_id)
    snapshot["instrumented"] = {"key": "from another piflow", "source": "async () => { return 'stale'; }"}
    store.replace_snapshot(run_id, snapshot)
    assert await _resumed_result(store, run_id) == "as launched"
    assert store.snapshot(run_id)["instrumented"]["key"] == Instrumentation.key_of(SCRIPT, None)


def test_the_key_changes_with_the_body_the_dialect_and_piflows_version(monkeypatch: pytest.MonkeyPatch) -> None:
    key = Instrumentation.key_of(SCRIPT, None)
    assert Instrumentation.key_of(SCRIPT + " ", None) != key
    assert Instrumentation.key_of(SCRIPT, "pi-subagents") != key
    monkeypatch.setattr("piflow.engine.worker.client.__version__", "99.0.0")
    assert Instrumentation.key_of(SCRIPT, None) != key


async def test_a_body_that_cannot_be_instrumented_fails_the_run_with_the_specs_error() -> None:
    """The host instruments now; the failure still reaches whoever waits for the script's result."""
    from piflow.engine.worker.client import WorkerProcess

    worker = WorkerProcess()
    await worker.start(body="const __pi_extensible_workflows_agent = 1;")
    assert [call async for call in worker.calls()] == []
    with pytest.raises(WorkflowError) as raised:
        await worker.wait_done()
    assert raised.value.code == "INVALID_METADATA"
    assert raised.value.message == "__pi_extensible_workflows_agent is reserved for workflow agent instrumentation"
