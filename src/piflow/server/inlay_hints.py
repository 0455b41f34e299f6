"""Inlay hints: what a model alias (or bare model id) resolves to, and after a run, how each agent
call went — its last state, tokens and cost — at the end of the call.

Agent records name their call site in their journal path (`agent/.../callsite%3A<start>%3A<end>/...`,
UTF-16 offsets into the launched body). When the document still holds the launched text, a call
site maps straight to its call; after edits, the n-th agent call of the launched script is taken
to be the n-th agent call of the document, as long as both have the same number of them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from lsprotocol import types

from piflow.analysis.document import ScriptDocument
from piflow.analysis.inspect import inspect_document
from piflow.engine import events
from piflow.engine.lifecycle import AGENT_SETTLED
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.context import AGENT_CALLS, model_values
from piflow.server.documents import DocumentTable
from piflow.server.runs import Host, RunEvent, Runs, canonical_path
from piflow.server.snapshot import DocumentKind, Snapshot

CALL_SITE: Final = re.compile(r"(?:^|/)callsite%3A(\d+)%3A(\d+)(?:/|$)")
ICONS: Final = {"completed": "✓", "failed": "✗", "cancelled": "✗", "running": "◇", "retrying": "◇"}
Span = tuple[int, int]


@dataclass
class CallResult:
    """The agents one call site started in a run (several in loops and parallel branches)."""

    states: Counter[str] = field(default_factory=Counter)
    tokens: int = 0
    cost: float = 0.0

    def label(self) -> str:
        count = sum(self.states.values())
        if count == 1:
            state = next(iter(self.states))
            parts = [f"{ICONS.get(state, '○')} {state}"]
        else:
            parts = [f"×{count}: " + ", ".join(f"{n} {state}" for state, n in self.states.most_common())]
        if self.tokens:
            parts.append(f"{_compact(self.tokens)} tok")
        if self.cost:
            parts.append(f"${self.cost:.4f}")
        return " · ".join(parts)


def _compact(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def call_results(agents: list[dict[str, Any]]) -> dict[Span, CallResult]:
    results: dict[Span, CallResult] = {}
    for agent in agents:
        match = CALL_SITE.search(agent.get("journalPath") or "")
        if match is None:
            continue
        result = results.setdefault((int(match.group(1)), int(match.group(2))), CallResult())
        result.states[agent["state"]] += 1
        result.tokens += int(agent.get("tokens") or 0)
        result.cost += float(agent.get("costUsd") or 0)
    return results


def agent_spans(calls: Any) -> list[Span]:
    return [(call.start, call.end) for call in calls if call.kind in AGENT_CALLS]


def run_hints(snapshot: Snapshot, results: dict[Span, CallResult], launched: list[Span] | None,
              run_id: str) -> list[types.InlayHint]:
    """Hints at the calls of the document; `launched` is None when the document is the launched text."""
    current = agent_spans(snapshot.calls or ())
    if launched is not None:
        if len(launched) != len(current):
            return []
        mapping = dict(zip(launched, current, strict=True))
    else:
        mapping = {span: span for span in current}
    hints = []
    for site, result in results.items():
        span = mapping.get(site)
        if span is None:
            continue
        _, end = snapshot.body_span(*span)
        hints.append(types.InlayHint(
            position=snapshot.position(end), label=result.label(), padding_left=True,
            tooltip=f"Run {run_id[:8]}",
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


def _launched(host: Host, run_id: str) -> tuple[str, list[Span]]:
    """Worker thread: the text a run launched and the spans of its agent calls."""
    reader = host.open_reader()
    assert reader is not None
    script = reader.run_script(run_id)
    return script, agent_spans(inspect_document(ScriptDocument(script)))


class InlayHints(LanguageFeature):
    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._launched: dict[str, tuple[str, list[Span]]] = {}

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
        runs = self.server.get_feature(Runs)
        path = canonical_path(snapshot.uri)
        host = await runs.host_for(snapshot.project.root)
        run_id = await runs.latest_with_agents(host, path) if path else None
        if run_id is None:
            return []
        view = await runs.view(host, run_id)
        results = call_results(view.get("agentList") or [])
        if run_id not in self._launched:  # a run's launched text never changes
            self._launched[run_id] = await self.server.run_in_thread(_launched, host, run_id)
        script, spans = self._launched[run_id]
        return run_hints(snapshot, results, None if script == snapshot.text else spans, run_id)

    def run_event(self, event: RunEvent) -> None:
        settled = event.type == events.AGENT_STATE_CHANGED and event.payload.get("state") in AGENT_SETTLED
        if settled or event.type == events.RUN_STATE_CHANGED:
            self.server.request_refresh(
                "workspace.inlay_hint.refresh_support", lambda: self.server.workspace_inlay_hint_refresh_async(None)
            )
