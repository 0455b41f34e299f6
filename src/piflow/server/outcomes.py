"""How a script's latest run went, call by call: what run inlay hints and failed-agent diagnostics show.

Agent records name their call site in their journal path (the engine reads it: `call_site_of`,
UTF-16 offsets into the launched body). When the document still holds the launched text, a call
site maps straight to its call; after edits, the n-th agent call of the launched script is taken
to be the n-th agent call of the document, as long as both have the same number of them.

A run launched from the editor launched the open document's text: its calls are the ones the
document's snapshot already found, so the launched script is analysed again only when it differs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from piflow.analysis.document import ScriptDocument
from piflow.analysis.inspect import inspect_document
from piflow.engine.journal import call_site_of, workflow_key_of
from piflow.engine.lifecycle import AgentState
from piflow.engine.views import AgentView
from piflow.server.base import LanguageFeature, PiflowServer
from piflow.server.context import AGENT_CALLS
from piflow.server.documents import DocumentTable
from piflow.server.runs import Runs, canonical_path
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

    def add(self, agent: AgentView) -> None:
        """Count one agent of the run in."""
        self.states[agent.state] += 1
        self.tokens += agent.tokens
        self.cost += agent.cost_usd
        error = agent.error
        if agent.state == AgentState.FAILED and isinstance(error, dict):
            key = (str(error.get("code") or "AGENT_FAILED"), str(error.get("message") or ""))
            self.errors[key] = self.errors.get(key, 0) + 1

    def merge(self, other: CallResult) -> None:
        """Count the agents of `other` in (a call that launched several children)."""
        self.states.update(other.states)
        self.tokens += other.tokens
        self.cost += other.cost
        for key, count in other.errors.items():
            self.errors[key] = self.errors.get(key, 0) + count

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


def call_results(agents: list[AgentView]) -> dict[Span, CallResult]:
    results: dict[Span, CallResult] = {}
    for agent in agents:
        site = call_site_of(agent.journal_path or "")
        if site is not None:
            results.setdefault(site, CallResult()).add(agent)
    return results


def child_results(agents: list[AgentView]) -> dict[str, CallResult]:
    """A pi-subagents run's children by workflow key (the editor finds their calls by key)."""
    results: dict[str, CallResult] = {}
    for agent in agents:
        key = workflow_key_of(agent.journal_path or "")
        if key is not None:
            results.setdefault(key, CallResult()).add(agent)
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
    children: dict[str, CallResult] = field(default_factory=dict)
    """pi-subagents children by workflow key."""

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


def launched_spans(script: str) -> list[Span]:
    """Worker thread: the agent calls of a launched text no open document holds."""
    return agent_spans(inspect_document(ScriptDocument(script)))


def launched_calls(script: str, snapshot: Snapshot | None) -> list[Span] | None:
    """The agent calls of a launched text taken from a document snapshot that holds that very text
    and has found its calls (a run launched from the editor); None when it must be analysed."""
    if snapshot is not None and snapshot.calls is not None and snapshot.text == script:
        return agent_spans(snapshot.calls)
    return None


class Outcomes(LanguageFeature):
    """Reads run outcomes from the project's run store (worker threads); a run's launched text is read once."""

    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._launched: dict[str, tuple[str, list[Span]]] = {}

    async def latest(
        self, uri: str, root: Path, *, with_agents: bool, failures_only: bool = False
    ) -> RunOutcome | None:
        """The newest run of the script at `uri` in project `root` (`with_agents`: the newest that
        started agents), if any; with `failures_only`, its results hold only the failed agents."""
        runs = self.server.get_feature(Runs)
        path = canonical_path(uri)
        if path is None:
            return None
        host = await runs.host_for(root)
        run_id = await (runs.latest_with_agents(host, path) if with_agents else runs.latest(host, path))
        if run_id is None:
            return None
        state, agents = await runs.agents_of(host, run_id, failed_only=failures_only)
        if run_id not in self._launched:  # a run's launched text never changes
            script = await runs.launched_script(host, run_id)
            self._launched[run_id] = script, await self._agent_calls(uri, script)
        script, spans = self._launched[run_id]
        return RunOutcome(run_id, state, call_results(agents), script, spans, child_results(agents))

    async def _agent_calls(self, uri: str, script: str) -> list[Span]:
        """The agent calls of a launched text: the open document's when it holds that text, else found anew."""
        document = self.server.get_feature(DocumentTable).get(uri)
        spans = launched_calls(script, document.snapshot if document is not None else None)
        return spans if spans is not None else await self.server.run_in_thread(launched_spans, script)
