"""The terminal progress card of a run (spec I, `formatWorkflowProgress`)."""

from __future__ import annotations

from typing import Any

from piflow.engine.budgets import DIMENSIONS
from piflow.engine.lifecycle import AGENT_SETTLED, AgentState, CheckpointState, RunState
from piflow.engine.views import AgentView, BudgetView, RunView


def _run_icon(state: str, spinner: str) -> str:
    if state == RunState.COMPLETED:
        return "✓"
    if state in (RunState.FAILED, RunState.STOPPED):
        return "✗"
    if state == RunState.BUDGET_EXHAUSTED:
        return "!"
    return spinner if state == RunState.RUNNING else "◆"


def _agent_icon(state: str, spinner: str) -> str:
    if state == AgentState.COMPLETED:
        return "✓"
    if state in (AgentState.FAILED, AgentState.CANCELLED):
        return "✗"
    return spinner if state == AgentState.RUNNING else "○"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _budget_lines(budget: BudgetView) -> list[str]:
    limits = budget.limits or {}
    if not any(limits.get(d) for d in DIMENSIONS):
        return []
    usage = budget.usage or {}
    version = budget.version
    events = [e for e in budget.events or [] if e.get("budgetVersion") == version]
    lines = [f"  Budget version {version}"]
    for dim in DIMENSIONS:
        limit = limits.get(dim)
        if not limit:
            continue
        used = usage.get(dim, 0)
        line = f"    {dim}: {_number(used)}"
        if "soft" in limit:
            line += f" soft={_number(limit['soft'])}"
        if "hard" in limit:
            line += f" hard={_number(limit['hard'])}"
        bound = limit.get("hard", limit.get("soft"))
        pct = 100.0 if not bound else used / bound * 100
        line += f" {pct:.1f}%"
        touching = [e["type"] for e in events if dim in (e.get("dimensions") or [])]
        if touching:
            line += f" state={touching[-1]}"
        lines.append(line)
    if events:
        lines.append("    events: " + ", ".join(f"{e['type']}@v{e['budgetVersion']}" for e in events))
    return lines


def format_progress(view: RunView, spinner: str = "◇") -> str:
    """Render a run view (see `views.run_view`) as the multi-line progress card."""
    agents = view.agents
    settled = sum(1 for a in agents if a.state in AGENT_SETTLED)
    summary = view.summary
    lines = [f"{_run_icon(summary.state, spinner)} Workflow: {summary.workflow_name} ({settled}/{len(agents)} done)"]
    if summary.phase:
        lines.append(f"  Phase: {summary.phase}")
    lines.extend(_budget_lines(view.budget))
    groups: dict[str, list[tuple[int, AgentView]]] = {}
    for index, agent in enumerate(agents, start=1):
        label = " > ".join(agent.structural_path or []) or "Agents"
        groups.setdefault(label, []).append((index, agent))
    grouped = len(groups) > 1 or (groups and "Agents" not in groups)
    for label, members in groups.items():
        if grouped:
            lines.append(f"  {label}")
        indent = "    " if grouped else "  "
        for index, agent in members:
            line = f"{indent}#{index} {_agent_icon(agent.state, spinner)} {agent.label} [{agent.state}]"
            if agent.state not in AGENT_SETTLED and agent.activity:
                line += f" {spinner} {agent.activity}"
            lines.append(line)
    for checkpoint in view.checkpoints:
        if checkpoint.state == CheckpointState.AWAITING:
            lines.append(f"  ● checkpoint {checkpoint.name}: {checkpoint.prompt}")
    return "\n".join(lines)
