// What the editor knows about workflow runs, built from the server's notification stream and
// `piflow.listRuns` answers. Views (tree, status bar, approvals) read it and listen for changes.

import type {
  AgentView,
  BudgetApprovalRequest,
  BudgetProposal,
  BudgetView,
  CheckpointRequest,
  CheckpointView,
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
  /** Every agent, when a progress snapshot was seen; a listed run only has counts. */
  agents: AgentView[] | null;
  agentCounts: { total: number; settled: number };
  tokens: number;
  costUsd: number;
  budget: BudgetView | null;
  checkpoints: CheckpointView[];
  proposals: BudgetProposal[];
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

function workflowName(uri: string | null): string {
  const file = uri?.split("/").pop();
  return file ? decodeURIComponent(file).replace(/\.workflow\.js$|\.js$/, "") : "workflow";
}

type Listener = () => void;

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
    this.changed();
  }

  progress(event: RunProgress): void {
    this.applyProgress(event);
    this.changed();
  }

  /** Merge `piflow.showRun`: a run known only from a listing gets its agents, approvals and result. */
  detailed(detail: RunDetail): void {
    const run = this.applyProgress(detail);
    if (detail.result !== undefined && detail.result !== null) run.result = detail.result;
    run.error = detail.error;
    this.changed();
  }

  private applyProgress(event: RunProgress): Run {
    const run = this.upsert(event.runId, event.uri, event.workflowName);
    run.state = event.state;
    run.phase = event.phase;
    run.agents = event.agents;
    run.agentCounts = {
      total: event.agents.length,
      settled: event.agents.filter((a) => SETTLED_AGENT_STATES.has(a.state)).length,
    };
    run.budget = event.budget;
    run.tokens = event.budget?.usage.tokens ?? event.agents.reduce((sum, a) => sum + a.tokens, 0);
    run.costUsd = event.budget?.usage.costUsd ?? event.agents.reduce((sum, a) => sum + a.costUsd, 0);
    run.checkpoints = event.checkpoints;
    // A proposal waits while its run is budget-exhausted; a snapshot that lists none keeps ours then.
    run.proposals = event.proposals ?? (event.state === "budget_exhausted" ? run.proposals : []);
    return run;
  }

  checkpoint(event: CheckpointRequest): void {
    const run = this.upsert(event.runId, event.uri, null);
    if (!run.checkpoints.some((c) => c.name === event.name)) {
      run.checkpoints = [...run.checkpoints, { name: event.name, prompt: event.prompt, context: event.context }];
    }
    this.changed();
  }

  budgetApproval(event: BudgetApprovalRequest): void {
    const run = this.upsert(event.runId, null, null);
    if (!run.proposals.some((p) => p.proposalId === event.proposal.proposalId)) {
      run.proposals = [...run.proposals, event.proposal];
    }
    this.changed();
  }

  finished(event: RunFinished): void {
    const run = this.upsert(event.runId, event.uri, null);
    run.state = event.state;
    run.result = event.result;
    run.error = event.error;
    run.checkpoints = [];
    if (isTerminal(event.state)) run.proposals = [];
    this.changed();
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
    this.changed();
  }

  answeredProposal(runId: string, proposalId: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    run.proposals = run.proposals.filter((p) => p.proposalId !== proposalId);
    this.changed();
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
        agentCounts: { total: 0, settled: 0 },
        tokens: 0,
        costUsd: 0,
        budget: null,
        checkpoints: [],
        proposals: [],
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

  private changed(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
