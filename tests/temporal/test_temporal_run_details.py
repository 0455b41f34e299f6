"""What a user sees of a finished Temporal run, as of an embedded one: `piflow show` (text and
`--json`) and the editor's showRun/showAgent with each agent's output and attempts, run inlay hints
at the agent calls and the failed agent's error as a diagnostic at its call — against a real dev
server and a real `piflow worker`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from test_temporal_editor import Editor, editors, machine, make_project

from temporal_cluster import Workers

__all__ = ["editors"]  # the pytest-lsp editors fixture, shared with the other editor tests

SCRIPT = """const notes = await agent("Write the notes", { label: "notes" });
const flaky = await agent("Try twice", { label: "flaky", retries: 1 });
const big = await agent("Say a lot", { label: "big" });
await checkpoint({ name: "ship", prompt: "Ship it?", context: { notes } });
await agent("Break", { label: "broken" });
return notes;
"""
BIG = "BIG " + "y" * 100_000
"""An output past the 64 KiB a run view carries inline: shown as a preview, fetched whole alone."""
FIXTURES = {"responses": [
    {"match": {"label": "notes"}, "text": "the notes", "tokens": {"input": 10, "output": 5}},
    {"match": {"label": "flaky"}, "fail": {"code": "AGENT_FAILED", "message": "first try fails"}, "times": 1},
    {"match": {"label": "flaky"}, "text": "second try worked"},
    {"match": {"label": "big"}, "text": BIG},
    {"match": {"label": "broken"}, "fail": {"code": "AGENT_FAILED", "message": "the build is broken"}},
]}


def _project(tmp_path: Path, workers: Workers) -> tuple[Path, Path]:
    project = make_project(tmp_path, workers)
    script = project / "details.workflow.js"
    script.write_text(SCRIPT)
    (project / "answers.json").write_text(json.dumps(FIXTURES))
    return project, script


def _piflow(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "piflow", *args], cwd=project, env=machine(project, "teammate"),
                          capture_output=True, text=True, timeout=120)


def _by_label(shown: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {agent["label"]: agent for agent in shown["agentList"]}


def test_piflow_show_prints_the_outputs_and_attempts_of_a_run_on_the_workers(
    tmp_path: Path, workers: Workers
) -> None:
    workers.start(1)
    project, _ = _project(tmp_path, workers)
    launched = _piflow(project, "run", "details.workflow.js", "--fixtures", "answers.json", "--detach")
    assert launched.returncode == 0, launched.stderr
    run_id = launched.stdout.strip().splitlines()[-1]

    shown: dict[str, Any] = {}
    approved = False
    for _ in range(180):
        done = _piflow(project, "show", run_id[:8], "--json")
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        if shown["state"] == "awaiting_input" and not approved:
            approved = _piflow(project, "approve", run_id[:8], "ship").returncode == 0
            assert approved
        if shown["state"] == "failed":
            break
    assert shown["state"] == "failed", shown
    assert [(c["name"], c["state"], c["prompt"]) for c in shown["checkpoints"]] == [("ship", "approved", "Ship it?")]
    agents = _by_label(shown)
    assert (agents["notes"]["output"], agents["notes"]["outputTruncated"]) == ("the notes", False)
    assert agents["notes"]["attemptList"][0]["tokens"] == 15
    assert agents["notes"]["attemptList"][0]["setup"]["model"] == agents["notes"]["model"]
    flaky = agents["flaky"]
    assert [(a["number"], a["state"], a.get("error")) for a in flaky["attemptList"]] == [
        (1, "failed", {"code": "AGENT_FAILED", "message": "first try fails"}), (2, "completed", None)]
    assert flaky["output"] == "second try worked"
    big = agents["big"]
    assert "output" not in big and big["outputTruncated"] is True
    assert big["outputPreview"].startswith("BIG yyyy") and len(big["outputPreview"]) == 200
    broken = agents["broken"]
    assert (broken["state"], broken["error"]["message"]) == ("failed", "the build is broken")
    assert broken["attemptList"][-1]["error"] == {"code": "AGENT_FAILED", "message": "the build is broken"}

    text = _piflow(project, "show", run_id[:8])
    assert text.returncode == 0, text.stderr
    assert "output: the notes" in text.stdout
    assert "attempt 1: AGENT_FAILED: first try fails" in text.stdout
    assert "output: second try worked" in text.stdout
    assert "error: AGENT_FAILED: the build is broken" in text.stdout
    assert "ran with: model " in text.stdout
    assert "Checkpoint ship: approved (Ship it?)" in text.stdout


async def test_the_editor_shows_outputs_hints_and_the_failed_agent_of_a_run_on_the_workers(
    tmp_path: Path, workers: Workers, editors: Callable[[Path, str], Any]
) -> None:
    workers.start(1)
    project, script = _project(tmp_path, workers)
    editor: Editor = await editors(project, "laptop")
    uri = from_fs_path(str(script))
    assert uri is not None
    editor.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="javascript", version=1, text=SCRIPT)))
    run_id = (await editor.execute("piflow.run", {"uri": uri, "fixtures": "answers.json"}))["runId"]
    await editor.expect("piflow/checkpoint", lambda p: p["runId"] == run_id)
    answered = await editor.execute("piflow.respond", {"runId": run_id, "name": "ship", "approved": False})
    assert answered["accepted"] is True
    finished = await editor.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert finished["state"] == "failed"  # a rejection is the checkpoint's value: the script went on to `broken`

    shown = await editor.execute("piflow.showRun", {"runId": run_id})
    agents = _by_label(shown)
    assert agents["notes"]["output"] == "the notes"
    assert [(c["name"], c["state"]) for c in shown["checkpoints"]] == [("ship", "rejected")]
    assert [a["state"] for a in agents["flaky"]["attemptList"]] == ["failed", "completed"]
    assert agents["big"]["outputTruncated"] is True
    whole = await editor.execute("piflow.showAgent", {"runId": run_id, "agentId": agents["big"]["id"]})
    assert (whole["output"], whole["outputTruncated"]) == (BIG, False)

    lines = SCRIPT.splitlines()
    broken_line = next(n for n, line in enumerate(lines) if '"broken"' in line)
    failed: list[types.Diagnostic] = []
    for _ in range(1800):  # the failed-agent diagnostics follow the run's events (90 s)
        failed = [d for d in editor.diagnostics.get(uri, []) if d.message == "the build is broken"]
        if failed:
            break
        await asyncio.sleep(0.05)
    assert [(d.range.start.line, d.severity) for d in failed] == [(broken_line, types.DiagnosticSeverity.Error)]

    hints = await editor.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(0, 0), types.Position(len(lines), 0))))
    labels = {hint.position.line: hint.label for hint in hints or [] if isinstance(hint.label, str)
              and hint.tooltip == f"Run {run_id[:8]}"}
    assert labels[0] == "✓ completed · 15 tok"
    assert labels[broken_line].startswith("✗ failed")


def test_the_details_of_a_big_run_stay_within_temporals_payload_limit() -> None:
    """40 agents with 64 KiB outputs each (2.6 MB, past Temporal's 2 MiB payload limit): one answer
    inlines outputs up to its budget, then carries previews; one agent alone comes whole."""
    from piflow.engine.temporal.wire import DETAILS_CHARACTERS, PREVIEW_CHARACTERS, JournalEntry, RunStart
    from piflow.engine.temporal.workflow import RunWorkflow
    from piflow.engine.views import OUTPUT_INLINE_BYTES

    workflow = RunWorkflow()
    workflow._start = RunStart("r", "big", "/p", None, {"script": "return 1"}, None, 4, 0.0)
    for n in range(40):
        path = f"agent/{n}"
        workflow._agents[path] = {"path": path, "label": str(n), "tokens": 0, "costUsd": 0.0}
        workflow._journal[path] = JournalEntry(path, "agent", "z" * (OUTPUT_INLINE_BYTES - 10))

    details = workflow.details(None, OUTPUT_INLINE_BYTES + 1)
    sizes = [len(agent.output or "") for agent in details.agents]
    assert sum(sizes) <= DETAILS_CHARACTERS + PREVIEW_CHARACTERS * len(sizes)
    assert sizes[0] == OUTPUT_INLINE_BYTES - 8  # whole, with its quotes
    assert sizes[-1] == PREVIEW_CHARACTERS and details.agents[-1].output_size == OUTPUT_INLINE_BYTES - 8
    alone = workflow.details(["agent/39"], None).agents
    assert [len(agent.output or "") for agent in alone] == [OUTPUT_INLINE_BYTES - 8]
    assert details.script == "return 1"
