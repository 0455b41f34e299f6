"""Diagnostics: every finding of a snapshot, pushed or pulled according to the client's capabilities.

Clients that can pull (`textDocument/diagnostic`) and be asked to pull again (VS Code, Neovim 0.12)
ask when they want;
the answer waits for the snapshot of the version they have, and its result id (version, config
generation, compile) lets them skip unchanged reports. When a newer verdict appears that nobody
pulled — the engine compile after a save, a configuration change — the server asks them to pull
again (`workspace/diagnostic/refresh`). Other clients get `textDocument/publishDiagnostics` for
every fresh snapshot; a stale one (older than the document) is never published.

Beside the findings, a script shows why the agents of its latest run failed: each failed agent's
error on its call (source `piflow run`), until a new run of the script starts.
"""

from __future__ import annotations

import asyncio
from typing import Final

from lsprotocol import types

from piflow.analysis.findings import Finding
from piflow.engine import events
from piflow.errors import WorkflowError
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.documents import DocumentTable, OpenDocument
from piflow.server.outcomes import Outcomes, RunOutcome
from piflow.server.runs import RunEvent
from piflow.server.snapshot import DocumentKind, Snapshot

SOURCE: Final = "piflow"
RUN_SOURCE: Final = "piflow run"
RUN_FOLLOW_DELAY: Final = 0.2
"""Seconds to gather a burst of run events before the open scripts' latest runs are read again."""
_RUN_EVENTS: Final = frozenset({events.RUN_STARTED, events.RUN_RESUMED, events.RUN_STATE_CHANGED})
SEVERITIES: Final = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def to_diagnostic(snapshot: Snapshot, finding: Finding) -> types.Diagnostic:
    related = [
        types.DiagnosticRelatedInformation(types.Location(snapshot.uri, snapshot.lsp_range(item.range)), item.message)
        for item in finding.related or ()
    ]
    return types.Diagnostic(
        range=snapshot.lsp_range(finding.range),
        message=finding.message,
        severity=SEVERITIES.get(finding.severity, types.DiagnosticSeverity.Error),
        code=finding.code,
        source=SOURCE,
        related_information=related or None,
        data=None if finding.rule is None else {"rule": finding.rule},
    )


def run_diagnostics(snapshot: Snapshot, outcome: RunOutcome) -> list[types.Diagnostic]:
    """The errors of a run's failed agents on their calls: errors if the run failed, else warnings
    (the script caught them)."""
    severity = types.DiagnosticSeverity.Error if outcome.state == "failed" else types.DiagnosticSeverity.Warning
    return [
        types.Diagnostic(range=snapshot.range(*snapshot.body_span(*span)), message=message, severity=severity,
                         code=code, source=RUN_SOURCE)
        for span, result in outcome.at_calls(snapshot)
        for code, message in result.errors
    ]


def _shown(items: list[types.Diagnostic]) -> tuple[tuple[int, int, int, int, str], ...]:
    return tuple((d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character, d.message)
                 for d in items)


def _outcome_key(outcome: RunOutcome | None) -> object:
    if outcome is None:
        return None
    errors = tuple((span, tuple(result.errors)) for span, result in outcome.results.items())
    return outcome.run_id, outcome.state, errors


class Diagnostics(LanguageFeature):
    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self.pull = False
        self._pulled: dict[str, str] = {}
        self._published: dict[str, tuple[int, tuple[Finding, ...], object]] = {}
        self._in_flight: dict[str, int] = {}
        self._failed_runs: dict[str, RunOutcome] = {}
        """Open scripts whose latest run has failed agents."""
        self._run_generations: dict[str, int] = {}
        self._run_items: dict[str, list[types.Diagnostic]] = {}
        """The run diagnostics last placed on a described version (kept while typing until the next)."""
        self._follow_timer: asyncio.TimerHandle | None = None

    def result_id(self, snapshot: Snapshot) -> str:
        """Changes whenever the report could: a new version, a reloaded configuration, a compile, a run."""
        run = self._run_generations.get(snapshot.uri, 0)
        return f"{snapshot.version}.{snapshot.project.generation}.{int(snapshot.compiled)}.{run}"

    def items(self, snapshot: Snapshot) -> list[types.Diagnostic]:
        """Everything the document shows: its findings, then its latest run's failed agents."""
        findings = [to_diagnostic(snapshot, finding) for finding in snapshot.findings]
        outcome = self._failed_runs.get(snapshot.uri)
        if outcome is None:
            return findings
        if snapshot.described:
            self._run_items[snapshot.uri] = run_diagnostics(snapshot, outcome)
        return findings + self._run_items.get(snapshot.uri, [])

    def initialize(self, params: types.InitializeParams) -> None:
        # Pull only where the server can ask for a re-pull: a compile verdict arrives unasked.
        self.pull = self.server.client_supports("text_document.diagnostic") and self.server.client_supports(
            "workspace.diagnostics.refresh_support"
        )
        if self.pull:
            options = types.DiagnosticOptions(inter_file_dependencies=False, workspace_diagnostics=False,
                                              identifier=SOURCE)
            self.server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, options)(handler(self._pull))

    @property
    def _documents(self) -> DocumentTable:
        return self.server.get_feature(DocumentTable)

    # -- push ---------------------------------------------------------------------------------
    def findings_ready(self, document: OpenDocument) -> None:
        snapshot = document.snapshot
        if snapshot is None or document.kind is DocumentKind.OTHER:
            return
        if not self.pull:
            self._publish(snapshot)
        elif (
            not self._in_flight.get(document.uri)
            and document.uri in self._pulled
            and self._pulled[document.uri] != self.result_id(snapshot)
        ):
            self._ask_to_pull()

    def snapshot_ready(self, document: OpenDocument) -> None:
        """A described version places the run's failures on the calls where they now are."""
        if document.uri in self._failed_runs and document.snapshot is not None and not self.pull:
            self._publish(document.snapshot)

    def _ask_to_pull(self) -> None:
        self.server.request_refresh(
            "workspace.diagnostics.refresh_support", lambda: self.server.workspace_diagnostic_refresh_async(None)
        )

    def _publish(self, snapshot: Snapshot) -> None:
        items = self.items(snapshot)
        shown = (snapshot.version, snapshot.findings, _shown(items[len(snapshot.findings):]))
        if self._published.get(snapshot.uri) == shown:  # the compile usually confirms the quick check
            return
        self._published[snapshot.uri] = shown
        with_version = self.server.client_supports("text_document.publish_diagnostics.version_support")
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=snapshot.uri, diagnostics=items, version=snapshot.version if with_version else None
            )
        )

    def document_closed(self, document: OpenDocument) -> None:
        for table in (self._pulled, self._published, self._failed_runs, self._run_generations, self._run_items):
            table.pop(document.uri, None)
        # A closed script keeps the problems of its file on disk (see `workspace_problems`).
        if not self.pull and document.kind not in (DocumentKind.OTHER, DocumentKind.SCRIPT):
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(document.uri, []))

    # -- failed agents of the latest run ---------------------------------------------------------
    def document_opened(self, document: OpenDocument) -> None:
        if document.kind is DocumentKind.SCRIPT:
            self.server.spawn(self._follow_run(document))

    def run_event(self, event: RunEvent) -> None:
        failed = event.type == events.AGENT_STATE_CHANGED and event.payload.get("state") == "failed"
        if (failed or event.type in _RUN_EVENTS) and self._follow_timer is None:
            self._follow_timer = asyncio.get_running_loop().call_later(RUN_FOLLOW_DELAY, self._follow_runs)

    def _follow_runs(self) -> None:
        self._follow_timer = None
        for document in self._documents:
            if document.kind is DocumentKind.SCRIPT:
                self.server.spawn(self._follow_run(document))

    async def _follow_run(self, document: OpenDocument) -> None:
        """Read the script's latest run; show its failed agents, or stop showing the previous run's."""
        try:
            outcome = await self.server.get_feature(Outcomes).latest(
                document.uri, document.root, with_agents=False, failures_only=True
            )
        except WorkflowError:
            return  # no run store for this project: nothing ran
        failed = outcome if outcome is not None and outcome.failed else None
        if document.closed or _outcome_key(failed) == _outcome_key(self._failed_runs.get(document.uri)):
            return
        if failed is None:
            self._failed_runs.pop(document.uri, None)
            self._run_items.pop(document.uri, None)
        else:
            self._failed_runs[document.uri] = failed
        self._run_generations[document.uri] = self._run_generations.get(document.uri, 0) + 1
        if self.pull:
            if document.uri in self._pulled:
                self._ask_to_pull()
            return
        snapshot = await self._documents.current(document.uri, calls=failed is not None)
        if snapshot is not None:
            self._publish(snapshot)

    # -- pull ---------------------------------------------------------------------------------
    async def _pull(self, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        uri = params.text_document.uri
        self._in_flight[uri] = self._in_flight.get(uri, 0) + 1
        try:
            snapshot = await self._documents.current(uri, calls=uri in self._failed_runs)
        finally:
            self._in_flight[uri] -= 1
        if snapshot is None or snapshot.kind is DocumentKind.OTHER:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        identifier = self.result_id(snapshot)
        self._pulled[uri] = identifier
        if params.previous_result_id == identifier:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=identifier)
        return types.RelatedFullDocumentDiagnosticReport(items=self.items(snapshot), result_id=identifier)
