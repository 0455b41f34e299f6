"""The editor on a Temporal-backed project: a real `piflow serve` (pytest-lsp) lists, follows and
answers runs that execute on real `piflow worker`s of a real dev server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio
from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from temporal_support import temporal_project

from isolation import isolated_environment
from temporal_cluster import Workers

SCRIPT = """
phase("scan");
const found = await parallel("scan", {
  api: () => agent("Scan the API", { label: "api" }),
  ui: () => agent("Scan the UI", { label: "ui" }),
});
const ship = await checkpoint({ name: "ship", prompt: "Ship it?", context: { found } });
return { found, ship };
"""
NOTIFICATIONS = ("piflow/runStarted", "piflow/runProgress", "piflow/checkpoint", "piflow/budgetApproval",
                 "piflow/runFinished")


class Editor(LanguageClient):
    """A pytest-lsp client that records the `piflow/*` notifications it gets."""

    def __init__(self) -> None:
        super().__init__(converter_factory=get_converter)
        self.log: list[tuple[str, Any]] = []

    async def expect(self, method: str, where: Callable[[Any], bool], timeout: float = 90) -> Any:
        async def wait() -> Any:
            while True:
                for logged, params in self.log:
                    if logged == method and where(params):
                        return params
                await asyncio.sleep(0.05)

        return await asyncio.wait_for(wait(), timeout)

    async def execute(self, command: str, argument: dict[str, Any]) -> Any:
        return await self.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=[argument]))


def _make_editor() -> Editor:
    editor = Editor()
    features: dict[str, Any] = dict(DEFAULT_CLIENT_FEATURES)
    for method in NOTIFICATIONS:
        features[method] = _recording(method)
    register_lsp_features(editor, features)
    return editor


def _recording(method: str) -> Callable[[Editor, Any], None]:
    def record(editor: Editor, params: Any) -> None:
        editor.log.append((method, params))

    return record


def make_project(root: Path, workers: Workers) -> Path:
    return temporal_project(root, workers, {"release.workflow.js": SCRIPT})


def machine(project: Path, name: str) -> dict[str, str]:
    """The environment of a user on another machine: its own home, agent dir and run store."""
    root = project.parent / name
    return isolated_environment(root, root / "home", root / "agent")


@pytest_asyncio.fixture
async def editors(tmp_path: Path) -> AsyncIterator[Callable[[Path, str], Any]]:
    """`await open_editor(project, machine_name)` → an initialized editor on the project."""
    started: list[Editor] = []

    async def open_editor(project: Path, name: str) -> Editor:
        config = ClientServerConfig(server_command=[sys.executable, "-m", "piflow", "serve", "--stdio"],
                                    server_env=machine(project, name), client_factory=_make_editor)
        editor = await config.start()
        assert isinstance(editor, Editor)
        started.append(editor)
        uri = from_fs_path(str(project))
        await editor.initialize_session(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=uri,
            workspace_folders=[types.WorkspaceFolder(uri=uri or "", name="project")],
            initialization_options={"piflow": {"customNotifications": True}}))
        return editor

    yield open_editor
    for editor in started:
        try:
            await asyncio.wait_for(editor.shutdown_session(), 20)
        finally:
            await editor.stop()


def launch_from_a_terminal(project: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "piflow", "run", "release.workflow.js", "--detach"], cwd=project,
                          env=machine(project, "laptop"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


async def test_a_checkpoint_of_a_run_on_the_workers_is_answered_from_a_teammates_editor(
    tmp_path: Path, workers: Workers, editors: Callable[[Path, str], Any]
) -> None:
    workers.start(2)
    project = make_project(tmp_path, workers)
    run_id = launch_from_a_terminal(project)  # on "the laptop"; the editor below is a teammate's
    editor = await editors(project, "teammate")

    asked = await editor.expect("piflow/checkpoint", lambda p: p["runId"] == run_id)
    assert (asked["name"], asked["prompt"]) == ("ship", "Ship it?")
    assert asked["uri"] == from_fs_path(str(project / "release.workflow.js"))
    progress = await editor.expect("piflow/runProgress", lambda p: p["runId"] == run_id
                                   and p["state"] == "awaiting_input")
    assert progress["agentCounts"] == {"total": 2, "settled": 2}
    listed = (await editor.execute("piflow.listRuns", {}))["runs"]
    assert [(r["runId"], r["state"]) for r in listed] == [(run_id, "awaiting_input")]
    shown = await editor.execute("piflow.showRun", {"runId": run_id[:8]})
    assert sorted((a["label"], a["state"]) for a in shown["agentList"]) == [("api", "completed"),
                                                                            ("ui", "completed")]
    assert [c["name"] for c in shown["checkpoints"]] == ["ship"]

    uri = from_fs_path(str(project / "release.workflow.js"))
    assert uri is not None
    editor.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="javascript", version=1, text=SCRIPT)))
    lenses = await editor.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    line = next(n for n, text in enumerate(SCRIPT.splitlines()) if "checkpoint(" in text)
    approve = next(lens.command for lens in lenses or []
                   if lens.command and lens.command.title == "✓ Approve" and lens.range.start.line == line)
    assert approve.arguments is not None  # the lens above the checkpoint answers it, as a click does
    answered = await editor.execute(approve.command, approve.arguments[0])
    assert answered["accepted"] is True
    again = await editor.execute("piflow.respond", {"runId": run_id, "name": "ship", "approved": False})
    assert again["accepted"] is False  # the first answer wins

    finished = await editor.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert finished["state"] == "completed"
    assert finished["result"] == {"found": {"api": "[scripted] Scan the API", "ui": "[scripted] Scan the UI"},
                                  "ship": "approved"}


async def test_the_editor_runs_a_script_on_the_cluster_and_follows_it_to_its_end(
    tmp_path: Path, workers: Workers, editors: Callable[[Path, str], Any]
) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers)
    script = project / "scan.workflow.js"
    script.write_text('const a = await agent("first", { label: "first" });\nreturn a;\n')
    editor = await editors(project, "laptop")
    uri = from_fs_path(str(script))
    run_id = (await editor.execute("piflow.run", {"uri": uri}))["runId"]

    started = await editor.expect("piflow/runStarted", lambda p: p["runId"] == run_id)
    assert started["uri"] == uri
    finished = await editor.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert (finished["state"], finished["result"]) == ("completed", "[scripted] first")
    other = await editors(project, "teammate")  # a run that ended before an editor looked is history
    listed = (await other.execute("piflow.listRuns", {"uri": uri}))["runs"]
    assert [(r["runId"], r["state"], r["uri"]) for r in listed] == [(run_id, "completed", uri)]


async def test_the_editor_pauses_a_run_and_raises_its_exhausted_budget_with_an_approval(
    tmp_path: Path, workers: Workers, editors: Callable[[Path, str], Any]
) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers)
    script = project / "three.workflow.js"
    script.write_text("const out = [];\n"
                      "for (const n of [1, 2, 3]) out.push(await agent(`n${n}`, { label: `n${n}` }));\n"
                      "return out;\n")
    (project / "slow.json").write_text('{"defaults": {"latencyMs": 3000}}')
    editor = await editors(project, "laptop")
    uri = from_fs_path(str(script))
    run_id = (await editor.execute("piflow.run", {"uri": uri, "budget": {"agentLaunches": {"hard": 2}},
                                                  "fixtures": "slow.json"}))["runId"]
    await editor.expect("piflow/runProgress", lambda p: p["runId"] == run_id and p["agents"]
                        and p["agents"][0]["state"] == "running")
    assert (await editor.execute("piflow.pause", {"runId": run_id}))["state"] == "pausing"
    await editor.expect("piflow/runProgress", lambda p: p["runId"] == run_id and p["state"] == "paused")
    assert (await editor.execute("piflow.resume", {"runId": run_id}))["state"] == "running"

    exhausted = await editor.expect("piflow/runFinished", lambda p: p["runId"] == run_id)
    assert exhausted["state"] == "budget_exhausted"
    asked = await editor.execute("piflow.resume", {"runId": run_id, "budget": {"agentLaunches": {"hard": 3}}})
    approval = await editor.expect("piflow/budgetApproval", lambda p: p["runId"] == run_id)
    assert (asked["proposalId"], approval["proposed"]) == (approval["proposalId"], {"agentLaunches": {"hard": 3}})
    answered = await editor.execute("piflow.respond", {"runId": run_id, "proposalId": asked["proposalId"],
                                                       "approved": True})
    assert (answered["state"], answered["approved"]) == ("running", True)
    finished = await editor.expect("piflow/runFinished", lambda p: p["runId"] == run_id
                                   and p["state"] != "budget_exhausted")
    assert (finished["state"], finished["result"]) == ("completed", ["[scripted] n1", "[scripted] n2", "[scripted] n3"])
