"""Read models of runs for people: the snapshot the CLI, the server and editors all show."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final

from piflow.engine.lifecycle import AGENT_SETTLED, ENDED, RunState
from piflow.engine.store import AgentRecord, AttemptRecord, RunRecord, RunStore
from piflow.errors import WorkflowError

OUTPUT_INLINE_BYTES: Final = 64 * 1024
"""An agent's output travels in a run view when its JSON is at most this large; larger ones are
fetched one agent at a time (`agent_detail`), so a view of a big run stays small."""
PREVIEW_CHARACTERS: Final = 200
_LONGEST_ESCAPE: Final = len("\\uXXXX")

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


def observed_run(store: RunStore, run: RunRecord) -> RunRecord:
    """The run as a reader must show it: an unfinished run whose owner is gone is `interrupted`.

    Computed on read, never written: recording it is the job of the next owner (resume), so
    looking at runs (`piflow runs`/`show`, an editor) never changes the store.
    """
    if run.state in ENDED or store.lease_owner(run.id) is not None:
        return run
    return replace(run, state=RunState.INTERRUPTED)


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


def _output_fields(stored: tuple[str, int] | None, *, full: bool) -> dict[str, Any]:
    """`outputPreview`, `output` (when small enough or `full`) and `outputTruncated` of an agent."""
    if stored is None:
        return {"outputPreview": None, "outputTruncated": False}
    text, size = stored
    if full or size <= OUTPUT_INLINE_BYTES:
        value = json.loads(text)
        return {"outputPreview": output_preview(value), "output": value, "outputTruncated": False}
    return {"outputPreview": _prefix_preview(text), "outputTruncated": True}


def _attempt_view(attempt: AttemptRecord, agent: AgentRecord, last: bool) -> dict[str, Any]:
    """One attempt; an attempt that ended without a recorded error failed after the backend
    answered (an invalid result) unless it is the last one, which shares its agent's outcome."""
    error = attempt.error
    if attempt.ended_at is None:
        state = "running"
    elif error is not None:
        state = "cancelled" if error.get("code") == "CANCELLED" else "failed"
    elif not last:
        state = "failed"
    elif agent.state in ("failed", "cancelled"):
        state, error = agent.state, agent.error
    else:
        state = "completed"
    view: dict[str, Any] = {
        "number": attempt.attempt,
        "state": state,
        "tokens": attempt.tokens_input + attempt.tokens_output,
        "costUsd": round(attempt.cost_usd, 10),
    }
    if error is not None:
        view["error"] = {"code": error.get("code"), "message": error.get("message")}
    if attempt.transcript_path:
        view["transcriptPath"] = attempt.transcript_path
    return view


def _agent_detail(
    agent: AgentRecord, attempts: list[AttemptRecord], stored: tuple[str, int] | None, *, full: bool
) -> dict[str, Any]:
    view = agent_view(agent)
    view.update(_output_fields(stored, full=full))
    view["attemptList"] = [_attempt_view(a, agent, a is attempts[-1]) for a in attempts]
    view["transcriptPath"] = next((a.transcript_path for a in reversed(attempts) if a.transcript_path), None)
    return view


def agent_details(store: RunStore, run_id: str, agents: list[AgentRecord]) -> list[dict[str, Any]]:
    """The agents of a run with their outputs (previews only beyond 64 KiB) and attempts."""
    attempts = store.run_attempts(run_id)
    stored = store.journal_texts(
        run_id, [a.journal_path for a in agents if a.journal_path], cap=OUTPUT_INLINE_BYTES + 1
    )
    return [
        _agent_detail(a, attempts.get(a.id, []), stored.get(a.journal_path or ""), full=False) for a in agents
    ]


def agent_detail(store: RunStore, run_id: str, agent_id: str) -> dict[str, Any]:
    """One agent of a run with its full output, whatever its size (`piflow.showAgent`)."""
    agent = next((a for a in store.agents(run_id) if a.id == agent_id), None)
    if agent is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow agent: {agent_id} (not an agent of run {run_id})")
    stored = store.journal_texts(run_id, [agent.journal_path] if agent.journal_path else [])
    attempts = store.run_attempts(run_id).get(agent.id, [])
    return _agent_detail(agent, attempts, stored.get(agent.journal_path or ""), full=True)


def run_view(store: RunStore, run_id: str, *, details: bool = False) -> dict[str, Any]:
    """Everything about a run: state, agents, budget, checkpoints, result or error.

    With `details`, each agent also carries its output, attempts and transcript (what `piflow show`
    and `piflow.showRun` answer); without, the view is cheap enough to redraw progress from.
    """
    run = store.get_run(run_id)
    if run is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
    run = observed_run(store, run)
    agents = store.agents(run_id)
    view = run_summary(run, agents)
    view.update(
        {
            "error": run.error,
            "warnings": run.warnings,
            "agentList": agent_details(store, run_id, agents) if details else [agent_view(a) for a in agents],
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
