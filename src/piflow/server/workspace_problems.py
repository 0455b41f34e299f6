"""Problems of the scripts that are not open, so the Problems panel shows the whole project.

The scripts are the files under each workspace folder that piflow would treat as scripts when
opened (`*.workflow.js`, or the project's `scripts` globs from piflow.toml), skipping
`node_modules` and hidden directories, at most `MAX_SCRIPTS`. They are checked from disk after
start-up, again when they change on disk (`workspace/didChangeWatchedFiles`), when the
configuration changes, and when an open one is closed (its file then speaks for it again). Each
file is one job in a worker thread, so an edit never waits behind a whole scan.

Clients that pull workspace diagnostics (VS Code) get these reports from `workspace/diagnostic`,
with result ids so unchanged files cost nothing; every other client gets them pushed
(`textDocument/publishDiagnostics`). A pull client that has not asked within `PULL_GRACE` seconds
of the first scan is pushed to, and the pushes are withdrawn when it does ask.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from piflow.analysis.document import ScriptDocument
from piflow.analysis.script_file import read_script_file
from piflow.config.files import FileRefused
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.checks import findings
from piflow.server.diagnostics import Diagnostics, to_diagnostic
from piflow.server.documents import DocumentTable, OpenDocument, classify
from piflow.server.projects import SCRIPT_SUFFIXES, Project, Projects
from piflow.server.snapshot import DocumentKind, Snapshot

log = logging.getLogger(__name__)

MAX_SCRIPTS: Final = 500
MAX_ENTRIES: Final = 50_000
"""Directory entries looked at per workspace folder before the search gives up (a huge tree)."""
SKIPPED_DIRECTORIES: Final = frozenset({"node_modules"})
PULL_GRACE: Final = 2.0
START_DELAY: Final = 1.0
"""Seconds after start-up before the first scan: the editor reopens the documents it restores first,
and an open document is checked as the editor has it, not from disk."""


@dataclass(frozen=True)
class DiskReport:
    """The diagnostics of one script file as it is on disk."""

    uri: str
    result_id: str
    items: list[types.Diagnostic]


def candidates(folder: Path) -> list[Path]:
    """Worker thread: the JavaScript files under a folder (bounded; skipped directories pruned)."""
    found: list[Path] = []
    seen = 0
    for directory, subdirectories, files in os.walk(folder):
        subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRECTORIES and not d.startswith("."))
        seen += len(subdirectories) + len(files)
        found.extend(Path(directory, name) for name in sorted(files) if name.endswith(SCRIPT_SUFFIXES))
        if seen > MAX_ENTRIES:
            log.info("workspace scan of %s stopped after %d entries", folder, seen)
            break
    return found


def check_file(path: Path, project: Project, utf8: bool, result_id: str) -> DiskReport | None:
    """Worker thread: the findings of a script file as an open document would show them (without
    the engine compile, which the file gets when it is opened); None when it cannot be read."""
    uri = from_fs_path(str(path)) or path.as_uri()
    try:
        script = read_script_file(path)
    except (OSError, FileRefused):
        return None
    buffer = ScriptDocument(script.text)
    snapshot = Snapshot(uri, DocumentKind.SCRIPT, 0, buffer.index, utf8, project)
    found = [*script.findings(), *findings(snapshot, buffer, compile=False)]
    items = [to_diagnostic(snapshot, finding) for finding in found]
    return DiskReport(uri, result_id, items)


class WorkspaceProblems(LanguageFeature):
    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._reports: dict[str, DiskReport] = {}
        self._pushed: set[str] = set()
        self._workspace_pull = False
        self._scanned = asyncio.Event()
        self._queue: dict[Path, None] = {}
        self._worker: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)

    def initialize(self, params: types.InitializeParams) -> None:
        if self.server.get_feature(Diagnostics).pull:
            self.server.feature(types.WORKSPACE_DIAGNOSTIC)(handler(self._pull))

    def initialized(self) -> None:
        self.server.spawn(self._scan(delay=START_DELAY))

    @property
    def _projects(self) -> Projects:
        return self.server.get_feature(Projects)

    @property
    def _documents(self) -> DocumentTable:
        return self.server.get_feature(DocumentTable)

    # -- finding and checking ---------------------------------------------------------------------
    async def _scan(self, delay: float = 0.0) -> None:
        """Find every script of the workspace folders and check each (start-up, configuration change)."""
        await asyncio.sleep(delay)
        found: list[Path] = []
        for folder in self.server.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                found.extend(await self.server.run_in_thread(candidates, Path(path)))
        scripts = [path for path in found if await self._is_script(path)][:MAX_SCRIPTS]
        gone = set(self._reports) - {from_fs_path(str(path)) for path in scripts}
        for uri in gone:
            self._forget(uri)
        self._enqueue(scripts)
        if self._worker is None:  # nothing to check: the (empty) first scan is complete
            self._scanned.set()

    async def _is_script(self, path: Path) -> bool:
        if classify(str(path), "javascript") is DocumentKind.SCRIPT:
            return True
        project = await self._projects.for_path(str(path))
        return project.is_script(str(path))

    def _enqueue(self, paths: Iterable[Path]) -> None:
        for path in paths:
            self._queue[path] = None
        if self._queue and self._worker is None:
            self._worker = self.server.spawn(self._check_queued())

    async def _check_queued(self) -> None:
        try:
            while self._queue:
                path = next(iter(self._queue))
                del self._queue[path]
                await self._check(path)
        finally:
            self._worker = None
            self._scanned.set()
            if self._queue:  # queued while the last check finished
                self._enqueue(())

    async def _check(self, path: Path) -> None:
        uri = from_fs_path(str(path)) or path.as_uri()
        if not path.is_file() or not await self._is_script(path):
            self._forget(uri)
            return
        project = await self._projects.for_path(str(path))
        report = await self.server.run_in_thread(check_file, path, project, self.server.utf8, str(next(self._ids)))
        if report is None:
            self._forget(uri)
            return
        previous = self._reports.get(uri)
        self._reports[uri] = report
        if previous is None or previous.items != report.items:
            self._changed(report)

    def _forget(self, uri: str) -> None:
        if self._reports.pop(uri, None) is not None:
            self._changed(DiskReport(uri, str(next(self._ids)), []))

    # -- delivery ---------------------------------------------------------------------------------
    def _changed(self, report: DiskReport) -> None:
        if self._documents.get(report.uri) is not None:
            return  # an open document shows its own diagnostics; its file's turn comes when it closes
        if self._workspace_pull:
            self.server.request_refresh(
                "workspace.diagnostics.refresh_support", lambda: self.server.workspace_diagnostic_refresh_async(None)
            )
        elif not self.server.get_feature(Diagnostics).pull:
            self._push(report)
        else:
            self.server.spawn(self._push_unless_pulled(report))

    async def _push_unless_pulled(self, report: DiskReport) -> None:
        """A pull client may pull the workspace itself: give it time to ask before pushing."""
        await asyncio.sleep(PULL_GRACE)
        current = self._reports.get(report.uri, report)
        if not self._workspace_pull and self._documents.get(report.uri) is None and current is report:
            self._push(report)

    def _push(self, report: DiskReport) -> None:
        if report.items:
            self._pushed.add(report.uri)
        elif report.uri not in self._pushed:
            return
        else:
            self._pushed.discard(report.uri)
        self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(report.uri, report.items))

    async def _pull(self, params: types.WorkspaceDiagnosticParams) -> types.WorkspaceDiagnosticReport:
        """Every script's report from disk; open documents are reported by `textDocument/diagnostic`."""
        if not self._workspace_pull:
            self._workspace_pull = True
            for uri in list(self._pushed):  # from now on the client's workspace pull shows them
                self._push(DiskReport(uri, "", []))
        await self._scanned.wait()
        previous = {item.uri: item.value for item in params.previous_result_ids}
        items: list[types.WorkspaceDocumentDiagnosticReport] = []
        for report in self._reports.values():
            if previous.get(report.uri) == report.result_id:
                items.append(types.WorkspaceUnchangedDocumentDiagnosticReport(
                    uri=report.uri, version=None, result_id=report.result_id))
            else:
                items.append(types.WorkspaceFullDocumentDiagnosticReport(
                    uri=report.uri, version=None, items=report.items, result_id=report.result_id))
        for uri in previous.keys() - self._reports.keys():  # deleted scripts: nothing to show any more
            if self._documents.get(uri) is None:
                items.append(types.WorkspaceFullDocumentDiagnosticReport(uri=uri, version=None, items=[]))
        return types.WorkspaceDiagnosticReport(items=items)

    # -- triggers ---------------------------------------------------------------------------------
    def document_closed(self, document: OpenDocument) -> None:
        if document.kind is DocumentKind.SCRIPT and document.path is not None:
            self._reports.pop(document.uri, None)  # report it afresh, even if the file did not change
            if not self.server.get_feature(Diagnostics).pull:
                self._pushed.add(document.uri)  # what the document showed is replaced, by nothing if need be
            self._enqueue([Path(document.path)])

    def workspace_changed(self, paths: list[str] | None) -> None:
        if paths is None:
            self.server.spawn(self._scan())
        else:
            self._enqueue(Path(path) for path in paths if path.endswith(SCRIPT_SUFFIXES))
