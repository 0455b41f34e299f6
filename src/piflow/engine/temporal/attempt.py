"""One agent attempt as a Temporal activity: the run's backend, budget gates, heartbeats.

Agent failures (spec codes) are the attempt's outcome, returned to the workflow, which journals
and retries as the engine does; only infrastructure failures (a killed worker, a rate limit)
raise, so Temporal retries the same attempt, on another worker if this one is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from piflow.config.paths import state_dir
from piflow.engine.backends import create_backend
from piflow.engine.backends.base import AgentBackend, AttemptRequest, ProviderRateLimited, Usage
from piflow.engine.budgets import BudgetTracker
from piflow.engine.environment import load_environment
from piflow.engine.temporal.step import request_from_json
from piflow.engine.temporal.wire import AttemptInput, AttemptOutcome
from piflow.errors import WorkflowError

_backends: dict[tuple[str, str | None, str, str], AgentBackend] = {}
"""Backends this worker built, per run: a scripted fixture's `times` count across a run's attempts."""


class RateLimited(Exception):
    """The provider asked to slow down: Temporal retries the attempt after its backoff."""


class _ActivityControl:
    """The AttemptControl of an attempt on a worker: budget gates from the run's usage so far."""

    def __init__(self, budget: BudgetTracker, beat: Callable[[str | None], None]) -> None:
        self._budget = budget
        self._beat = beat
        self.usage = Usage()

    def before_turn(self) -> None:
        self._budget.check_turn()

    def after_turn(self, usage: Usage, final: bool) -> str | None:
        u = self.usage
        self.usage = Usage(u.input + usage.input, u.output + usage.output, u.cache_read + usage.cache_read,
                           u.cache_write + usage.cache_write, u.cost_usd + usage.cost_usd)
        self._budget.add_usage(usage.tokens, usage.cost_usd)
        if not final:
            self._budget.check_turn()
        return None

    def activity(self, text: str | None) -> None:
        self._beat(text)

    def tool_call(self, name: str) -> None:
        return None  # pi-subagents children (the only ones with tool budgets) run on the embedded executor

    def validate_result(self, value: Any) -> bool:
        return True  # the step validates the result against the schema when it replays the outcome

    def transcript(self, path: str, session_id: str | None = None) -> None:
        return None

    def conversation_state(self) -> dict[str, Any] | None:
        return None  # conversation heads do not travel to workers yet: a backend that needs one fails the turn

    def save_conversation_state(self, state: dict[str, Any]) -> None:
        return None

    def system_prompt(self, text: str) -> None:
        return None  # attempt set-ups are recorded by the embedded executor only


def _backend(inp: AttemptInput, cwd: str, run_id: str) -> AgentBackend:
    key = (inp.backend, inp.fixtures, cwd, run_id)
    if key not in _backends:
        env = load_environment(cwd).with_backend(inp.backend)
        _backends[key] = create_backend(inp.backend, inp.fixtures, env, state_dir() / "temporal" / "transcripts")
    return _backends[key]


async def run_attempt(inp: AttemptInput, beat: Callable[[str | None], None]) -> AttemptOutcome:
    """Run the attempt to its outcome; `beat` is called at least every second while it runs."""
    pending = inp.pending
    request = request_from_json(pending.request)
    control = _ActivityControl(BudgetTracker(inp.budget, usage=inp.usage), beat)
    outcome = AttemptOutcome(path=pending.path, attempt=pending.attempt)

    async def heartbeats() -> None:
        while True:
            beat(None)
            await anyio.sleep(1)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(heartbeats)
        limited = await _run(inp, request, control, outcome)
        tasks.cancel_scope.cancel()
    if limited is not None:
        raise RateLimited(limited)
    outcome.tokens_input = control.usage.input
    outcome.tokens_output = control.usage.output
    outcome.cost_usd = control.usage.cost_usd
    return outcome



async def _run(inp: AttemptInput, request: AttemptRequest, control: _ActivityControl,
               outcome: AttemptOutcome) -> str | None:
    """Fill `outcome` with the attempt's value or error; a rate limit's message when the provider gave one."""
    timeout = inp.pending.timeout_ms
    try:
        if not Path(request.cwd).is_dir():
            raise WorkflowError("AGENT_FAILED", f"This worker cannot reach the run's directory {request.cwd}: run "
                                "`piflow worker` where the repository is checked out at the same path")
        backend = _backend(inp, request.cwd, request.run_id)
        with anyio.fail_after(timeout / 1000 if timeout is not None else None):
            outcome.value = await backend.run_attempt(request, control)
    except TimeoutError:
        outcome.error = {"code": "AGENT_TIMEOUT", "message": "Agent attempt timed out"}
    except WorkflowError as exc:
        outcome.error = {"code": exc.code, "message": exc.message}
    except ProviderRateLimited as exc:
        return str(exc) or "provider rate limit"
    except Exception as exc:  # a backend bug or transport error fails the attempt, as in the engine
        outcome.error = {"code": "AGENT_FAILED", "message": str(exc) or type(exc).__name__}
    return None
