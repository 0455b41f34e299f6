"""How a script's latest run went, call by call: what run inlay hints and failed-agent diagnostics show.

Agent records name their call site in their journal path (the engine reads it: `call_site_of`,
UTF-16 offsets into the launched body). When the document still holds the launched text, a call
site maps straight to its call; after edits, the n-th agent call of the launched script is taken
to be the n-th agent call of the document, as long as both have the same number of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from piflow.analysis.document import ScriptDocument
from piflow.analysis.inspect import inspect_document
from piflow.engine.journal import call_site_of
from piflow.server.base import LanguageFeature, PiflowServer
from piflow.server.context import AGENT_CALLS
from piflow.server.runs import Host, Runs, canonical_path
from piflow.server.snapshot import Snapshot

ICONS: Final = {"completed": "✓", "failed": "✗", "cancelled": "✗", "running": "◇", "retrying": "◇"}
Span = tuple[int, int]
"""A call's span in UTF-16 body offsets (inspect records, journal call sites)."""


@dataclass
class CallResult:
    """The agents one call site started in a run (several in loops and parallel branches)."""

    states: Counter[str] = field(default_factory=Counter)
    tokens: int = 0
    cost: float = 0.0
    errors: dict[tuple[str, str], int] = field(default_factory=dict)
    """`(code, message)` of each distinct error of the call's failed agents, with how many failed so."""

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
        site = call_site_of(agent.get("journalPath") or "")
        if site is None:
            continue
        result = results.setdefault(site, CallResult())
        result.states[agent["state"]] += 1
        result.tokens += int(agent.get("tokens") or 0)
        result.cost += float(agent.get("costUsd") or 0)
        error = agent.get("error")
        if agent["state"] == "failed" and isinstance(error, dict):
            key = (str(error.get("code") or "AGENT_FAILED"), str(error.get("message") or ""))
            result.errors[key] = result.errors.get(key, 0) + 1
    return results


def agent_spans(calls: Any) -> list[Span]:
    return [(call.start, call.end) for call in calls if call.kind in AGENT_CALLS]


@dataclass(frozen=True)
class RunOutcome:
    """One run of a script: its state and what each of its agent call sites did."""

    run_id: str
    state: str
    results: dict[Span, CallResult]
    script: str
    """The text the run launched."""
    launched: list[Span]
    """The agent calls of the launched text, in order."""

    @property
    def failed(self) -> bool:
        return any(result.errors for result in self.results.values())

    def at_calls(self, snapshot: Snapshot) -> list[tuple[Span, CallResult]]:
        """The results at the document's own agent calls (none when the calls no longer line up)."""
        current = agent_spans(snapshot.calls or ())
        if self.script == snapshot.text:
            mapping = {span: span for span in current}
        elif len(self.launched) == len(current):
            mapping = dict(zip(self.launched, current, strict=True))
        else:
            return []
        return [(mapping[site], result) for site, result in self.results.items() if site in mapping]


def _launched(host: Host, run_id: str) -> tuple[str, list[Span]]:
    """Worker thread: the text a run launched and the spans of its agent calls."""
    reader = host.open_reader()
    assert reader is not None
    script = reader.run_script(run_id)
    return script, agent_spans(inspect_document(ScriptDocument(script)))


class Outcomes(LanguageFeature):
    """Reads run outcomes from the project's run store (worker threads); a run's launched text is read once."""

    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._launched: dict[str, tuple[str, list[Span]]] = {}

    async def latest(self, uri: str, root: Path, *, with_agents: bool) -> RunOutcome | None:
        """The newest run of the script at `uri` in project `root` (`with_agents`: the newest that
        started agents), if any."""
        runs = self.server.get_feature(Runs)
        path = canonical_path(uri)
        if path is None:
            return None
        host = await runs.host_for(root)
        run_id = await (runs.latest_with_agents(host, path) if with_agents else runs.latest(host, path))
        if run_id is None:
            return None
        view = await runs.view(host, run_id)
        if run_id not in self._launched:  # a run's launched text never changes
            self._launched[run_id] = await self.server.run_in_thread(_launched, host, run_id)
        script, spans = self._launched[run_id]
        return RunOutcome(run_id, str(view["state"]), call_results(view.get("agentList") or []), script, spans)
