"""Read models of runs for people: the snapshot the CLI, the server and editors all show."""

from __future__ import annotations

from typing import Any

from piflow.engine.lifecycle import AGENT_SETTLED
from piflow.engine.store import AgentRecord, RunRecord, RunStore

ATTENTION_ORDER = (
    "awaiting_input",
    "budget_exhausted",
    "running",
    "pausing",
    "paused",
    "interrupted",
    "failed",
    "queued",
    "stopped",
    "completed",
)


def agent_view(agent: AgentRecord) -> dict[str, Any]:
    return {
        "id": agent.id,
        "label": agent.label or agent.name,
        "name": agent.name,
        "role": agent.role,
        "model": agent.model,
        "requestedModel": agent.requested_model,
        "tools": agent.tools,
        "state": agent.state,
        "attempts": agent.attempts,
        "structuralPath": agent.structural_path,
        "journalPath": agent.journal_path,
        "tokens": agent.tokens_input + agent.tokens_output,
        "costUsd": round(agent.cost_usd, 10),
        "activity": agent.activity,
        "error": agent.error,
    }


def run_summary(run: RunRecord, agents: list[AgentRecord]) -> dict[str, Any]:
    """One line's worth of a run: for lists and pickers."""
    settled = sum(1 for a in agents if a.state in AGENT_SETTLED)
    usage = run.usage or {}
    return {
        "runId": run.id,
        "workflowName": run.workflow_name,
        "scriptPath": run.script_path,
        "cwd": run.cwd,
        "state": run.state,
        "phase": run.phase,
        "agents": {"total": len(agents), "settled": settled},
        "costUsd": usage.get("costUsd", 0),
        "tokens": usage.get("tokens", 0),
        "createdAt": run.created_at,
        "updatedAt": run.updated_at,
    }


def run_view(store: RunStore, run_id: str) -> dict[str, Any]:
    """Everything about a run: state, agents, budget, checkpoints, result or error."""
    run = store.get_run(run_id)
    if run is None:
        from piflow.errors import WorkflowError

        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
    agents = store.agents(run_id)
    view = run_summary(run, agents)
    view.update(
        {
            "error": run.error,
            "warnings": run.warnings,
            "agentList": [agent_view(a) for a in agents],
            "budget": {
                "limits": run.budget or {},
                "version": run.budget_version,
                "usage": run.usage or {},
                "events": store.budget_events(run_id),
            },
            "checkpoints": [
                {"name": c.label, "prompt": c.prompt, "context": c.context, "state": c.state}
                for c in store.checkpoints(run_id)
            ],
            "proposals": [
                {"proposalId": d.proposal_id, "state": d.state, **d.payload}
                for d in store.decisions(run_id)
            ],
            "worktrees": [
                {"owner": w.owner, "branch": w.branch, "path": w.path, "base": w.base}
                for w in store.worktrees(run_id)
            ],
        }
    )
    if run.state == "completed":
        view["result"] = run.result
    return view


def attention_key(summary: dict[str, Any]) -> tuple[int, float]:
    state = summary["state"]
    rank = ATTENTION_ORDER.index(state) if state in ATTENTION_ORDER else len(ATTENTION_ORDER)
    return rank, -float(summary["updatedAt"])
