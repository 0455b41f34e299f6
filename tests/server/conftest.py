"""A real `piflow serve` over stdio, driven by pytest-lsp, in an isolated home.

Every test gets its own HOME, XDG directories and pi agent dir (passed to the server process as
environment variables), a project with `piflow.toml`, workflow settings with a model alias, a
role and a model registry — so nothing a developer has configured leaks into a test.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from isolation import isolated_environment

CLIENTS = Path(__file__).parent / "clients"
PROFILES = ("vscode_1.95", "neovim_0.11", "neovim_0.12")
SERVER_COMMAND = [sys.executable, "-m", "piflow", "serve", "--stdio"]

SETTINGS = {"modelAliases": {"fast": "openai/gpt-4o-mini", "deep": "openai/gpt-4o:high"}}
MODELS = {
    "providers": {
        "openai": {
            "baseUrl": "https://api.openai.com/v1",
            "api": "openai-completions",
            "apiKey": "sk-test",
            "models": [{"id": "gpt-4o"}, {"id": "gpt-4o-mini"}],
        }
    }
}
REVIEWER = """---
description: Reviews a change for correctness
model: openai/gpt-4o
tools: [read, grep]
---
You review code.
"""


@dataclass
class Workspace:
    """The isolated world of one test."""

    root: Path
    home: Path
    agent: Path
    project: Path
    env: dict[str, str]

    def write(self, relative: str, text: str) -> Path:
        path = self.project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def uri(self, path: Path) -> str:
        uri = from_fs_path(str(path))
        assert uri is not None
        return uri

    @property
    def settings_path(self) -> Path:
        return self.agent / "pi-extensible-workflows" / "settings.json"

    @property
    def roles(self) -> Path:
        return self.agent / "pi-extensible-workflows" / "roles"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    home = tmp_path / "home"
    agent = home / ".pi" / "agent"
    project = tmp_path / "project"
    for directory in (home, agent / "pi-extensible-workflows" / "roles", project):
        directory.mkdir(parents=True, exist_ok=True)
    (agent / "pi-extensible-workflows" / "settings.json").write_text(json.dumps(SETTINGS, indent=2) + "\n")
    (agent / "pi-extensible-workflows" / "roles" / "reviewer.md").write_text(REVIEWER)
    (agent / "models.json").write_text(json.dumps(MODELS, indent=2) + "\n")
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    env = isolated_environment(tmp_path, home, agent)
    return Workspace(tmp_path, home, agent, project, env)


def initialize_params(profile: str, workspace: Workspace, options: dict[str, Any] | None) -> types.InitializeParams:
    """The captured `initialize` of an editor, pointed at the test's project."""
    raw = json.loads((CLIENTS / f"{profile}.json").read_text())
    raw["processId"] = os.getpid()
    raw["rootUri"] = workspace.uri(workspace.project)
    raw["rootPath"] = str(workspace.project)
    raw["workspaceFolders"] = [{"uri": workspace.uri(workspace.project), "name": "project"}]
    raw["initializationOptions"] = {"piflow": options or {}}
    return get_converter().structure(raw, types.InitializeParams)


ANSWERS = {"approve": "Approve", "reject": "Reject"}


class Client(LanguageClient):
    """pytest-lsp's client that also records every notification and server request it gets.

    Notification params stay plain JSON (no namedtuples), so `piflow/*` payloads compare as dicts.
    `answer` decides what a `window/showMessageRequest` is answered with (an action title or None);
    while `hold_progress` is set and not yet set off, `window/workDoneProgress/create` waits (a slow client).
    """

    def __init__(self) -> None:
        super().__init__(converter_factory=get_converter)
        self.log: list[tuple[str, Any]] = []
        self.answer: Callable[[types.ShowMessageRequestParams], str | None] = lambda params: None
        self.hold_progress: asyncio.Event | None = None

    def record(self, method: str, params: Any) -> None:
        self.log.append((method, params))

    async def expect(
        self, method: str, where: Callable[[Any], bool] = lambda params: True, timeout: float = 30, after: int = 0
    ) -> Any:
        """The first `method` message recorded after position `after` matching `where` (waiting if needed)."""

        async def wait() -> Any:
            seen = after
            while True:
                for entry_method, params in self.log[seen:]:
                    if entry_method == method and where(params):
                        return params
                seen = len(self.log)
                await asyncio.sleep(0.01)

        return await asyncio.wait_for(wait(), timeout)

    def received(self, method: str) -> list[Any]:
        return [params for entry_method, params in self.log if entry_method == method]


def _recording(method: str, reply: Callable[[Client, Any], Any] | None = None) -> Callable[[Client, Any], Any]:
    def handle(client: Client, params: Any) -> Any:
        client.record(method, params)
        return reply(client, params) if reply else None

    return handle


def _show_message_request(client: Client, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
    title = client.answer(params)
    return None if title is None else types.MessageActionItem(title=title)


async def _create_progress(client: Client, params: types.WorkDoneProgressCreateParams) -> None:
    if client.hold_progress is not None:
        await client.hold_progress.wait()
    DEFAULT_CLIENT_FEATURES[types.WINDOW_WORK_DONE_PROGRESS_CREATE](client, params)


def _publish(client: Client, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics


CUSTOM = ("piflow/runStarted", "piflow/runProgress", "piflow/checkpoint", "piflow/budgetApproval",
          "piflow/runFinished", "piflow/log")


def make_client() -> Client:
    client = Client()
    features: dict[str, Any] = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _recording(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, _publish)
    features[types.WINDOW_SHOW_MESSAGE] = _recording(
        types.WINDOW_SHOW_MESSAGE, lambda c, p: DEFAULT_CLIENT_FEATURES[types.WINDOW_SHOW_MESSAGE](c, p)
    )
    features[types.WINDOW_SHOW_MESSAGE_REQUEST] = _recording(types.WINDOW_SHOW_MESSAGE_REQUEST, _show_message_request)
    features[types.WINDOW_WORK_DONE_PROGRESS_CREATE] = _create_progress
    features[types.PROGRESS] = _recording(types.PROGRESS, lambda c, p: DEFAULT_CLIENT_FEATURES[types.PROGRESS](c, p))
    features[types.WORKSPACE_DIAGNOSTIC_REFRESH] = _recording(types.WORKSPACE_DIAGNOSTIC_REFRESH)
    features[types.WORKSPACE_CODE_LENS_REFRESH] = _recording(types.WORKSPACE_CODE_LENS_REFRESH)
    features[types.WORKSPACE_INLAY_HINT_REFRESH] = _recording(types.WORKSPACE_INLAY_HINT_REFRESH)
    features[types.CLIENT_REGISTER_CAPABILITY] = _recording(types.CLIENT_REGISTER_CAPABILITY)
    for method in CUSTOM:
        features[method] = _recording(method)
    register_lsp_features(client, features)
    return client


Starter = Callable[..., Any]


@pytest_asyncio.fixture
async def start(workspace: Workspace) -> AsyncIterator[Starter]:
    """`await start(profile, **options)` → an initialized client; all are shut down after the test."""
    clients: list[Client] = []

    async def starter(profile: str = "vscode_1.95", **options: Any) -> Client:
        config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=workspace.env, client_factory=make_client)
        client = await config.start()
        assert isinstance(client, Client)
        clients.append(client)
        await client.initialize_session(initialize_params(profile, workspace, options))
        return client

    yield starter
    for client in clients:
        try:
            if client._server is not None and client._server.returncode is None:  # not shut down by the test
                await asyncio.wait_for(client.shutdown_session(), 20)
        finally:
            await client.stop()


def open_document(client: Client, uri: str, text: str, language_id: str = "javascript") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text))
    )


def change_document(client: Client, uri: str, version: int, edits: list[tuple[tuple[int, int, int, int], str]]) -> None:
    changes: list[types.TextDocumentContentChangeEvent] = [
        types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(a, b), types.Position(c, d)), text=text
        )
        for (a, b, c, d), text in edits
    ]
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(uri=uri, version=version), changes)
    )


async def published(client: Client, uri: str, after: int = 0) -> list[types.Diagnostic]:
    """The first diagnostics published for `uri` after log position `after` (push mode)."""
    params = await client.expect(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == uri, after=after)
    return list(params.diagnostics)


async def pulled(client: Client, uri: str, previous: str | None = None) -> types.DocumentDiagnosticReport:
    return await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri), previous_result_id=previous)
    )


async def diagnostics(client: Client, profile: str, uri: str) -> list[types.Diagnostic]:
    """Diagnostics of the document as the profile's client receives them (pull or push)."""
    if profile == "neovim_0.11":
        return await published(client, uri)
    report = await pulled(client, uri)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
    return list(report.items)


def spans(items: list[types.Diagnostic]) -> list[tuple[str, tuple[int, int, int, int]]]:
    """`(code, (line, char, line, char))` of each diagnostic, sorted: what tests compare exactly."""
    return sorted(
        (str(d.code), (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character))
        for d in items
    )
