"""An agent's details, as `piflow show` and an editor's Show Agent present them: its output (inline
or previewed), its attempts and its latest transcript.

Apart from the run views (`views.py`) because only a detailed view reads them: a run's progress, its
end and `piflow runs` never define these classes (each costs a start-up ~0.5 ms, issue 15).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from piflow.engine.lifecycle import AgentState
from piflow.engine.views import OUTPUT_INLINE_BYTES, AgentView, agent_view
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.store import AgentRecord, AttemptRecord, AttemptSetup, RunStore

PREVIEW_CHARACTERS: Final = 200
_LONGEST_ESCAPE: Final = len("\\uXXXX")


@dataclass(frozen=True, slots=True)
class ErrorView:
    """A failure as a user reads it: its error code and message (as the store kept them)."""

    code: Any
    message: Any


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt of an agent; `error` is None for an attempt that did not fail with one."""

    number: int
    state: AgentState
    tokens: int
    cost_usd: float
    error: ErrorView | None
    transcript_path: str | None
    setup: AttemptSetup | None = None


@dataclass(frozen=True, slots=True)
class OutputView:
    """An agent's output: its preview, and its value when it is inline (`inline`; the value may be
    null) — a larger one is `truncated` and fetched alone (`agent_detail`)."""

    preview: str | None
    value: Any = None
    inline: bool = False
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class AgentDetailView:
    """One agent with its output, attempts and latest transcript."""

    agent: AgentView
    output: OutputView
    attempt_list: list[AttemptView]
    transcript_path: str | None

    @property
    def state(self) -> AgentState:
        return self.agent.state


def output_preview(value: Any) -> str:
    """One line of at most 200 characters: a string output itself, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARACTERS else line[: PREVIEW_CHARACTERS - 1] + "…"


def _prefix_preview(prefix: str) -> str:
    """The preview of an output of which only the first characters of its JSON text were read."""
    if prefix.startswith('"'):
        for cut in range(_LONGEST_ESCAPE):  # the prefix may end inside an escape sequence
            try:
                return output_preview(json.loads(prefix[: len(prefix) - cut] + '"'))
            except ValueError:
                continue
    return output_preview(prefix)[: PREVIEW_CHARACTERS - 1] + "…"


def _output(stored: tuple[str, int] | None, *, full: bool) -> OutputView:
    """An agent's output: inline when small enough or `full`, else only its preview (always when
    only the first characters of its text are at hand)."""
    if stored is None:
        return OutputView(preview=None)
    text, size = stored
    if len(text) < size:
        return OutputView(preview=_prefix_preview(text), truncated=True)
    if full or size <= OUTPUT_INLINE_BYTES:
        value = json.loads(text)
        return OutputView(preview=output_preview(value), value=value, inline=True)
    return OutputView(preview=_prefix_preview(text), truncated=True)


def _attempt_view(attempt: AttemptRecord, agent: AgentRecord, last: bool) -> AttemptView:
    """One attempt; an attempt that ended without a recorded error failed after the backend
    answered (an invalid result) unless it is the last one, which shares its agent's outcome."""
    error = attempt.error
    state: AgentState
    if attempt.ended_at is None:
        state = AgentState.RUNNING
    elif error is not None:
        state = AgentState.CANCELLED if error.get("code") == "CANCELLED" else AgentState.FAILED
    elif not last:
        state = AgentState.FAILED
    elif agent.state in (AgentState.FAILED, AgentState.CANCELLED):
        state, error = agent.state, agent.error
    else:
        state = AgentState.COMPLETED
    return AttemptView(
        number=attempt.attempt,
        state=state,
        tokens=attempt.tokens_input + attempt.tokens_output,
        cost_usd=round(attempt.cost_usd, 10),
        error=None if error is None else ErrorView(error.get("code"), error.get("message")),
        transcript_path=attempt.transcript_path or None,
        setup=attempt.setup,
    )


def agent_detail_view(
    agent: AgentRecord, attempts: list[AttemptRecord], stored: tuple[str, int] | None, *, full: bool
) -> AgentDetailView:
    """One agent with its attempts and its output (`stored`: its JSON text, or the first characters
    of it, and the text's full length); the store's and the Temporal executor's agents alike."""
    return AgentDetailView(
        agent=agent_view(agent),
        output=_output(stored, full=full),
        attempt_list=[_attempt_view(a, agent, a is attempts[-1]) for a in attempts],
        transcript_path=next((a.transcript_path for a in reversed(attempts) if a.transcript_path), None),
    )


def agent_details(store: RunStore, run_id: str, agents: list[AgentRecord]) -> list[AgentDetailView]:
    """The agents of a run with their outputs (previews only beyond 64 KiB) and attempts."""
    attempts = store.run_attempts(run_id)
    stored = store.journal_texts(
        run_id, [a.journal_path for a in agents if a.journal_path], cap=OUTPUT_INLINE_BYTES + 1
    )
    return [
        agent_detail_view(a, attempts.get(a.id, []), stored.get(a.journal_path or ""), full=False) for a in agents
    ]


def agent_detail(store: RunStore, run_id: str, agent_id: str) -> AgentDetailView:
    """One agent of a run with its full output, whatever its size (`piflow.showAgent`)."""
    agent = next((a for a in store.agents(run_id) if a.id == agent_id), None)
    if agent is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow agent: {agent_id} (not an agent of run {run_id})")
    stored = store.journal_texts(run_id, [agent.journal_path] if agent.journal_path else [])
    attempts = store.run_attempts(run_id).get(agent.id, [])
    return agent_detail_view(agent, attempts, stored.get(agent.journal_path or ""), full=True)
