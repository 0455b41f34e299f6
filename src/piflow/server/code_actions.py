"""Code actions: the quick fixes analysis attaches to its findings (did-you-mean for unknown models,
aliases, roles and tools; removing `model`/`thinking`/`tools` beside `role`)."""

from __future__ import annotations

from lsprotocol import types

from piflow.server.base import LanguageFeature, handler
from piflow.server.diagnostics import to_diagnostic
from piflow.server.documents import DocumentTable
from piflow.server.snapshot import DocumentKind, Snapshot


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (
        b.start.line,
        b.start.character,
    ) <= (a.end.line, a.end.character)


def quick_fixes(snapshot: Snapshot, requested: types.Range) -> list[types.CodeAction]:
    actions = []
    for finding in snapshot.findings:
        if not finding.fix or not _overlaps(snapshot.lsp_range(finding.range), requested):
            continue
        diagnostic = to_diagnostic(snapshot, finding)
        for position, fix in enumerate(finding.fix):
            edits = [types.TextEdit(snapshot.lsp_range(edit.range), edit.new_text) for edit in fix.edits]
            actions.append(
                types.CodeAction(
                    title=fix.title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=position == 0,
                    edit=types.WorkspaceEdit(changes={snapshot.uri: edits}),
                )
            )
    return actions


class CodeActions(LanguageFeature):
    def register(self) -> None:
        options = types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix])
        self.server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)(handler(self._actions))

    async def _actions(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        if params.context.only and types.CodeActionKind.QuickFix not in params.context.only:
            return None
        snapshot = await self.server.get_feature(DocumentTable).current(params.text_document.uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        return quick_fixes(snapshot, params.range) or None
