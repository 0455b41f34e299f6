// Notification payloads as `piflow serve` puts them on the wire (src/piflow/server/protocol.py),
// for tests that feed the extension a run's stream.

export const RUN_ID = "3f2a9c41-7d0e-4b8a-9f61-2c5d8e7a1b90";
export const URI = "file:///work/review.workflow.js";

export function started(): unknown {
  return { runId: RUN_ID, uri: URI, workflowName: "review" };
}

export interface AgentWire {
  id: string;
  label: string;
  role: string | null;
  model: string | null;
  state: string;
  attempts: number;
  tokens: number;
  costUsd: number;
  activity: string | null;
  parentId?: string | null;
}

export function agentWire(id: string, state: string, fields: Partial<AgentWire> = {}): AgentWire {
  return {
    id,
    label: id,
    role: null,
    model: "openai/gpt-5-mini",
    state,
    attempts: state === "queued" ? 0 : 1,
    tokens: 0,
    costUsd: 0,
    activity: null,
    ...fields,
  };
}

export function progress(
  state: string,
  agents: AgentWire[],
  extra: { phase?: string; checkpoints?: unknown[]; limits?: Record<string, unknown>; usage?: Record<string, number> } = {},
): unknown {
  const tokens = agents.reduce((sum, a) => sum + a.tokens, 0);
  const costUsd = agents.reduce((sum, a) => sum + a.costUsd, 0);
  return {
    runId: RUN_ID,
    uri: URI,
    state,
    phase: extra.phase ?? null,
    agents,
    budget: {
      limits: extra.limits ?? {},
      usage: { tokens, costUsd, durationMs: 1200, agentLaunches: agents.length, ...extra.usage },
      events: [],
    },
    checkpoints: extra.checkpoints ?? [],
  };
}

export function checkpoint(name = "ship", prompt = "Ship?", context: unknown = null): unknown {
  return { runId: RUN_ID, uri: URI, name, prompt, context };
}

export function budgetApproval(proposalId = "9b1c7e52-0000-4000-8000-000000000001"): unknown {
  return {
    runId: RUN_ID,
    proposalId,
    consumed: { tokens: 2100, costUsd: 0.42, durationMs: 5000, agentLaunches: 3 },
    previous: { tokens: { hard: 2000 } },
    proposed: { tokens: { hard: 4000 } },
  };
}

export function finished(state: string, fields: { result?: unknown; error?: unknown } = {}): unknown {
  return { runId: RUN_ID, uri: URI, state, ...fields };
}

/** An agent of `piflow.showRun` with the output fields of the shared contract. */
export function agentDetailWire(id: string, state: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...agentWire(id, state),
    name: id,
    journalPath: "agent/callsite%3A36%3A105/occurrence%3A1",
    error: null,
    outputPreview: null,
    outputTruncated: false,
    transcriptPath: null,
    attemptList: [],
    ...fields,
  };
}

/** A `piflow.showRun` answer: counts under `agents`, the agents under `agentList`. */
export function showRun(state: string, agentList: Record<string, unknown>[], fields: Record<string, unknown> = {}): unknown {
  return {
    runId: RUN_ID,
    uri: URI,
    workflowName: "review",
    scriptPath: "/work/review.workflow.js",
    state,
    phase: "draft",
    agents: { total: agentList.length, settled: agentList.length },
    agentList,
    budget: { limits: {}, version: 1, usage: { tokens: 64, costUsd: 0, durationMs: 339, agentLaunches: 1 }, events: [] },
    checkpoints: [],
    proposals: [],
    costUsd: 0,
    tokens: 64,
    error: null,
    result: null,
    ...fields,
  };
}

/** A `piflow/runProgress` of the delta protocol: `agents` are the changed ones unless `reset`. */
export function delta(
  state: string,
  agents: AgentWire[],
  agentCounts: { total: number; settled: number },
  reset = false,
  usage: Record<string, number> = {},
): unknown {
  return {
    runId: RUN_ID,
    uri: URI,
    workflowName: "review",
    state,
    phase: null,
    agents,
    agentCounts,
    reset,
    budget: { limits: {}, usage: { tokens: 0, costUsd: 0, durationMs: 0, agentLaunches: agentCounts.total, ...usage }, events: [] },
    checkpoints: [],
  };
}
