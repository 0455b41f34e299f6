// Content of the Workflow Runs tree, as plain data: runs → pending approvals, budget, lanes
// (a pi-subagents run's `runs.lanes` boards → their stages), agents.
// The VS Code tree provider only maps these nodes to TreeItems.

import { compactCount, dollars, errorText, formatBudgetGauge, formatLimits, formatUsage, oneLineJson, shortId } from "./format";
import type { AgentView, Lane, LaneStage } from "./protocol";
import { isTerminal, needsAttention, type Run, type RunModel } from "./runModel";

export type RunNode =
  | { kind: "run"; runId: string }
  | { kind: "checkpoint"; runId: string; name: string }
  | { kind: "proposal"; runId: string; proposalId: string }
  | { kind: "budget"; runId: string }
  | { kind: "error"; runId: string }
  | { kind: "agent"; runId: string; agentId: string }
  | { kind: "lane"; runId: string; call: number; lane: string }
  | { kind: "stage"; runId: string; call: number; lane: string; stage: string };

export interface Icon {
  /** A codicon id, e.g. `pass` or `sync~spin`. */
  id: string;
  /** A theme color id, e.g. `testing.iconPassed`. */
  color?: string;
}

export interface NodeView {
  id: string;
  label: string;
  description: string;
  tooltip: string;
  icon: Icon;
  /** `when`-clause value: the kind first, then the actions it offers. */
  contextValue: string;
  expandable: boolean;
  expanded: boolean;
}

const AWAITING_ICON: Icon = { id: "bell-dot", color: "notificationsWarningIcon.foreground" };

const RUN_ICONS: Record<string, Icon> = {
  queued: { id: "clock" },
  running: { id: "sync~spin" },
  pausing: { id: "debug-pause" },
  paused: { id: "debug-pause" },
  awaiting_input: AWAITING_ICON,
  completed: { id: "pass", color: "testing.iconPassed" },
  failed: { id: "error", color: "testing.iconFailed" },
  stopped: { id: "circle-slash" },
  interrupted: { id: "debug-disconnect" },
  budget_exhausted: { id: "warning", color: "notificationsWarningIcon.foreground" },
};

const AGENT_ICONS: Record<string, Icon> = {
  queued: { id: "clock" },
  running: { id: "sync~spin" },
  waiting_for_child: { id: "type-hierarchy-sub" },
  paused: { id: "debug-pause" },
  retrying: { id: "refresh", color: "notificationsWarningIcon.foreground" },
  completed: { id: "pass", color: "testing.iconPassed" },
  failed: { id: "error", color: "testing.iconFailed" },
  cancelled: { id: "circle-slash" },
};

const STAGE_ICONS: Record<string, Icon> = {
  pending: { id: "clock" },
  running: { id: "sync~spin" },
  completed: { id: "pass", color: "testing.iconPassed" },
  complete: { id: "pass", color: "testing.iconPassed" },
  blocked: { id: "debug-stop", color: "notificationsWarningIcon.foreground" },
  failed: { id: "error", color: "testing.iconFailed" },
  stopped: { id: "circle-slash" },
  detached: { id: "debug-disconnect" },
  skipped: { id: "debug-step-over" },
};

const RESUMABLE = new Set(["paused", "interrupted", "budget_exhausted"]);

/** The run actions a state allows, as the lifecycle does (spec F.1). */
export function runActions(state: string): { pause: boolean; resume: boolean; stop: boolean } {
  return { pause: state === "running", resume: RESUMABLE.has(state), stop: !isTerminal(state) };
}

export function rootNodes(model: RunModel): RunNode[] {
  return model.all().map((run) => ({ kind: "run", runId: run.runId }));
}

export function childNodes(model: RunModel, node: RunNode): RunNode[] {
  const run = model.get(node.runId);
  if (node.kind === "lane" && run) {
    const found = findLane(run, node.call, node.lane);
    return (found?.stages ?? []).map((s): RunNode => ({ ...node, kind: "stage", stage: s.key }));
  }
  if (node.kind === "agent" && run) {
    return model.agentChildren(run, node.agentId).map((a): RunNode => ({ ...node, agentId: a.id }));
  }
  if (node.kind !== "run" || !run) return [];
  const { runId } = run;
  const children: RunNode[] = [
    ...run.checkpoints.map((c): RunNode => ({ kind: "checkpoint", runId, name: c.name })),
    ...run.proposals.map((p): RunNode => ({ kind: "proposal", runId, proposalId: p.proposalId })),
  ];
  if (run.error) children.push({ kind: "error", runId });
  if (run.budget && Object.keys(run.budget.limits).length > 0) children.push({ kind: "budget", runId });
  for (const board of run.lanes) {
    for (const lane of board.lanes) children.push({ kind: "lane", runId, call: board.call, lane: lane.key });
  }
  for (const agent of model.agentChildren(run, null)) children.push({ kind: "agent", runId, agentId: agent.id });
  return children;
}

/** How a node looks now; undefined once the run or its entry is gone. */
export function viewNode(model: RunModel, node: RunNode): NodeView | undefined {
  const run = model.get(node.runId);
  if (!run) return undefined;
  switch (node.kind) {
    case "run":
      return runView(run);
    case "checkpoint":
      return checkpointView(run, node.name);
    case "proposal":
      return proposalView(run, node.proposalId);
    case "budget":
      return budgetView(run);
    case "error":
      return errorView(run);
    case "agent":
      return agentView(run, model.agent(run.runId, node.agentId), run.children.has(node.agentId));
    case "lane":
      return laneView(run, node.call, findLane(run, node.call, node.lane));
    case "stage":
      return stageView(node, findLane(run, node.call, node.lane)?.stages.find((s) => s.key === node.stage));
  }
}

/** A node's identity, the same as its TreeItem id. */
export function nodeKey(node: RunNode): string {
  switch (node.kind) {
    case "run":
      return `run/${node.runId}`;
    case "checkpoint":
      return `run/${node.runId}/checkpoint/${node.name}`;
    case "proposal":
      return `run/${node.runId}/proposal/${node.proposalId}`;
    case "budget":
    case "error":
      return `run/${node.runId}/${node.kind}`;
    case "agent":
      return `run/${node.runId}/agent/${node.agentId}`;
    case "lane":
      return `run/${node.runId}/lanes/${node.call}/${node.lane}`;
    case "stage":
      return `run/${node.runId}/lanes/${node.call}/${node.lane}/${node.stage}`;
  }
}

function leaf(id: string, fields: Pick<NodeView, "label" | "description" | "tooltip" | "icon" | "contextValue">): NodeView {
  return { id, ...fields, expandable: false, expanded: false };
}

export function runDescription(run: Run): string {
  const parts = [run.state.replace(/_/g, " ")];
  if (run.phase) parts.push(run.phase);
  if (run.agentCounts.total > 0) parts.push(`${run.agentCounts.settled}/${run.agentCounts.total} agents`);
  if (run.tokens > 0) parts.push(`${compactCount(run.tokens)} tok`);
  if (run.costUsd > 0) parts.push(dollars(run.costUsd));
  return parts.join(" · ");
}

function runView(run: Run): NodeView {
  const actions = runActions(run.state);
  const flags = Object.entries(actions)
    .filter(([, allowed]) => allowed)
    .map(([action]) => action);
  const lines = [`${run.workflowName} (${run.runId})`, runDescription(run)];
  if (run.uri) lines.push(run.uri);
  if (run.state === "completed" && run.result !== undefined) lines.push(`Result: ${oneLineJson(run.result, 1000)}`);
  return {
    id: nodeKey({ kind: "run", runId: run.runId }),
    label: run.workflowName,
    description: `${shortId(run.runId)} · ${runDescription(run)}`,
    tooltip: lines.join("\n"),
    icon: needsAttention(run) ? AWAITING_ICON : (RUN_ICONS[run.state] ?? { id: "circle-outline" }),
    contextValue: ["run", ...flags].join(" "),
    // Always expandable: a run that starts without children gets them moments later, and VS Code
    // keeps the collapsible state an item had when it first appeared.
    expandable: true,
    expanded: !isTerminal(run.state),
  };
}

function checkpointView(run: Run, name: string): NodeView | undefined {
  const checkpoint = run.checkpoints.find((c) => c.name === name);
  if (!checkpoint) return undefined;
  const context = checkpoint.context === null ? "" : `\nContext: ${oneLineJson(checkpoint.context, 1000)}`;
  return leaf(nodeKey({ kind: "checkpoint", runId: run.runId, name }), {
    label: `checkpoint ${name}`,
    description: checkpoint.prompt,
    tooltip: `${checkpoint.prompt}${context}`,
    icon: { id: "question", color: "notificationsWarningIcon.foreground" },
    contextValue: "approval checkpoint",
  });
}

function proposalView(run: Run, proposalId: string): NodeView | undefined {
  const proposal = run.proposals.find((p) => p.proposalId === proposalId);
  if (!proposal) return undefined;
  return leaf(nodeKey({ kind: "proposal", runId: run.runId, proposalId }), {
    label: `budget ${shortId(proposalId)}`,
    description: formatLimits(proposal.proposed),
    tooltip: [
      `Budget adjustment ${proposalId}`,
      `Consumed: ${formatUsage(proposal.consumed)}`,
      `Previous: ${formatLimits(proposal.previous)}`,
      `Proposed: ${formatLimits(proposal.proposed)}`,
    ].join("\n"),
    icon: { id: "question", color: "notificationsWarningIcon.foreground" },
    contextValue: "approval proposal",
  });
}

function budgetView(run: Run): NodeView | undefined {
  if (!run.budget) return undefined;
  return leaf(nodeKey({ kind: "budget", runId: run.runId }), {
    label: "budget",
    description: formatBudgetGauge(run.budget.limits, run.budget.usage),
    tooltip: `Limits: ${formatLimits(run.budget.limits)}\nUsage: ${formatUsage(run.budget.usage)}`,
    icon: { id: "dashboard" },
    contextValue: "budget",
  });
}

function errorView(run: Run): NodeView | undefined {
  if (!run.error) return undefined;
  return leaf(nodeKey({ kind: "error", runId: run.runId }), {
    // An error the script's author wrote reads as written; the code would only say "internal".
    label: run.error.authored ? run.error.message : run.error.code,
    description: run.error.authored ? "" : run.error.message,
    tooltip: errorText(run.error),
    icon: { id: "error", color: "testing.iconFailed" },
    contextValue: "error",
  });
}

function agentDescription(agent: AgentView): string {
  const parts = [agent.state.replace(/_/g, " ")];
  if (agent.model) parts.push(agent.model);
  if (agent.tokens > 0) parts.push(`${compactCount(agent.tokens)} tok`);
  if (agent.costUsd > 0) parts.push(dollars(agent.costUsd));
  if (agent.activity && (agent.state === "running" || agent.state === "retrying")) parts.push(agent.activity);
  return parts.join(" · ");
}

/** An agent; one that started child agents (spec J.5) holds them, open. */
function agentView(run: Run, agent: AgentView | undefined, parent: boolean): NodeView | undefined {
  if (!agent) return undefined;
  const lines = [
    agent.label,
    `state: ${agent.state}`,
    `model: ${agent.model ?? "(default)"}`,
    `attempts: ${agent.attempts}`,
    `tokens: ${agent.tokens}`,
    `cost: ${dollars(agent.costUsd)}`,
  ];
  if (agent.role) lines.splice(2, 0, `role: ${agent.role}`);
  if (agent.error) lines.push(`error: ${errorText(agent.error)}`);
  return {
    id: nodeKey({ kind: "agent", runId: run.runId, agentId: agent.id }),
    label: agent.label,
    description: agentDescription(agent),
    tooltip: lines.join("\n"),
    icon: AGENT_ICONS[agent.state] ?? { id: "circle-outline" },
    contextValue: "agent",
    expandable: parent,
    expanded: parent,
  };
}

function findLane(run: Run, call: number, key: string): Lane | undefined {
  return run.lanes.find((board) => board.call === call)?.lanes.find((lane) => lane.key === key);
}

/** A lane of a `runs.lanes` board: its state, and where it stopped when blocked. */
function laneView(run: Run, call: number, lane: Lane | undefined): NodeView | undefined {
  if (!lane) return undefined;
  const done = lane.stages.filter((s) => s.state === "completed").length;
  const parts = [lane.state, `${done}/${lane.stages.length} stages`];
  if (lane.failedStage) parts.push(`at ${lane.failedStage}`);
  // A second `runs.lanes` call of the script names its lanes `#2`, …
  const suffix = run.lanes.length > 1 ? ` #${call}` : "";
  return {
    id: nodeKey({ kind: "lane", runId: run.runId, call, lane: lane.key }),
    label: `lane ${lane.key}${suffix}`,
    description: parts.join(" · "),
    tooltip: lane.stages.map((s) => `${s.key}: ${stageWords(s)}`).join("\n"),
    icon: STAGE_ICONS[lane.state] ?? { id: "circle-outline" },
    contextValue: "lane",
    expandable: true,
    expanded: lane.state !== "complete",
  };
}

/** `blocked (verdict blocked)`, `failed (boom)`, `skipped`. */
function stageWords(stage: LaneStage): string {
  if (stage.verdict) return `${stage.state} (verdict ${stage.verdict})`;
  if (stage.error && stage.state !== "completed" && stage.state !== "blocked") return `${stage.state} (${stage.error})`;
  return stage.state;
}

function stageView(node: RunNode & { kind: "stage" }, stage: LaneStage | undefined): NodeView | undefined {
  if (!stage) return undefined;
  return leaf(nodeKey(node), {
    label: stage.key,
    description: stageWords(stage),
    tooltip: [`${node.lane}.${stage.key}`, `state: ${stage.state}`, ...(stage.error ? [`error: ${stage.error}`] : [])].join("\n"),
    icon: STAGE_ICONS[stage.state] ?? { id: "circle-outline" },
    contextValue: "stage",
  });
}
