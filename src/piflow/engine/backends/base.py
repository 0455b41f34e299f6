"""The agent backend interface: run one attempt of one agent, reporting accounting as it goes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from piflow.config.model_refs import ModelRef
from piflow.config.resources import ResourcePolicy

if TYPE_CHECKING:
    from piflow.engine.tools.registry import ChildAgents


@dataclass(frozen=True)
class Usage:
    """Token and cost deltas of one model turn (cache tokens are not budgeted)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input + self.output


@dataclass(frozen=True)
class AttemptRequest:
    """Everything a backend needs to run one attempt (spec J.3)."""

    run_id: str
    agent_id: str
    attempt: int
    workflow_name: str
    label: str
    task: str
    prompt: str
    model: ModelRef
    thinking: str | None
    tools: tuple[str, ...]
    cwd: str
    role: str | None = None
    system_append: str | None = None
    output_schema: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    conversation: str | None = None
    """The conversation id when this attempt is a conversation turn (continues its session)."""
    turn: int = 0
    """The turn number (1 for a conversation's first) when `conversation` is set."""
    children: ChildAgents | None = None
    """The attempt's direct children (spec J.5), when its tools include `agent`."""
    parent_id: str | None = None
    """The parent agent's id, when this attempt is a child's."""
    resources: ResourcePolicy = field(default_factory=ResourcePolicy)
    """Skills and extensions the session must not load (`disabledAgentResources`, spec D)."""


class AttemptControl(Protocol):
    """What the engine offers a running attempt: budget gates, accounting, progress."""

    def before_turn(self) -> None:
        """Raise BUDGET_EXHAUSTED when the run may not start another model turn."""

    def after_turn(self, usage: Usage, final: bool) -> str | None:
        """Record a turn's usage; raise BUDGET_EXHAUSTED after an over-budget non-final turn.

        Returns a steering message (the soft-limit instruction) to send before the next turn.
        """

    def activity(self, text: str | None) -> None:
        """Show what the agent is doing (`reasoning`, `responding`, a tool name)."""

    def tool_call(self, name: str) -> None:
        """Count one tool call before it runs; raise AGENT_FAILED when it would pass the agent's
        hard tool budget (a pi-subagents child's `toolBudget.hard`)."""

    def validate_result(self, value: Any) -> bool:
        """True when `value` satisfies the agent's output schema."""

    def transcript(self, path: str, session_id: str | None = None) -> None:
        """Record where this attempt's native transcript lives."""

    def conversation_state(self) -> dict[str, Any] | None:
        """What the backend saved after this conversation's previous turn, from the run store.

        None on a first turn, and when a later turn finds nothing saved (the run then gets a
        warning saying so; the backend fails the turn rather than silently start over).
        """

    def save_conversation_state(self, state: dict[str, Any]) -> None:
        """Keep `state` as the conversation's head; it is stored with this turn's journaled result."""

    def system_prompt(self, text: str) -> None:
        """Record the system prompt the session really runs with (what the backend adds included),
        so the attempt's set-up shows it."""


class ProviderRateLimited(Exception):
    """The provider asked us to slow down: the run pauses and the same attempt is retried."""


class AgentBackend(Protocol):
    name: str

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        """Run the attempt to its final value (text, or the schema value when one is required).

        Raise WorkflowError for failures with a spec code (AGENT_FAILED, RESULT_INVALID, ...),
        ProviderRateLimited for rate limits. Cancellation arrives as anyio cancellation.
        """
        ...


class SteerableBackend(Protocol):
    """A backend that can deliver a message to a running attempt (pi-subagents `runs.steer`).

    Optional: the engine looks for `steer` on the run's backend and answers `failed` without it.
    """

    async def steer(self, agent_id: str, message: str, mode: str) -> str:
        """Deliver `message` to the running attempt of `agent_id`; `delivered` or `queued` (spec A.8)."""
        ...
