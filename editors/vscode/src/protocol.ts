// The custom protocol of `piflow serve` (docs/protocol.md): method names, payload shapes, and
// tolerant decoders, so a payload that lacks a field degrades one view instead of the extension.

export const Notification = {
  runStarted: "piflow/runStarted",
  runProgress: "piflow/runProgress",
  checkpoint: "piflow/checkpoint",
  budgetApproval: "piflow/budgetApproval",
  runFinished: "piflow/runFinished",
  log: "piflow/log",
} as const;

/** Server-side commands (`workspace/executeCommand`); each takes one JSON object argument. */
export const ServerCommand = {
  run: "piflow.run",
  /** The `▶ Run with args…` lens: a plugin asks for the args itself, then sends `piflow.run`. */
  runWithArgs: "piflow.runWithArgs",
  resume: "piflow.resume",
  pause: "piflow.pause",
  stop: "piflow.stop",
  respond: "piflow.respond",
  listRuns: "piflow.listRuns",
  showRun: "piflow.showRun",
  /** One agent with its whole output (`{runId, agentId}`). */
  showAgent: "piflow.showAgent",
  /** The disabled `▶ Run (fix N errors first)` lens; handled in the editor (the Problems panel). */
  showErrors: "piflow.showErrors",
} as const;

/** Commands that launch work: refused in an untrusted workspace. */
export const LAUNCHING_COMMANDS: readonly string[] = [ServerCommand.run, ServerCommand.runWithArgs, ServerCommand.resume];

/** The `uri` of a lens command's one argument object. */
export function commandUri(args: readonly unknown[]): string | undefined {
  return text(record(args[0])?.uri) ?? undefined;
}

export interface WorkflowFailure {
  code: string;
  message: string;
  /** The script's author wrote `message` (`throw new Error("…")`): shown as written, without the code. */
  authored: boolean;
}

export interface AgentView {
  id: string;
  label: string;
  role: string | null;
  model: string | null;
  state: string;
  attempts: number;
  tokens: number;
  costUsd: number;
  activity: string | null;
  /** The agent that started this one as its child (spec J.5); null for a script's own agent. */
  parentId: string | null;
  error: WorkflowFailure | null;
}

export interface Limit {
  soft?: number;
  hard?: number;
}

export interface BudgetView {
  limits: Record<string, Limit>;
  usage: Record<string, number>;
}

export interface CheckpointView {
  name: string;
  prompt: string;
  context: unknown;
}

export interface BudgetProposal {
  proposalId: string;
  consumed: Record<string, number>;
  previous: Record<string, Limit>;
  proposed: Record<string, Limit>;
}

export interface RunStarted {
  runId: string;
  uri: string | null;
  workflowName: string | null;
}

/** How many agents a whole run has, and how many of them settled (completed, failed or cancelled). */
export interface AgentCounts {
  total: number;
  settled: number;
}

export interface RunProgress {
  runId: string;
  uri: string | null;
  workflowName: string | null;
  state: string;
  phase: string | null;
  /** Every agent when `reset`; otherwise only those whose progress changed since the last message. */
  agents: AgentView[];
  /** Counts of the whole run; null when the message carries none (a snapshot of an older server). */
  agentCounts: AgentCounts | null;
  /** True when `agents` lists every agent of the run (a missing `reset` means a full snapshot). */
  reset: boolean;
  budget: BudgetView | null;
  checkpoints: CheckpointView[];
  /** Pending budget proposals, when the snapshot lists them. */
  proposals: BudgetProposal[] | null;
  /** A pi-subagents run's lane boards (whole), when the message carries them; null otherwise. */
  lanes: LaneBoard[] | null;
}

/** A stage of a `runs.lanes` lane: pending, running, completed, blocked, failed, stopped, detached or skipped. */
export interface LaneStage {
  key: string;
  state: string;
  verdict: string | null;
  error: string | null;
}

/** A lane: running, complete or blocked (at `failedStage`). */
export interface Lane {
  key: string;
  state: string;
  failedStage: string | null;
  stages: LaneStage[];
}

/** The board of the script's `call`-th `runs.lanes`. */
export interface LaneBoard {
  call: number;
  lanes: Lane[];
}

export interface CheckpointRequest extends CheckpointView {
  runId: string;
  uri: string | null;
}

export interface BudgetApprovalRequest {
  runId: string;
  proposal: BudgetProposal;
}

export interface RunFinished {
  runId: string;
  uri: string | null;
  state: string;
  result: unknown;
  error: WorkflowFailure | null;
}

export interface RunLog {
  runId: string;
  message: string;
}

/** One attempt of an agent, as `piflow.showRun` lists them. */
export interface AttemptDetail {
  number: number;
  state: string;
  error: WorkflowFailure | null;
  transcriptPath: string | null;
  tokens: number;
  costUsd: number;
}

/** An agent as `piflow.showRun` / `piflow.showAgent` describe it: the progress view and what it produced. */
export interface AgentDetail extends AgentView {
  /** One line of the output, at most 200 characters. */
  outputPreview: string | null;
  /** The full output; absent (`hasOutput` false) when it was left out for size or there is none yet. */
  output: unknown;
  hasOutput: boolean;
  outputTruncated: boolean;
  transcriptPath: string | null;
  attemptList: AttemptDetail[];
  /** The call's journal path, e.g. `agent/callsite%3A36%3A105/occurrence%3A1`. */
  journalPath: string | null;
}

/** Everything `piflow.showRun` says about a run. */
export interface RunDetail extends RunProgress {
  agents: AgentDetail[];
  result: unknown;
  error: WorkflowFailure | null;
  tokens: number;
  costUsd: number;
}

/** One line of `piflow.listRuns`. */
export interface RunSummary {
  runId: string;
  uri: string | null;
  workflowName: string | null;
  state: string;
  phase: string | null;
  agents: AgentCounts;
  tokens: number;
  costUsd: number;
}

type Json = Record<string, unknown>;

function record(value: unknown): Json | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function text(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

/** A name: an empty string counts as none. */
function nonEmpty(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function numbers(value: unknown): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, item] of Object.entries(record(value) ?? {})) {
    if (typeof item === "number") out[key] = item;
  }
  return out;
}

function limits(value: unknown): Record<string, Limit> {
  const out: Record<string, Limit> = {};
  for (const [key, item] of Object.entries(record(value) ?? {})) {
    const limit = record(item);
    if (!limit) continue;
    const decoded: Limit = {};
    if (typeof limit.soft === "number") decoded.soft = limit.soft;
    if (typeof limit.hard === "number") decoded.hard = limit.hard;
    out[key] = decoded;
  }
  return out;
}

/** A run id, and the `uri` the server gives (or a file URI built from `scriptPath`). */
function identity(params: unknown): { body: Json; runId: string; uri: string | null } | undefined {
  const body = record(params);
  const runId = text(body?.runId);
  if (!body || !runId) return undefined;
  const scriptPath = text(body.scriptPath);
  const uri = text(body.uri) ?? (scriptPath ? fileUri(scriptPath) : null);
  return { body, runId, uri };
}

function fileUri(path: string): string {
  const slashed = path.replace(/\\/g, "/");
  return "file://" + (slashed.startsWith("/") ? "" : "/") + encodeURI(slashed);
}

function failure(value: unknown): WorkflowFailure | null {
  const body = record(value);
  if (!body) return null;
  return { code: text(body.code) ?? "ERROR", message: text(body.message) ?? "", authored: body.authored === true };
}

function agent(value: unknown): AgentView | undefined {
  const body = record(value);
  const id = text(body?.id);
  if (!body || id === null) return undefined;
  return {
    id,
    label: text(body.label) ?? text(body.name) ?? id,
    role: text(body.role),
    model: text(body.model),
    state: text(body.state) ?? "queued",
    attempts: count(body.attempts),
    tokens: count(body.tokens),
    costUsd: count(body.costUsd),
    activity: text(body.activity),
    parentId: text(body.parentId),
    error: failure(body.error),
  };
}

function attempt(value: unknown): AttemptDetail | undefined {
  const body = record(value);
  if (!body || typeof body.number !== "number") return undefined;
  return {
    number: body.number,
    state: text(body.state) ?? "unknown",
    error: failure(body.error),
    transcriptPath: nonEmpty(body.transcriptPath),
    tokens: count(body.tokens),
    costUsd: count(body.costUsd),
  };
}

export function decodeAgentDetail(value: unknown): AgentDetail | undefined {
  const view = agent(value);
  const body = record(value);
  if (!view || !body) return undefined;
  return {
    ...view,
    outputPreview: text(body.outputPreview),
    output: body.output,
    // A `null` output with no preview is no output yet (an agent still running, or failed).
    hasOutput: "output" in body && (body.output !== null || body.outputPreview != null),
    outputTruncated: body.outputTruncated === true,
    transcriptPath: nonEmpty(body.transcriptPath),
    attemptList: defined(list(body.attemptList).map(attempt)),
    journalPath: nonEmpty(body.journalPath),
  };
}

function checkpoint(value: unknown): CheckpointView | undefined {
  const body = record(value);
  const name = text(body?.name);
  if (!body || name === null) return undefined;
  return { name, prompt: text(body.prompt) ?? "", context: body.context ?? null };
}

function proposal(value: unknown): BudgetProposal | undefined {
  const body = record(value);
  const proposalId = text(body?.proposalId);
  if (!body || proposalId === null) return undefined;
  return {
    proposalId,
    consumed: numbers(body.consumed),
    previous: limits(body.previous),
    proposed: limits(body.proposed),
  };
}

function counts(value: unknown): AgentCounts | null {
  const body = record(value);
  return body ? { total: count(body.total), settled: count(body.settled) } : null;
}

function defined<T>(items: (T | undefined)[]): T[] {
  return items.filter((item): item is T => item !== undefined);
}

/** An entry is pending when it carries no state or says so (snapshots may list answered ones too). */
function pending(value: unknown, state: string): boolean {
  const current = record(value)?.state;
  return current === undefined || current === state;
}

function laneStage(value: unknown): LaneStage | undefined {
  const body = record(value);
  const key = text(body?.key);
  if (!body || key === null) return undefined;
  return { key, state: text(body.state) ?? "pending", verdict: text(body.verdict), error: text(body.error) };
}

function lane(value: unknown): Lane | undefined {
  const body = record(value);
  const key = text(body?.key);
  if (!body || key === null) return undefined;
  return {
    key,
    state: text(body.state) ?? "running",
    failedStage: text(body.failedStage),
    stages: defined(list(body.stages).map(laneStage)),
  };
}

/** Lane boards: `piflow/runProgress` carries them as `lanes`, `piflow.showRun` under `subagents`. */
function laneBoards(body: Json): LaneBoard[] | null {
  const boards = Array.isArray(body.lanes) ? body.lanes : record(body.subagents)?.lanes;
  if (!Array.isArray(boards)) return null;
  return defined(
    boards.map((value): LaneBoard | undefined => {
      const board = record(value);
      if (!board || typeof board.call !== "number") return undefined;
      return { call: board.call, lanes: defined(list(board.lanes).map(lane)) };
    }),
  );
}

export function decodeRunStarted(params: unknown): RunStarted | undefined {
  const id = identity(params);
  return id && { runId: id.runId, uri: id.uri, workflowName: nonEmpty(id.body.workflowName) };
}

export function decodeRunProgress(params: unknown): RunProgress | undefined {
  const id = identity(params);
  if (!id) return undefined;
  const { body } = id;
  const budget = record(body.budget);
  return {
    runId: id.runId,
    uri: id.uri,
    workflowName: nonEmpty(body.workflowName),
    state: text(body.state) ?? "running",
    phase: text(body.phase),
    // A snapshot of `piflow.showRun` counts agents under `agents` and lists them under `agentList`.
    agents: defined(list(Array.isArray(body.agents) ? body.agents : body.agentList).map(agent)),
    agentCounts: counts(body.agentCounts) ?? counts(body.agents),
    reset: body.reset !== false,
    budget: budget ? { limits: limits(budget.limits), usage: numbers(budget.usage) } : null,
    checkpoints: defined(list(body.checkpoints).filter((c) => pending(c, "awaiting")).map(checkpoint)),
    proposals: Array.isArray(body.proposals)
      ? defined(body.proposals.filter((p) => pending(p, "pending")).map(proposal))
      : null,
    lanes: laneBoards(body),
  };
}

/** `piflow.showRun`'s snapshot; undefined when it names no run. */
export function decodeRunDetail(result: unknown): RunDetail | undefined {
  const progress = decodeRunProgress(result);
  const body = record(result);
  if (!progress || !body) return undefined;
  const agents = defined(list(Array.isArray(body.agents) ? body.agents : body.agentList).map(decodeAgentDetail));
  return {
    ...progress,
    agents,
    result: body.result,
    error: failure(body.error),
    tokens: count(body.tokens),
    costUsd: count(body.costUsd),
  };
}

export function decodeCheckpoint(params: unknown): CheckpointRequest | undefined {
  const id = identity(params);
  const view = checkpoint(params);
  return id && view && { runId: id.runId, uri: id.uri, ...view };
}

export function decodeBudgetApproval(params: unknown): BudgetApprovalRequest | undefined {
  const id = identity(params);
  const view = proposal(params);
  return id && view && { runId: id.runId, proposal: view };
}

export function decodeRunFinished(params: unknown): RunFinished | undefined {
  const id = identity(params);
  if (!id) return undefined;
  return {
    runId: id.runId,
    uri: id.uri,
    state: text(id.body.state) ?? "completed",
    result: id.body.result,
    error: failure(id.body.error),
  };
}

export function decodeRunLog(params: unknown): RunLog | undefined {
  const id = identity(params);
  return id && { runId: id.runId, message: text(id.body.message) ?? "" };
}

function decodeRunSummary(value: unknown): RunSummary | undefined {
  const id = identity(value);
  if (!id) return undefined;
  const { body } = id;
  return {
    runId: id.runId,
    uri: id.uri,
    workflowName: nonEmpty(body.workflowName),
    state: text(body.state) ?? "queued",
    phase: text(body.phase),
    agents: counts(body.agents) ?? { total: 0, settled: 0 },
    tokens: count(body.tokens),
    costUsd: count(body.costUsd),
  };
}

/** `piflow.listRuns` answers a list of runs, or an object holding one under `runs`. */
export function decodeRunList(result: unknown): RunSummary[] {
  const runs = Array.isArray(result) ? result : list(record(result)?.runs);
  return defined(runs.map(decodeRunSummary));
}

/** `piflow.run` answers `{runId}`. */
export function decodeRunId(result: unknown): string | undefined {
  return text(record(result)?.runId) ?? undefined;
}
