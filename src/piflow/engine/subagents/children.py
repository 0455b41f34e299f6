"""Children of a pi-subagents script (SUBAGENTS_SPEC A.4–A.11): each is an agent attempt on the run's backend.

A child is an agent record whose label is its workflow key and whose role is its agent's name,
run by the engine's `AgentRunner` (so permits, budgets, attempts, transcripts, events and progress
are the first dialect's) with the agent definition's system prompt, tools, model and thinking. Its
output is journaled under `child/<key>` (`OperationKind.CHILD`); its `ChildResult` is a pure
function of that output, the key and the params, so a replay rebuilds it without a backend. The
run id of a child is derived from the workflow run and the key, stable across resumes.

`launch_child(run, key, params)` is the entry point lanes build on: validated params in, a
`ChildResult` (a JSON dict, `ok` False for a failed child) out.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from piflow.config.model_refs import ModelRef
from piflow.engine import events
from piflow.engine.agents import AgentRunner
from piflow.engine.journal import OperationKind, child_path, structural_path
from piflow.engine.resolution import AgentSpec, default_tools
from piflow.engine.subagents.agents import SnapshotAgents
from piflow.engine.subagents.progress import SUBAGENT_CHILD
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun

_RUN_IDS: Final = uuid.UUID("6f1d2c4e-8a53-4b0e-9a55-3f0c8e6d2b71")
DEFAULT_CONTEXT: Final = "fresh"
_PASSED_THROUGH: Final = ("toolBudget", "toolTimeoutMs", "usageBudget", "skill", "reads", "progress", "fast",
                          "acceptance", "agentContract", "intercomBridge", "context", "lane", "phase")


def child_run_id(workflow_run_id: str, key: str) -> str:
    """The run id of the child `key` of a workflow run: stable, so replays and refs agree."""
    return uuid.uuid5(_RUN_IDS, f"{workflow_run_id}/{key}").hex


@dataclass
class ChildInfo:
    """What a resume of a child needs: its agent, model and conversation (SUBAGENTS_SPEC A.10)."""

    key: str
    agent: str
    run_id: str
    conversation: str
    model: str | None
    run_ids: list[str] = field(default_factory=list)
    agent_id: str | None = None
    result: dict[str, Any] | None = None
    turn: int = 1
    """The turn of its conversation this child ran (a resume of it runs the next one)."""


@dataclass(frozen=True)
class ChildPlan:
    """A child admitted for launch: everything decided before anything starts (all-or-nothing)."""

    key: str
    params: Mapping[str, Any]
    agent: str
    task: str
    run_id: str
    conversation: str
    model: str | None
    continues: ChildInfo | None
    output_path: Path
    turn: int = 1
    """Its conversation's turn: 1 for a fresh child, the next one for a resume."""


def output_root(run: ActiveRun) -> Path:
    """`<artifacts>/outputs/<workflowRunId>/` (SUBAGENTS_SPEC A.11)."""
    return run.store.location.parent / "artifacts" / "outputs" / run.id


def output_path(run: ActiveRun, key: str, params: Mapping[str, Any]) -> Path:
    """Where the child's output is saved: its `output` param (relative: under the managed artifacts)."""
    given = params.get("output")
    if isinstance(given, str) and given.strip():
        path = Path(given)
        return (path if path.is_absolute() else output_root(run) / path).resolve()
    return (output_root(run) / f"{key}.md").resolve()


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def child_result(plan: ChildPlan, value: Any = None, error: WorkflowError | None = None,
                 agent_id: str | None = None) -> dict[str, Any]:
    """The ChildResult of a finished child, exactly the fields of SUBAGENTS_SPEC A.4."""
    run_ids = [*(plan.continues.run_ids if plan.continues is not None else []), plan.run_id]
    context = plan.params.get("context") if isinstance(plan.params.get("context"), str) else DEFAULT_CONTEXT
    result: dict[str, Any] = {
        "key": plan.key,
        "ok": error is None,
        "output": "",
        "agent": plan.agent,
        "runId": plan.run_id,
        "artifactPaths": [],
        "resumability": {"resumable": error is None},
        "continuation": {"runIds": run_ids},
        "requestedContext": context,
        "resolvedContext": context,
    }
    if error is not None:
        result["error"] = error.message
        result["resumability"]["reason"] = "failed run"
        return result
    text = _text(value)
    if plan.params.get("outputSchema") is not None:
        result["structuredOutput"] = value
    result["outputReference"] = str(plan.output_path)
    result["outputPathMapping"] = {plan.key: str(plan.output_path)}
    result["output"] = f"Output saved to: {plan.output_path}" if plan.params.get("outputMode") == "file-only" else text
    if "lane" in plan.params:
        result["lane"] = plan.params["lane"]
    return result


def save_output(plan: ChildPlan, value: Any) -> None:
    """Write the child's output file (idempotent: a replay rewrites one a crash left unwritten)."""
    path = plan.output_path
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(_text(value), encoding="utf-8")
    temporary.replace(path)


def _model_ref(name: str) -> ModelRef:
    provider, _, model_id = name.partition("/")
    return ModelRef(provider, model_id) if model_id else ModelRef("", provider)


def child_spec(plan: ChildPlan, agents: SnapshotAgents, run: ActiveRun) -> AgentSpec:
    """The AgentSpec of a child: its agent definition's prompt, tools, model and thinking (spec B)."""
    definition = agents.definition(plan.agent)
    model = agents.model(plan.model, definition)
    params = plan.params
    timeout = params.get("timeoutMs")
    options: dict[str, Any] = {"key": plan.key, "agent": plan.agent}
    options.update({name: params[name] for name in _PASSED_THROUGH if name in params})
    tools = definition.tools if definition.tools is not None else default_tools(run.resolution.root_tools)
    return AgentSpec(
        display_name=plan.key,
        label=plan.key,
        role=plan.agent,
        requested_model=None,
        model=_model_ref(model.model),
        thinking=model.thinking,
        tools=tuple(tools),
        system_append=definition.system_prompt or None,
        output_schema=params.get("outputSchema") if isinstance(params.get("outputSchema"), dict) else None,
        retries=0,
        timeout_ms=int(timeout) if isinstance(timeout, int) and not isinstance(timeout, bool) else None,
        options=options,
        fallback_models=tuple(_model_ref(name) for name in model.fallback_models if name != model.model),
    )


def usage_exhausted(run: ActiveRun) -> WorkflowError | None:
    """The workflow's `usageBudget` (SUBAGENTS_SPEC C): once the run's usage reaches it, no new child
    starts (the refused one fails with this error); children already running finish."""
    budget = (run.snapshot.get("workflow") or {}).get("usageBudget")
    if not budget:
        return None
    usage = run.budget.snapshot_usage()
    spent = [f"{name} {usage[name]}/{budget[name]}" for name in ("tokens", "costUsd")
             if name in budget and usage[name] >= budget[name]]
    if not spent:
        return None
    return WorkflowError("AGENT_FAILED", f"Usage budget exhausted: {', '.join(spent)} used; running children "
                                         "finish, no new child starts.")


def refused_result(key: str, params: Mapping[str, Any], error: WorkflowError) -> dict[str, Any]:
    """The ChildResult of a detached child the host refused before it started (unknown agent, limits)."""
    agent = params.get("agent")
    return {"key": key, "ok": False, "output": "", "error": error.message,
            **({"agent": agent} if isinstance(agent, str) else {}), "artifactPaths": [],
            "resumability": {"resumable": False, "reason": "not started"}, "continuation": {"runIds": []}}


async def run_plan(run: ActiveRun, plan: ChildPlan, agents: SnapshotAgents,
                   limiter: anyio.CapacityLimiter | None) -> tuple[dict[str, Any], str | None]:
    """Run (or replay) one admitted child to its ChildResult and its agent record id."""
    path = child_path(plan.key)
    recorded = run.operations.check(OperationKind.CHILD, path)
    if recorded is not None:
        save_output(plan, recorded.value)
        return child_result(plan, recorded.value), None
    refused = usage_exhausted(run)
    if refused is not None:
        run.emit(events.RUN_WARNING, {"message": f"{plan.key}: {refused.message}"})
        return child_result(plan, error=refused), None
    spec = child_spec(plan, agents, run)
    run.emit(SUBAGENT_CHILD, {"key": plan.key, "agent": plan.agent, "childRunId": plan.run_id,
                              "outputReference": str(plan.output_path)})
    owner = structural_path("worktree", "child", plan.key) if plan.params.get("worktree") is True else None
    await run.lifecycle.enter()
    try:
        runner = AgentRunner(run, spec, plan.task, OperationKind.CHILD, path, [plan.key], owner, plan.conversation,
                             plan.turn)
        try:
            if limiter is None:
                value = await runner.execute()
            else:
                async with limiter:
                    value = await runner.execute()
        except WorkflowError as exc:
            return child_result(plan, error=exc, agent_id=runner.record.id), runner.record.id
    finally:
        run.lifecycle.leave()
    save_output(plan, value)
    return child_result(plan, value, agent_id=runner.record.id), runner.record.id


def check_output_collisions(plans: Sequence[ChildPlan], taken: Mapping[Path, str], aggregate: Path | None) -> None:
    """SUBAGENTS_SPEC A.11: two children, or a child and the workflow's output, on one path."""
    seen = dict(taken)
    for plan in plans:
        path = plan.output_path
        if aggregate is not None and path == aggregate:
            raise WorkflowError("INVALID_METADATA", f"Workflow child '{plan.key}' output resolves to the workflow "
                                f"aggregate output path: {path}. Use a distinct child output path.")
        other = seen.get(path)
        if other is not None and other != plan.key:
            raise WorkflowError("INVALID_METADATA", f"Workflow children '{other}' and '{plan.key}' resolve output to "
                                f"the same path: {path}. Use distinct child output paths.")
        seen[path] = plan.key
