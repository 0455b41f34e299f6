"""The engine's side of an attempt, for backend tests: request, budgets, accounting, schema checks.

`attempt_request` builds a request as the engine does (with the J.3 prompt). `BudgetControl`
mirrors the engine's own control (`piflow.engine.agents`) on top of the real `BudgetTracker`,
without a run around it: usage is summed per attempt and charged to the budget, turns are
gated before they start and after non-final ones, and the soft instruction is handed out once.
It records what the backend reported so tests can assert on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from piflow.config.model_refs import parse_model_reference
from piflow.engine.agents import schema_accepts
from piflow.engine.backends.base import AttemptRequest, Usage
from piflow.engine.budgets import BudgetTracker, soft_instruction
from piflow.engine.prompts import attempt_prompt


def attempt_request(
    task: str = "Say hello.",
    *,
    model: str = "local/m1",
    schema: dict[str, Any] | None = None,
    thinking: str | None = None,
    system_append: str | None = None,
    conversation: str | None = None,
    turn: int = 1,
    agent_id: str = "run-1:1",
    attempt: int = 1,
    tools: tuple[str, ...] = ("read",),
    cwd: str = "/tmp",
    options: dict[str, Any] | None = None,
) -> AttemptRequest:
    return AttemptRequest(
        run_id="run-1",
        agent_id=agent_id,
        attempt=attempt,
        workflow_name="demo",
        label="writer",
        task=task,
        prompt=attempt_prompt("demo", "writer", task),
        model=parse_model_reference(model),
        thinking=thinking,
        tools=tools,
        cwd=cwd,
        role="writer" if system_append else None,
        system_append=system_append,
        output_schema=schema,
        conversation=conversation,
        turn=turn if conversation else 0,
        options=options or {},
    )


@dataclass
class Turn:
    usage: Usage
    final: bool


@dataclass
class BudgetControl:
    schema: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    turns: list[Turn] = field(default_factory=list)
    activities: list[str | None] = field(default_factory=list)
    """What the agent's progress line showed, in order (the engine's `activity`)."""
    tool_calls: list[str] = field(default_factory=list)
    """The tool calls counted against the tool budget (not shown as activity by the engine)."""
    transcripts: list[tuple[str, str | None]] = field(default_factory=list)
    soft_sent: bool = False
    head: dict[str, Any] | None = None
    """The conversation state the engine would load from the run store."""
    saved: dict[str, Any] | None = None
    """The conversation state the backend asked to keep after this turn."""
    system_prompts: list[str] = field(default_factory=list)
    """The effective system prompts the backend reported."""

    def __post_init__(self) -> None:
        self.budget = BudgetTracker(self.limits)

    def before_turn(self) -> None:
        self.budget.check_turn()

    def after_turn(self, usage: Usage, final: bool) -> str | None:
        self.turns.append(Turn(usage, final))
        self.usage = Usage(
            self.usage.input + usage.input,
            self.usage.output + usage.output,
            self.usage.cache_read + usage.cache_read,
            self.usage.cache_write + usage.cache_write,
            self.usage.cost_usd + usage.cost_usd,
        )
        self.budget.add_usage(usage.tokens, usage.cost_usd)
        if final:
            return None
        self.budget.check_turn()
        if self.budget.soft_crossed and not self.soft_sent:
            self.soft_sent = True
            return soft_instruction(self.budget.snapshot_usage())
        return None

    def activity(self, text: str | None) -> None:
        self.activities.append(text)

    def tool_call(self, name: str) -> None:
        self.tool_calls.append(name)

    def validate_result(self, value: Any) -> bool:
        return self.schema is None or schema_accepts(self.schema, value)

    def transcript(self, path: str, session_id: str | None = None) -> None:
        self.transcripts.append((path, session_id))

    def conversation_state(self) -> dict[str, Any] | None:
        return self.head

    def save_conversation_state(self, state: dict[str, Any]) -> None:
        self.saved = state

    def system_prompt(self, text: str) -> None:
        self.system_prompts.append(text)
