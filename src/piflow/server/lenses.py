"""Code lenses: `▶ Run` on a script, controls for its runs, and answers above an awaiting checkpoint.

Every lens carries a server command (`workspace/executeCommand`), so lenses work in any client
(Neovim sends unknown commands to the server). A script with error findings shows a disabled
`▶ Run (fix N errors first)` that explains instead of launching. Lenses are recomputed when asked;
the server asks the client to ask again (`workspace/codeLens/refresh`, where supported) whenever a
run of an open script changes state or a script's errors appear or go away.
"""

from __future__ import annotations

import re
from typing import Any, Final

from lsprotocol import types

from piflow.engine import events
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.documents import DocumentTable, OpenDocument
from piflow.server.runs import RunEvent, Runs, canonical_path
from piflow.server.snapshot import DocumentKind, Snapshot

ACTIVE: Final = frozenset({"running", "pausing", "awaiting_input"})
RESUMABLE: Final = frozenset({"paused", "interrupted", "budget_exhausted"})
STOPPABLE: Final = ACTIVE | {"paused"}
MAX_RUNS: Final = 3
_LABEL_SUFFIX: Final = re.compile(r"#\d+$")
_REFRESHING_EVENTS: Final = frozenset(
    {events.RUN_STARTED, events.RUN_STATE_CHANGED, events.CHECKPOINT_STATE_CHANGED, events.RUN_RESUMED}
)


def _lens(range_: types.Range, title: str, command: str, argument: dict[str, Any]) -> types.CodeLens:
    return types.CodeLens(range=range_, command=types.Command(title=title, command=command, arguments=[argument]))


def script_lenses(snapshot: Snapshot, top: types.Range) -> list[types.CodeLens]:
    errors = snapshot.errors
    if errors:
        title = f"▶ Run (fix {errors} error{'s' if errors != 1 else ''} first)"
        return [_lens(top, title, "piflow.showErrors", {"uri": snapshot.uri})]
    return [
        _lens(top, "▶ Run", "piflow.run", {"uri": snapshot.uri}),
        _lens(top, "▶ Run with args…", "piflow.runWithArgs", {"uri": snapshot.uri}),
    ]


def run_lenses(runs: list[dict[str, Any]], top: types.Range) -> list[types.CodeLens]:
    shown = [run for run in runs if run["state"] in STOPPABLE | RESUMABLE][:MAX_RUNS]
    lenses = []
    for run in shown:
        run_id, state = run["runId"], run["state"]
        suffix = f" {run_id[:8]}" if len(shown) > 1 else ""
        if state in RESUMABLE:
            lenses.append(_lens(top, f"↻ Resume {run_id[:8]} ({state})", "piflow.resume", {"runId": run_id}))
        if state in ACTIVE - {"pausing"}:
            lenses.append(_lens(top, f"⏸ Pause{suffix}", "piflow.pause", {"runId": run_id}))
        if state in STOPPABLE:
            lenses.append(_lens(top, f"■ Stop{suffix}", "piflow.stop", {"runId": run_id}))
    return lenses


def checkpoint_lenses(snapshot: Snapshot, run_id: str, awaiting: list[dict[str, Any]],
                      top: types.Range, several: bool) -> list[types.CodeLens]:
    """Approve/Reject above the `checkpoint(...)` call a label belongs to (or the top, if unknown)."""
    lenses = []
    for checkpoint in awaiting:
        label = checkpoint["name"]
        name = _LABEL_SUFFIX.sub("", label)
        call = next((c for c in snapshot.calls or () if c.kind == "checkpoint" and c.name == name), None)
        where = snapshot.call_range(call) if call is not None else top
        where = types.Range(where.start, where.start)
        shown = f" {label}" if several or label != name or call is None else ""
        suffix = f" ({run_id[:8]})" if several else ""
        argument = {"runId": run_id, "name": label}
        lenses.append(_lens(where, f"✓ Approve{shown}{suffix}", "piflow.respond", {**argument, "approved": True}))
        lenses.append(_lens(where, f"✗ Reject{shown}{suffix}", "piflow.respond", {**argument, "approved": False}))
    return lenses


class Lenses(LanguageFeature):
    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._errors: dict[str, int] = {}

    def register(self) -> None:
        self.server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))(
            handler(self._lenses)
        )

    async def _lenses(self, params: types.CodeLensParams) -> list[types.CodeLens] | None:
        uri = params.text_document.uri
        snapshot = await self.server.get_feature(DocumentTable).current(uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        self._errors[uri] = snapshot.errors
        top = snapshot.range(0, 0)
        lenses = script_lenses(snapshot, top)
        path = canonical_path(uri)
        runs_feature = self.server.get_feature(Runs)
        host = await runs_feature.host_for(snapshot.project.root)
        runs = await runs_feature.summaries(path, STOPPABLE | RESUMABLE)
        lenses += run_lenses(runs, top)
        waiting = [run for run in runs if run["state"] == "awaiting_input"][:MAX_RUNS]
        for run in waiting:
            view = await runs_feature.view(host, run["runId"])
            awaiting = [c for c in view.get("checkpoints") or [] if c.get("state") == "awaiting"]
            lenses += checkpoint_lenses(snapshot, run["runId"], awaiting, top, len(waiting) > 1)
        return lenses

    # -- refreshing ---------------------------------------------------------------------------
    def run_event(self, event: RunEvent) -> None:
        if event.type in _REFRESHING_EVENTS:
            self._request_refresh()

    def snapshot_ready(self, document: OpenDocument) -> None:
        snapshot = document.snapshot
        if snapshot is None or document.uri not in self._errors:
            return
        if (self._errors[document.uri] > 0) != (snapshot.errors > 0):
            self._request_refresh()

    def document_closed(self, document: OpenDocument) -> None:
        self._errors.pop(document.uri, None)

    def _request_refresh(self) -> None:
        self.server.request_refresh(
            "workspace.code_lens.refresh_support", lambda: self.server.workspace_code_lens_refresh_async(None)
        )
