"""Diagnostics: every finding of a snapshot, pushed or pulled according to the client's capabilities.

Clients that can pull (`textDocument/diagnostic`) and be asked to pull again (VS Code, Neovim 0.12)
ask when they want;
the answer waits for the snapshot of the version they have, and its result id (version, config
generation, compile) lets them skip unchanged reports. When a newer verdict appears that nobody
pulled — the engine compile after a save, a configuration change — the server asks them to pull
again (`workspace/diagnostic/refresh`). Other clients get `textDocument/publishDiagnostics` for
every fresh snapshot; a stale one (older than the document) is never published.
"""

from __future__ import annotations

from typing import Final

from lsprotocol import types

from piflow.analysis.findings import Finding
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.documents import DocumentTable, OpenDocument
from piflow.server.snapshot import DocumentKind, Snapshot

SOURCE: Final = "piflow"
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
    )


def result_id(snapshot: Snapshot) -> str:
    """Changes whenever the report could: a new version, a reloaded configuration, a compile."""
    return f"{snapshot.version}.{snapshot.project.generation}.{int(snapshot.compiled)}"


class Diagnostics(LanguageFeature):
    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self.pull = False
        self._pulled: dict[str, str] = {}
        self._published: dict[str, tuple[int, tuple[Finding, ...]]] = {}
        self._in_flight: dict[str, int] = {}

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
            shown = (snapshot.version, snapshot.findings)
            if self._published.get(document.uri) != shown:  # the compile usually confirms the quick check
                self._published[document.uri] = shown
                self._publish(snapshot)
        elif (
            not self._in_flight.get(document.uri)
            and document.uri in self._pulled
            and self._pulled[document.uri] != result_id(snapshot)
        ):
            self.server.request_refresh(
                "workspace.diagnostics.refresh_support", lambda: self.server.workspace_diagnostic_refresh_async(None)
            )

    def _publish(self, snapshot: Snapshot) -> None:
        with_version = self.server.client_supports("text_document.publish_diagnostics.version_support")
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=snapshot.uri,
                diagnostics=[to_diagnostic(snapshot, finding) for finding in snapshot.findings],
                version=snapshot.version if with_version else None,
            )
        )

    def document_closed(self, document: OpenDocument) -> None:
        self._pulled.pop(document.uri, None)
        self._published.pop(document.uri, None)
        if not self.pull and document.kind is not DocumentKind.OTHER:
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(document.uri, []))

    # -- pull ---------------------------------------------------------------------------------
    async def _pull(self, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        uri = params.text_document.uri
        self._in_flight[uri] = self._in_flight.get(uri, 0) + 1
        try:
            snapshot = await self._documents.current(uri, calls=False)
        finally:
            self._in_flight[uri] -= 1
        if snapshot is None or snapshot.kind is DocumentKind.OTHER:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        identifier = result_id(snapshot)
        self._pulled[uri] = identifier
        if params.previous_result_id == identifier:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=identifier)
        return types.RelatedFullDocumentDiagnosticReport(
            items=[to_diagnostic(snapshot, finding) for finding in snapshot.findings], result_id=identifier
        )
