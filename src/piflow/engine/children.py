"""Child agents (spec J.5): what an agent given the `agent` tool may start, wait for and steer.

A child is an agent record whose `parent_id` is its parent's; it runs under the run's scheduler
and budgets like any agent (its attempts count as `agentLaunches`), with the parent's cwd and
worktree. Its journal key is the parent's key plus `child:<label>/occurrence:<n>` (n counts the
label's spawns in this attempt), so when a crashed parent attempt runs again, a child it spawns
again under the same label replays its journaled value and no backend runs it twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio

from piflow.engine.journal import OperationKind, structural_path
from piflow.engine.resolution import resolve_agent
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from piflow.engine.agents import AgentRunner

MAX_DEPTH: Final = 3
"""How deep children may nest: a script's agent's child is at depth 1."""
MAX_CHILDREN: Final = 16
"""How many children one attempt of an agent may start."""

_INVALID: Final = "Invalid child agent parameters"


@dataclass
class _Child:
    id: str
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | None = None
    budget_error: WorkflowError | None = None


class ChildAgents:
    """The direct children of one attempt of `parent`; they live in `group`, the attempt's scope."""

    def __init__(self, parent: AgentRunner, group: TaskGroup) -> None:
        self._parent = parent
        self._group = group
        self._children: dict[str, _Child] = {}
        self._occurrences: dict[str, int] = {}

    async def spawn(self, params: Any) -> str:
        parent, run = self._parent, self._parent.run
        if not isinstance(params, dict):
            raise WorkflowError("INVALID_METADATA", _INVALID)
        prompt, label = params.get("prompt"), params.get("label")
        if not isinstance(prompt, str) or not prompt.strip() or not isinstance(label, str) or not label.strip():
            raise WorkflowError("INVALID_METADATA", _INVALID)
        if parent.depth + 1 > MAX_DEPTH:
            raise WorkflowError("INVALID_METADATA", f"Child agents nest at most {MAX_DEPTH} levels deep")
        if len(self._children) >= MAX_CHILDREN:
            raise WorkflowError("INVALID_METADATA", f"An agent may start at most {MAX_CHILDREN} child agents")
        options = {key: value for key, value in params.items() if key != "prompt"}
        try:
            spec = resolve_agent(options, run.resolution, inherited=parent.spec.tools)
        except WorkflowError as error:
            if error.code in ("INVALID_METADATA", "INVALID_SCHEMA"):
                raise WorkflowError("INVALID_METADATA", _INVALID) from None
            raise
        label = label.strip()
        occurrence = self._occurrences[label] = self._occurrences.get(label, 0) + 1
        path = f"{parent.journal_path}/{structural_path(f'child:{label}', f'occurrence:{occurrence}')}"
        recorded = run.operations.check(OperationKind.AGENT, path)
        if recorded is not None:
            child = _Child(self._recorded_id(path))
            child.outcome = {"id": child.id, "ok": True, "value": recorded.value}
            child.done.set()
        else:
            from piflow.engine.agents import AgentRunner

            record = parent.record
            runner = AgentRunner(run, spec, prompt, OperationKind.AGENT, path, record.structural_path,
                                 record.worktree_owner, parent_breadcrumb=record.parent_breadcrumb, parent=parent)
            child = _Child(runner.record.id)
            self._group.start_soon(self._run, child, runner)
        self._children[child.id] = child
        return child.id

    def _recorded_id(self, path: str) -> str:
        """The id a completed child had when it ran (the journal keeps its value, the store its record)."""
        run = self._parent.run
        return next((agent.id for agent in run.store.agents(run.id) if agent.journal_path == path), path)

    @staticmethod
    async def _run(child: _Child, runner: AgentRunner) -> None:
        try:
            child.outcome = {"id": child.id, "ok": True, "value": await runner.execute()}
        except WorkflowError as error:
            if error.code == "BUDGET_EXHAUSTED":
                child.budget_error = error
            child.outcome = {"id": child.id, "ok": False, "error": {"code": error.code, "message": error.message}}
        finally:
            child.done.set()

    def _child(self, child_id: Any, refusal: str) -> _Child:
        child = self._children.get(child_id) if isinstance(child_id, str) else None
        if child is None:
            raise WorkflowError("UNKNOWN_AGENT_TYPE", refusal)
        return child

    async def result(self, child_id: Any) -> dict[str, Any]:
        child = self._child(child_id, "Results are scoped to direct children")
        if not child.done.is_set():
            await self._parent.wait_for_child(child.done)
        if child.budget_error is not None:
            raise child.budget_error
        assert child.outcome is not None  # set before `done`
        return child.outcome

    async def steer(self, child_id: Any, message: Any) -> None:
        child = self._child(child_id, "Steering is scoped to direct children")
        if not isinstance(message, str) or not message.strip():
            raise WorkflowError("INVALID_METADATA", "steer_subagent requires a non-empty message")
        if child.done.is_set():
            raise WorkflowError("AGENT_FAILED", f"Child agent {child.id} has already finished")
        backend = self._parent.run.backend
        steer = getattr(backend, "steer", None)
        if steer is None:
            raise WorkflowError("AGENT_FAILED", f"The {backend.name} backend cannot steer a running agent")
        await steer(child.id, message, "steer")
