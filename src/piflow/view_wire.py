"""The JSON shapes of the engine's typed run views: what `piflow show --json`/`piflow runs --json`
print and what the language server sends (its protocol models validate them). The one place those
camelCase shapes are built from `piflow.engine.views`; the key order is part of the output."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from piflow.engine.views import AgentView

if TYPE_CHECKING:  # annotations only: `piflow run --json` need not load the control, details and pi-subagents views
    from piflow.engine.agent_details import AgentDetailView, AttemptView
    from piflow.engine.control import ControlOutcome
    from piflow.engine.store import AttemptSetup
    from piflow.engine.subagents.views import LaneBoardView, SubagentsView
    from piflow.engine.views import RunSummaryView, RunView


def agent_json(agent: AgentView) -> dict[str, Any]:
    return {
        "id": agent.id,
        "label": agent.label,
        "name": agent.name,
        "role": agent.role,
        "model": agent.model,
        "requestedModel": agent.requested_model,
        "tools": agent.tools,
        "state": agent.state,
        "attempts": agent.attempts,
        "structuralPath": agent.structural_path,
        "journalPath": agent.journal_path,
        "tokens": agent.tokens,
        "costUsd": agent.cost_usd,
        "activity": agent.activity,
        "error": agent.error,
        "parentId": agent.parent_id,
    }


def attempt_json(attempt: AttemptView) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "number": attempt.number,
        "state": attempt.state,
        "tokens": attempt.tokens,
        "costUsd": attempt.cost_usd,
    }
    if attempt.error is not None:
        shown["error"] = {"code": attempt.error.code, "message": attempt.error.message}
    if attempt.transcript_path:
        shown["transcriptPath"] = attempt.transcript_path
    if attempt.setup is not None:
        shown["setup"] = setup_json(attempt.setup)
    return shown


def setup_json(setup: AttemptSetup) -> dict[str, Any]:
    shown: dict[str, Any] = {"hookNames": list(setup.hook_names), "model": setup.model, "thinking": setup.thinking,
                             "tools": list(setup.tools), "cwd": setup.cwd}
    if setup.system_prompt is not None:
        shown["systemPrompt"] = setup.system_prompt
        shown["systemPromptSha256"] = setup.system_prompt_sha256
    if setup.disabled_resources is not None:
        shown["disabledAgentResources"] = setup.disabled_resources.to_json()
    return shown


def agent_detail_json(detail: AgentDetailView) -> dict[str, Any]:
    shown = agent_json(detail.agent)
    output = detail.output
    shown["outputPreview"] = output.preview
    if output.inline:
        shown["output"] = output.value
    shown["outputTruncated"] = output.truncated
    shown["attemptList"] = [attempt_json(a) for a in detail.attempt_list]
    shown["transcriptPath"] = detail.transcript_path
    return shown


def summary_json(summary: RunSummaryView) -> dict[str, Any]:
    return {
        "runId": summary.run_id,
        "workflowName": summary.workflow_name,
        "scriptPath": summary.script_path,
        "cwd": summary.cwd,
        "state": summary.state,
        "phase": summary.phase,
        "agents": {"total": summary.agents_total, "settled": summary.agents_settled},
        "costUsd": summary.cost_usd,
        "tokens": summary.tokens,
        "createdAt": summary.created_at,
        "updatedAt": summary.updated_at,
    }


def run_json(view: RunView) -> dict[str, Any]:
    """A run view (`run_view`) in its JSON shape: `piflow show --json`, `piflow.showRun`."""
    shown = summary_json(view.summary)
    budget = view.budget
    shown.update(
        {
            "error": view.error,
            "warnings": view.warnings,
            "agentList": [
                agent_json(a) if isinstance(a, AgentView) else agent_detail_json(a) for a in view.agent_list
            ],
            "budget": {"limits": budget.limits, "version": budget.version, "usage": budget.usage,
                       "events": budget.events},
            "checkpoints": [
                {"name": c.name, "prompt": c.prompt, "context": c.context, "state": c.state} for c in view.checkpoints
            ],
            "proposals": [{"proposalId": p.proposal_id, "state": p.state, **p.payload} for p in view.proposals],
            "worktrees": [
                {"owner": w.owner, "branch": w.branch, "path": w.path, "base": w.base} for w in view.worktrees
            ],
        }
    )
    if view.subagents is not None:
        shown["subagents"] = subagents_json(view.subagents)
    if view.has_result:
        shown["result"] = view.result
    return shown


def subagents_json(view: SubagentsView) -> dict[str, Any]:
    """A pi-subagents run's children, host steps, lane boards, emits and console lines."""
    return {
        "children": [
            {"key": c.key, "agent": c.agent, "state": c.state, "runId": c.child_run_id, "model": c.model,
             "tokens": c.tokens, "costUsd": c.cost_usd, "outputReference": c.output_reference, "error": c.error}
            for c in view.children
        ],
        "hostSteps": [
            {"key": h.key, "command": h.command, "state": h.state, "exitCode": h.exit_code,
             "durationMs": h.duration_ms, "outputPath": h.output_path, "error": h.error}
            for h in view.host_steps
        ],
        "lanes": [lane_board_json(board) for board in view.boards],
        "emits": view.emits,
        "console": [{"level": line.level, "message": line.message} for line in view.console],
    }


def lane_board_json(board: LaneBoardView) -> dict[str, Any]:
    """One `runs.lanes` board: in a run's `subagents` and in `piflow/runProgress`."""
    return {"call": board.call, "lanes": [
        {"key": lane.key, "state": lane.state, "failedStage": lane.failed_stage, "stages": [
            {"key": s.key, "state": s.state, "verdict": s.verdict, "error": s.error, "runId": s.child_run_id}
            for s in lane.stages
        ]}
        for lane in board.lanes
    ]}


def outcome_json(outcome: ControlOutcome) -> dict[str, Any]:
    """A control request's reply as `piflow stop`/`budget` print it, an owner process reports it
    to its parent and the server answers it: the fields that apply, in this order."""
    fields = (
        ("runId", outcome.run_id),
        ("accepted", outcome.accepted),
        ("state", outcome.state),
        ("stopped", outcome.stopped),
        ("approved", outcome.approved),
        ("reason", outcome.reason),
        ("proposalId", outcome.proposal_id),
        ("message", outcome.message),
    )
    return {key: value for key, value in fields if value is not None}
