"""One agent attempt as a Temporal activity: the run's backend, budget gates, heartbeats, worktrees.

Agent failures (spec codes) and provider rate limits are the attempt's outcome, returned to the
workflow, which journals and retries as the engine does (and pauses the run on a rate limit);
only infrastructure failures (a killed worker) raise, so Temporal retries the same attempt, on
another worker if this one is gone.

An attempt in a `withWorktree` scope runs in that scope's branch `piflow/<runId>/<key>`, checked
out for this attempt in the worker's own repository (`piflow worker --worktrees`, else the run's
directory) and pushed to its `origin` afterwards: the next attempt of the scope, on any worker,
continues from the pushed branch, and any teammate can fetch it. A bundle stored with the run
would exceed Temporal's payload limits for a real repository; a pushed branch does not.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from piflow.config.paths import state_dir
from piflow.engine.agents import check_tool_budget, schema_accepts
from piflow.engine.backends import create_backend
from piflow.engine.backends.base import AgentBackend, AttemptRequest, ProviderRateLimited, Usage
from piflow.engine.backends.scripted import CHOSEN_RULE
from piflow.engine.budgets import BudgetTracker
from piflow.engine.environment import load_environment
from piflow.engine.git import run_git
from piflow.engine.store import WorktreeRecord
from piflow.engine.temporal.step import request_from_json, worker_extensions
from piflow.engine.temporal.wire import AttemptInput, AttemptOutcome
from piflow.engine.worktrees import RunWorktrees, branch_prefix, worktree_key
from piflow.errors import WorkflowError

REMOTE = "origin"
"""Where a worker pushes (and fetches) the branches of `withWorktree` scopes."""

_backends: dict[tuple[str, str | None, str, str], AgentBackend] = {}
"""Backends this worker built, per run (a scripted fixture's `times` counts per run in the workflow:
`PendingAttempt.fixture_rule`)."""


class _ActivityControl:
    """The AttemptControl of an attempt on a worker: budget gates from the run's usage so far,
    the conversation head the workflow journaled, and what the step records when it replays."""

    def __init__(self, budget: BudgetTracker, beat: Callable[[str | None], None], request: AttemptRequest,
                 outcome: AttemptOutcome, conversation: dict[str, Any] | None) -> None:
        self._budget = budget
        self._beat = beat
        self._request = request
        self._outcome = outcome
        self._conversation = conversation
        self._tool_calls = 0
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
        self._tool_calls += 1
        check_tool_budget(self._request.options, self._tool_calls, name)

    def validate_result(self, value: Any) -> bool:
        schema = self._request.output_schema
        return schema is None or schema_accepts(schema, value)

    def transcript(self, path: str, session_id: str | None = None) -> None:
        self._outcome.transcript_path, self._outcome.session_id = path, session_id

    def conversation_state(self) -> dict[str, Any] | None:
        return self._conversation

    def save_conversation_state(self, state: dict[str, Any]) -> None:
        self._outcome.conversation_head = state

    def system_prompt(self, text: str) -> None:
        self._outcome.system_prompt = text


def _backend(inp: AttemptInput, cwd: str, run_id: str) -> AgentBackend:
    key = (inp.backend, inp.fixtures, cwd, run_id)
    if key not in _backends:
        env = load_environment(cwd).with_backend(inp.backend)
        _backends[key] = create_backend(inp.backend, inp.fixtures, env, state_dir() / "temporal" / "transcripts",
                                        worker_extensions().agent_tools())
    return _backends[key]


async def run_attempt(inp: AttemptInput, beat: Callable[[str | None], None],
                      worktrees: str | None = None) -> AttemptOutcome:
    """Run the attempt to its outcome; `beat` is called at least every second while it runs.

    `worktrees`: this worker's clone of the repository (the project directory in it), where the
    attempt's `withWorktree` branch is checked out; None: the run's own directory.
    """
    pending = inp.pending
    request = request_from_json(pending.request)
    outcome = AttemptOutcome(path=pending.path, attempt=pending.attempt)
    control = _ActivityControl(BudgetTracker(inp.budget, usage=inp.usage), beat, request, outcome,
                               pending.conversation_state)

    async def heartbeats() -> None:
        while True:
            beat(None)
            await anyio.sleep(1)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(heartbeats)
        await _run(inp, request, control, outcome, worktrees)
        tasks.cancel_scope.cancel()
    outcome.tokens_input = control.usage.input
    outcome.tokens_output = control.usage.output
    outcome.cost_usd = control.usage.cost_usd
    return outcome


async def _run(inp: AttemptInput, request: AttemptRequest, control: _ActivityControl, outcome: AttemptOutcome,
               clone: str | None) -> None:
    """Fill `outcome` with the attempt's value, error or rate limit."""
    timeout = inp.pending.timeout_ms
    owner = inp.pending.worktree_owner
    scope: ScopeCheckout | None = None
    try:
        if owner is not None:
            scope = await anyio.to_thread.run_sync(ScopeCheckout.open, Path(clone or request.cwd), request.run_id,
                                                   owner)
            request = replace(request, cwd=scope.record.cwd)
        if not Path(request.cwd).is_dir():
            raise WorkflowError("AGENT_FAILED", f"This worker cannot reach the run's directory {request.cwd}: run "
                                "`piflow worker` where the repository is checked out at the same path")
        backend = _backend(inp, request.cwd, request.run_id)
        chosen = CHOSEN_RULE.set(inp.pending.fixture_rule)
        try:
            with anyio.fail_after(timeout / 1000 if timeout is not None else None):
                outcome.value = await backend.run_attempt(request, control)
        finally:
            CHOSEN_RULE.reset(chosen)
    except TimeoutError:
        outcome.error = {"code": "AGENT_TIMEOUT", "message": "Agent attempt timed out"}
    except WorkflowError as exc:
        outcome.error = {"code": exc.code, "message": exc.message}
    except ProviderRateLimited as exc:
        outcome.rate_limited = str(exc) or "provider rate limit"
    except Exception as exc:  # a backend bug or transport error fails the attempt, as in the engine
        outcome.error = {"code": "AGENT_FAILED", "message": str(exc) or type(exc).__name__}
    finally:
        if scope is not None:
            with anyio.CancelScope(shield=True):
                failure = await anyio.to_thread.run_sync(scope.close)
            if failure is not None and outcome.error is None and outcome.rate_limited is None:
                outcome.error, outcome.value = {"code": failure.code, "message": failure.message}, None


class ScopeCheckout:
    """A `withWorktree` scope's branch, checked out in this worker's repository for one attempt."""

    def __init__(self, worktrees: RunWorktrees, record: WorktreeRecord, owner: str, remote: bool) -> None:
        self.worktrees = worktrees
        self.record = record
        self.owner = owner
        self.remote = remote

    @classmethod
    def open(cls, repository: Path, run_id: str, owner: str) -> ScopeCheckout:
        """Check the branch out where the scope's last attempt (on any worker) left it, or make it."""
        worktrees = RunWorktrees(run_id, repository, state_dir() / "temporal" / "worktrees" / run_id)
        worktrees.release(owner)  # what an attempt killed on this worker left
        branch = f"refs/heads/{branch_prefix(run_id)}/{worktree_key(run_id, owner)}"
        remote = REMOTE in run_git(repository, "remote").stdout.split()
        if remote:
            listed = run_git(repository, "ls-remote", REMOTE, branch).stdout.split()
            tip = listed[0] if listed else None
            if tip is not None:
                run_git(repository, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", REMOTE, branch)
        else:
            local = run_git(repository, "rev-parse", "--verify", "--quiet", branch, ok=(0, 1)).stdout.strip()
            tip = local or None
        record, _ = worktrees.ensure(owner, tip)
        return cls(worktrees, record, owner, remote)

    def close(self) -> WorkflowError | None:
        """Commit the attempt's work, push the branch, remove the checkout; a failure is returned."""
        try:
            self.worktrees.commit(self.owner)
            if self.remote:
                branch = self.record.branch
                run_git(Path(self.record.path), "push", "--quiet", REMOTE, f"refs/heads/{branch}:refs/heads/{branch}")
        except WorkflowError as exc:
            return exc
        finally:
            with suppress(WorkflowError):  # else the next attempt of the scope on this worker removes it
                self.worktrees.release(self.owner)
        return None
