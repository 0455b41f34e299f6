"""Inlay hints: what a model alias (or bare model id) resolves to, and after a run, how each agent
call went — its last state, tokens and cost — at the end of the call (see `outcomes` for how a
run's agents are matched to the calls of the document).

A pi-subagents child is found by its workflow key instead: the hint goes after the `runs.run`
call, `runs.all` item or lanes stage whose key makes it (`subagents_context.key_sites`), so it
stays at its call however the script was edited since the run.
"""

from __future__ import annotations

from lsprotocol import types

from piflow.engine import events
from piflow.engine.lifecycle import AGENT_SETTLED
from piflow.errors import WorkflowError
from piflow.server.base import LanguageFeature, handler
from piflow.server.context import model_values
from piflow.server.documents import DocumentTable
from piflow.server.outcomes import CallResult, Outcomes, RunOutcome
from piflow.server.runs import RunEvent
from piflow.server.snapshot import DocumentKind, Snapshot
from piflow.server.subagents_context import key_sites


def run_hints(snapshot: Snapshot, outcome: RunOutcome) -> list[types.InlayHint]:
    """A hint at the end of each of the document's agent calls that the run started agents from."""
    hints = []
    for span, result in outcome.at_calls(snapshot):
        _, end = snapshot.body_span(*span)
        hints.append(types.InlayHint(
            position=snapshot.position(end), label=result.label(), padding_left=True,
            tooltip=f"Run {outcome.run_id[:8]}",
        ))
    return hints


def child_hints(snapshot: Snapshot, outcome: RunOutcome) -> list[types.InlayHint]:
    """A hint after each launch of children (by key) that the run ran children from."""
    if not outcome.children:
        return []
    hints = []
    for site in key_sites(snapshot):
        result = CallResult()
        for key, child in outcome.children.items():
            if site.pattern.fullmatch(key):
                result.merge(child)
        if result.states:
            hints.append(types.InlayHint(
                position=snapshot.position(site.end), label=result.label(), padding_left=True,
                tooltip=f"Run {outcome.run_id[:8]}",
            ))
    return hints


def alias_hints(snapshot: Snapshot) -> list[types.InlayHint]:
    """`→ provider/model` after every model string that is an alias or a bare id."""
    hints = []
    for target in model_values(snapshot):
        if "/" in target.value and target.value not in snapshot.project.capabilities.model_aliases:
            continue
        info = snapshot.project.resolve_model(target.value)
        if info.resolved is None:
            continue
        warning = "" if info.available or not info.verified else " (unavailable)"
        hints.append(types.InlayHint(
            position=snapshot.position(target.end), label=f"→ {info.resolved}{warning}",
            kind=types.InlayHintKind.Type, padding_left=True,
        ))
    return hints


class InlayHints(LanguageFeature):
    def register(self) -> None:
        self.server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))(
            handler(self._hints)
        )

    async def _hints(self, params: types.InlayHintParams) -> list[types.InlayHint] | None:
        snapshot = await self.server.get_feature(DocumentTable).current(params.text_document.uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        hints = await self.server.run_in_thread(alias_hints, snapshot)
        hints += await self._run_hints(snapshot)
        start, end = params.range.start, params.range.end
        return [hint for hint in hints if (start.line, start.character) <= (hint.position.line, hint.position.character)
                <= (end.line, end.character)]

    async def _run_hints(self, snapshot: Snapshot) -> list[types.InlayHint]:
        try:
            outcome = await self.server.get_feature(Outcomes).latest(snapshot.uri, snapshot.project.root,
                                                                     with_agents=True)
        except WorkflowError:  # the run cannot be read now (a Temporal cluster that does not answer)
            return []
        if outcome is None:
            return []
        return run_hints(snapshot, outcome) + await self.server.run_in_thread(child_hints, snapshot, outcome)

    def run_event(self, event: RunEvent) -> None:
        settled = event.type == events.AGENT_STATE_CHANGED and event.payload.get("state") in AGENT_SETTLED
        if settled or event.type == events.RUN_STATE_CHANGED:
            self.server.request_refresh(
                "workspace.inlay_hint.refresh_support", lambda: self.server.workspace_inlay_hint_refresh_async(None)
            )
