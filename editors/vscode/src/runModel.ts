// What the editor knows about workflow runs, built from the server's notification stream and
// `piflow.listRuns` answers. Views (tree, status bar, approvals) read it and listen for changes.

import type {
  AgentCounts,
  AgentView,
  BudgetApprovalRequest,
  BudgetProposal,
  BudgetView,
  CheckpointRequest,
  CheckpointView,
  LaneBoard,
  RunFinished,
  RunDetail,
  RunProgress,
  RunStarted,
  RunSummary,
  WorkflowFailure,
} from "./protocol";

export interface Run {
  runId: string;
  uri: string | null;
  workflowName: string;
  state: string;
  phase: string | null;
  /**
   * Every agent, in order of first sight, once a full snapshot was seen; null while only counts
   * are known (a listed run, or one whose deltas came before any snapshot).
   */
  agents: AgentView[] | null;
  /** Position of each agent in `agents`, so a delta is merged in O(changed agents). */
  agentIndex: Map<string, number>;
  /** The ids of each parent's child agents (spec J.5), in order of first sight. */
  children: Map<string, string[]>;
  agentCounts: AgentCounts;
  /** Settled agents, tokens and cost summed over `agents`: the totals when a message carries none. */
  tally: Tally;
  /** Bumped on every change of the run: views compare it instead of the run's content. */
  revision: number;
  tokens: number;
  costUsd: number;
  budget: BudgetView | null;
  checkpoints: CheckpointView[];
  proposals: BudgetProposal[];
  /** A pi-subagents run's `runs.lanes` boards, as the last message that carried them. */
  lanes: LaneBoard[];
  result: unknown;
  error: WorkflowFailure | null;
  /** Order of first sight: newer runs come first among runs of equal attention. */
  seen: number;
}

/** Which runs need a person first (the reference's run picker order). */
const ATTENTION_ORDER: readonly string[] = [
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
];

const SETTLED_AGENT_STATES = new Set(["completed", "failed", "cancelled"]);
const TERMINAL_STATES = new Set(["completed", "failed", "stopped"]);

export function isTerminal(state: string): boolean {
  return TERMINAL_STATES.has(state);
}

/** A run needs a person when it waits for an answer. */
export function needsAttention(run: Run): boolean {
  return run.state === "awaiting_input" || run.checkpoints.length > 0 || run.proposals.length > 0;
}

function attention(run: Run): number {
  if (needsAttention(run)) return 0;
  const rank = ATTENTION_ORDER.indexOf(run.state);
  return rank < 0 ? ATTENTION_ORDER.length : rank;
}

/** What a run shows besides its agents' progress and totals: a change is shown at once. */
function summaryKey(run: Run): string {
  const proposals = run.proposals.map((p) => p.proposalId).join(",");
  const checkpoints = run.checkpoints.map((c) => c.name).join(",");
  const limits = run.budget ? Object.keys(run.budget.limits).length : -1;
  const lanes = run.lanes
    .map((b) => b.lanes.map((l) => `${l.key}:${l.state}:${l.stages.map((s) => s.state).join(",")}`).join(";"))
    .join("/");
  return [run.state, run.phase, run.error?.code, checkpoints, proposals, limits, lanes].join("|");
}

function workflowName(uri: string | null): string {
  const file = uri?.split("/").pop();
  return file ? decodeURIComponent(file).replace(/\.workflow\.js$|\.js$/, "") : "workflow";
}

interface Tally {
  settled: number;
  tokens: number;
  costUsd: number;
}

/** Adds (`sign` 1) or removes (`sign` -1) one agent's share of a run's tally. */
function count(tally: Tally, agent: AgentView, sign: 1 | -1): void {
  if (SETTLED_AGENT_STATES.has(agent.state)) tally.settled += sign;
  tally.tokens += sign * agent.tokens;
  tally.costUsd += sign * agent.costUsd;
}

function adopt(run: Run, parentId: string | null, agentId: string): void {
  if (parentId === null) return;
  const siblings = run.children.get(parentId);
  if (siblings) siblings.push(agentId);
  else run.children.set(parentId, [agentId]);
}

function disown(run: Run, parentId: string | null, agentId: string): void {
  const siblings = parentId === null ? undefined : run.children.get(parentId);
  const index = siblings ? siblings.indexOf(agentId) : -1;
  if (index < 0) return;
  siblings?.splice(index, 1);
  if (siblings?.length === 0 && parentId !== null) run.children.delete(parentId);
}

/**
 * What changed: one run (undefined: any run, e.g. after a listing). `agents` lists the agents
 * whose progress alone changed, each already shown; `"all"` when the run's agent list itself
 * changed. `run` is true when more than progress changed (state, phase, approvals, result), which
 * views show at once rather than batched.
 */
export interface RunChange {
  runId: string;
  agents: readonly string[] | "all";
  run: boolean;
}

type Listener = (change: RunChange | undefined) => void;

export class RunModel {
  private readonly runs = new Map<string, Run>();
  private readonly listeners = new Set<Listener>();
  private sequence = 0;

  onDidChange(listener: Listener): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  get(runId: string): Run | undefined {
    return this.runs.get(runId);
  }

  /** Runs in attention order, newest first among equals. */
  all(): Run[] {
    return [...this.runs.values()].sort((a, b) => attention(a) - attention(b) || b.seen - a.seen);
  }

  started(event: RunStarted): void {
    const run = this.upsert(event.runId, event.uri, event.workflowName);
    if (run.state === "queued" || isTerminal(run.state)) run.state = "running";
    this.changed({ runId: run.runId, agents: [], run: true });
  }

  /**
   * Merges a `piflow/runProgress`: a full snapshot (`reset`) replaces the run's agents, a delta
   * upserts the agents it lists. Answers false when the delta cannot be merged because no full
   * list of the run is known (messages were missed): the caller fetches `piflow.showRun`.
   */
  progress(event: RunProgress): boolean {
    const before = this.runs.get(event.runId);
    const summary = before && summaryKey(before);
    const { run, agents } = this.applyProgress(event);
    this.changed({ runId: run.runId, agents, run: summary !== summaryKey(run) });
    return event.reset || run.agents !== null;
  }

  /** Merge `piflow.showRun`: a run known only from a listing gets its agents, approvals and result. */
  detailed(detail: RunDetail): void {
    const { run } = this.applyProgress(detail);
    if (detail.result !== undefined && detail.result !== null) run.result = detail.result;
    run.error = detail.error;
    this.changed({ runId: run.runId, agents: "all", run: true });
  }

  /** One agent of a run, found in O(1). */
  agent(runId: string, agentId: string): AgentView | undefined {
    const run = this.runs.get(runId);
    const index = run?.agentIndex.get(agentId);
    return index === undefined ? undefined : run?.agents?.[index];
  }

  private applyProgress(event: RunProgress): { run: Run; agents: RunChange["agents"] } {
    const run = this.upsert(event.runId, event.uri, event.workflowName);
    run.state = event.state;
    run.phase = event.phase;
    let agents: RunChange["agents"] = "all";
    if (event.reset) {
      run.agents = [];
      run.agentIndex = new Map();
      run.children = new Map();
      run.tally = { settled: 0, tokens: 0, costUsd: 0 };
      this.upsertAgents(run, run.agents, event.agents);
    } else if (run.agents) {
      agents = this.upsertAgents(run, run.agents, event.agents);
    }
    // A delta before any full list leaves the agents unknown; its counts still hold.
    const tally = run.agents ? run.tally : null;
    const listed = run.agents && { total: run.agents.length, settled: run.tally.settled };
    run.agentCounts = event.agentCounts ?? listed ?? run.agentCounts;
    run.budget = event.budget;
    run.tokens = event.budget?.usage.tokens ?? tally?.tokens ?? run.tokens;
    run.costUsd = event.budget?.usage.costUsd ?? tally?.costUsd ?? run.costUsd;
    run.checkpoints = event.checkpoints;
    // A proposal waits while its run is budget-exhausted; a snapshot that lists none keeps ours then.
    run.proposals = event.proposals ?? (event.state === "budget_exhausted" ? run.proposals : []);
    if (event.lanes !== null) run.lanes = event.lanes;
    return { run, agents };
  }

  /**
   * Upserts by id; answers the ids of agents already listed, or "all" when the tree's shape changed
   * (an agent is new, or moved to another parent).
   */
  private upsertAgents(run: Run, list: AgentView[], agents: AgentView[]): RunChange["agents"] {
    const updated: string[] = [];
    let reshaped = false;
    for (const agent of agents) {
      const index = run.agentIndex.get(agent.id);
      const previous = index === undefined ? undefined : list[index];
      if (index === undefined || previous === undefined) {
        run.agentIndex.set(agent.id, list.length);
        list.push(agent);
        adopt(run, agent.parentId, agent.id);
        reshaped = true;
      } else {
        count(run.tally, previous, -1);
        list[index] = agent;
        if (previous.parentId !== agent.parentId) {
          disown(run, previous.parentId, agent.id);
          adopt(run, agent.parentId, agent.id);
          reshaped = true;
        }
        updated.push(agent.id);
      }
      count(run.tally, agent, 1);
    }
    return reshaped ? "all" : updated;
  }

  /**
   * The agents shown under `parentId`: its children, or (null) the run's top level, which holds
   * the script's agents and any child whose parent is not known yet, until it is.
   */
  agentChildren(run: Run, parentId: string | null): AgentView[] {
    const agents = run.agents ?? [];
    if (parentId !== null) {
      return (run.children.get(parentId) ?? []).flatMap((id) => agents[run.agentIndex.get(id) ?? -1] ?? []);
    }
    return agents.filter((agent) => agent.parentId === null || !run.agentIndex.has(agent.parentId));
  }

  checkpoint(event: CheckpointRequest): void {
    const run = this.upsert(event.runId, event.uri, null);
    if (!run.checkpoints.some((c) => c.name === event.name)) {
      run.checkpoints = [...run.checkpoints, { name: event.name, prompt: event.prompt, context: event.context }];
    }
    this.changed({ runId: run.runId, agents: [], run: true });
  }

  budgetApproval(event: BudgetApprovalRequest): void {
    const run = this.upsert(event.runId, null, null);
    if (!run.proposals.some((p) => p.proposalId === event.proposal.proposalId)) {
      run.proposals = [...run.proposals, event.proposal];
    }
    this.changed({ runId: run.runId, agents: [], run: true });
  }

  finished(event: RunFinished): void {
    const run = this.upsert(event.runId, event.uri, null);
    run.state = event.state;
    run.result = event.result;
    run.error = event.error;
    run.checkpoints = [];
    if (isTerminal(event.state)) run.proposals = [];
    this.changed({ runId: run.runId, agents: [], run: true });
  }

  /** Merge `piflow.listRuns`: it knows runs launched elsewhere (CLI, another window). */
  listed(summaries: RunSummary[]): void {
    for (const summary of summaries) {
      const run = this.upsert(summary.runId, summary.uri, summary.workflowName);
      run.state = summary.state;
      run.phase = summary.phase;
      run.agentCounts = summary.agents;
      run.tokens = summary.tokens;
      run.costUsd = summary.costUsd;
      if (isTerminal(run.state)) {
        run.checkpoints = [];
        run.proposals = [];
      }
    }
    this.changed();
  }

  /** An answer was accepted: the prompt is no longer pending, before the next snapshot says so. */
  answeredCheckpoint(runId: string, name: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    run.checkpoints = run.checkpoints.filter((c) => c.name !== name);
    this.changed({ runId, agents: [], run: true });
  }

  answeredProposal(runId: string, proposalId: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    run.proposals = run.proposals.filter((p) => p.proposalId !== proposalId);
    this.changed({ runId, agents: [], run: true });
  }

  private upsert(runId: string, uri: string | null, name: string | null): Run {
    let run = this.runs.get(runId);
    if (!run) {
      run = {
        runId,
        uri,
        workflowName: name ?? workflowName(uri),
        state: "queued",
        phase: null,
        agents: null,
        agentIndex: new Map(),
        children: new Map(),
        agentCounts: { total: 0, settled: 0 },
        tally: { settled: 0, tokens: 0, costUsd: 0 },
        revision: 0,
        tokens: 0,
        costUsd: 0,
        budget: null,
        checkpoints: [],
        proposals: [],
        lanes: [],
        result: undefined,
        error: null,
        seen: this.sequence++,
      };
      this.runs.set(runId, run);
      return run;
    }
    if (uri && !run.uri) {
      run.uri = uri;
      if (!name && run.workflowName === "workflow") run.workflowName = workflowName(uri);
    }
    if (name) run.workflowName = name;
    return run;
  }

  private changed(change?: RunChange): void {
    if (change) {
      const run = this.runs.get(change.runId);
      if (run) run.revision++;
    } else {
      for (const run of this.runs.values()) run.revision++;
    }
    for (const listener of [...this.listeners]) listener(change);
  }
}
