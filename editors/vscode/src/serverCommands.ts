// The server-side commands of `piflow serve`, with their argument objects built in one place.

import {
  decodeAgentDetail,
  decodeRunDetail,
  decodeRunId,
  decodeRunList,
  ServerCommand,
  type AgentDetail,
  type RunDetail,
  type RunSummary,
} from "./protocol";

/** Sends `workspace/executeCommand` with one JSON object as the argument. */
export type ExecuteCommand = (command: string, args: Record<string, unknown>) => Promise<unknown>;

/** Launch options of `piflow.run`; unset ones are left to the server's configuration. */
export interface RunOptions {
  args?: unknown;
  budget?: Record<string, unknown>;
  concurrency?: number;
  backend?: string;
  fixtures?: string;
}

export class ServerCommands {
  constructor(private readonly execute: ExecuteCommand) {}

  async run(uri: string, options: RunOptions = {}): Promise<string> {
    const result = await this.execute(ServerCommand.run, { uri, ...options });
    const runId = decodeRunId(result);
    if (!runId) throw new Error(`piflow.run answered without a run id: ${JSON.stringify(result)}`);
    return runId;
  }

  async resume(runId: string, budget?: Record<string, unknown>): Promise<void> {
    await this.execute(ServerCommand.resume, budget ? { runId, budget } : { runId });
  }

  async pause(runId: string): Promise<void> {
    await this.execute(ServerCommand.pause, { runId });
  }

  async stop(runId: string): Promise<void> {
    await this.execute(ServerCommand.stop, { runId });
  }

  async answerCheckpoint(runId: string, name: string, approved: boolean): Promise<void> {
    await this.execute(ServerCommand.respond, { runId, name, approved });
  }

  async answerProposal(runId: string, proposalId: string, approved: boolean): Promise<void> {
    await this.execute(ServerCommand.respond, { runId, proposalId, approved });
  }

  async listRuns(uri?: string): Promise<RunSummary[]> {
    return decodeRunList(await this.execute(ServerCommand.listRuns, uri ? { uri } : {}));
  }

  async showRun(runId: string): Promise<RunDetail> {
    const result = await this.execute(ServerCommand.showRun, { runId });
    const detail = decodeRunDetail(result);
    if (!detail) throw new Error(`piflow.showRun answered without a run: ${JSON.stringify(result)}`);
    return detail;
  }

  /** One agent with its whole output (the run's snapshot may carry only a preview). */
  async showAgent(runId: string, agentId: string): Promise<AgentDetail> {
    const result = await this.execute(ServerCommand.showAgent, { runId, agentId });
    const detail = decodeAgentDetail(result);
    if (!detail) throw new Error(`piflow.showAgent answered without an agent: ${JSON.stringify(result)}`);
    return detail;
  }
}

/** The `piflow.run.*` settings as VS Code returns them. */
export interface RunSettings {
  backend: string;
  fixtures: string;
  concurrency: number | null;
  budget: Record<string, unknown> | null;
}

export function runOptionsFromSettings(settings: RunSettings): RunOptions {
  const options: RunOptions = {};
  if (settings.backend) options.backend = settings.backend;
  if (settings.fixtures) options.fixtures = settings.fixtures;
  if (settings.concurrency !== null) options.concurrency = settings.concurrency;
  if (settings.budget !== null && Object.keys(settings.budget).length > 0) options.budget = settings.budget;
  return options;
}

export type Parsed = { ok: true; value: unknown } | { ok: false; message: string };

/** Parses the text of an input box as JSON; the message says what is wrong, for the input box. */
export function parseJson(textValue: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(textValue) as unknown };
  } catch (error) {
    return { ok: false, message: `Not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** A budget patch is a JSON object (spec H `validateBudgetPatch`; the server checks the rest). */
export function parseBudgetPatch(textValue: string): Parsed {
  const parsed = parseJson(textValue);
  if (parsed.ok && (typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value))) {
    return { ok: false, message: 'A budget patch is a JSON object, e.g. {"tokens":{"hard":200000}}' };
  }
  return parsed;
}
