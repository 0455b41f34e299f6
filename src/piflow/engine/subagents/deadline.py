"""The workflow's `timeoutMs` (SUBAGENTS_SPEC A.1/C): one deadline for the whole run.

The deadline counts the run's running time as its budget clock does (`durationMs`: while running
or pausing), so time spent stopped, interrupted or waiting for `piflow resume` is not counted and a
resumed run gets only what is left. When it passes, the script and every running child are
cancelled and the run fails with the reference's message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun


def workflow_deadline(run: ActiveRun, scope: anyio.CancelScope) -> WorkflowError | None:
    """Give `scope` (an execution's) what is left of the run's `timeoutMs`; the error for when it passes."""
    timeout_ms = (run.snapshot.get("workflow") or {}).get("timeoutMs")
    if timeout_ms is None:
        return None
    spent_ms = run.budget.snapshot_usage()["durationMs"]
    scope.deadline = min(scope.deadline, anyio.current_time() + max(0, timeout_ms - spent_ms) / 1000)
    return WorkflowError("AGENT_TIMEOUT", f"Workflow script timed out after {timeout_ms}ms.")
