// Globals of pi-subagents `workflowScript`s (the second dialect piflow runs), for TypeScript and
// JavaScript tooling. piflow-typescript-plugin adds this file to projects whose workflow scripts
// start with `// piflow: pi-subagents` or call `runs.*`. The script runs inside an async function:
// top-level `await` and `return` work; the returned JSON value is the workflow's result.

declare namespace PiSubagents {
  type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

  /** Parameters of one child run. `agent` is required unless `resume` is given. */
  interface RunParams {
    /** The agent definition to run (e.g. "reviewer", "worker"). Excludes `resume`. */
    agent?: string;
    /** The child's task; required (non-empty) with `resume`. */
    task?: string;
    /** Model reference `provider/id[:thinking]`. */
    model?: string;
    /** How the child's context starts. */
    context?: "fresh" | "fork" | "profile";
    /** Working directory, relative to the workflow's cwd. */
    cwd?: string;
    /** Whether the output is returned inline or only written to its file. */
    outputMode?: "inline" | "file-only";
    /** JSON Schema of the child's structured output (`structuredOutput` of the result). */
    outputSchema?: { [keyword: string]: unknown };
    /** Host command that gates the result; not with `acceptance` or `resume`. */
    gate?: string;
    /** Continue a retained child: its run id, or `{workflowRunId, key, latest: true}`. Excludes `agent` and `gate`. */
    resume?: string | { workflowRunId: string; key: string; latest: true };
    /** Run the child in its own git worktree. */
    worktree?: boolean;
    /** Tool-call budget of the child. */
    toolBudget?: { soft?: number; hard: number; block?: boolean };
    /** Display label. */
    label?: string;
    /** Display phase. */
    phase?: string;
    /** Output file of the child (relative paths land under the managed artifacts). */
    output?: string;
    acceptance?: Json;
    toolTimeoutMs?: number;
    timeoutMs?: number;
    skill?: string | string[];
    reads?: string[];
    progress?: Json;
    /** Return a receipt at once (`state: "running"`) instead of waiting for the child. */
    async?: boolean;
    agentContract?: Json;
    intercomBridge?: Json;
    fast?: boolean;
    /** Not with `resume`. */
    extensionBindings?: Json;
    /** Lane metadata (display only); `key` must equal the workflow key. */
    lane?: { version: 1; key: string; mode?: "mutation" | "review" | "scout" | "gate"; sourceRef?: string; claims?: string[]; outputPaths?: string[] };
  }

  /** One item of `runs.all`: the params plus the item's workflow key. */
  interface RunItem extends RunParams {
    /** 1–128 characters of `[A-Za-z0-9._-]`, starting with a letter or digit; unique per launch params. */
    key: string;
  }

  /** What a child run resolves to. */
  interface ChildResult {
    key: string;
    ok: boolean;
    /** The child's final output text. */
    output: string;
    error?: string;
    agent?: string;
    runId?: string;
    structuredOutput?: any;
    outputReference?: string;
    outputPathMapping?: { [key: string]: string };
    artifactPaths: string[];
    resumability: any;
    continuation: { runIds: string[] };
    requestedContext: string;
    resolvedContext: string;
    detached?: boolean;
    stopped?: boolean;
    lane?: any;
  }

  /** A lane of `runs.lanes`: stages run in order, later ones may `resume: "previous"`. */
  interface Lane {
    key: string;
    stages: Array<RunParams & { key: string; resume?: "previous" }>;
  }

  interface LaneBoard {
    key: string;
    state: "complete" | "blocked";
    failedStage?: string;
    stages: Array<{ key: string; state: "completed" | "blocked" | "failed" | "stopped" | "detached" | "skipped"; ok?: boolean; runId?: string; outputReference?: string; verdict?: string; error?: string }>;
  }

  /** A host command step of `runs.host` (only these keys; no `cwd`). */
  interface HostParams {
    kind: "command";
    /** Non-empty, at most 16384 bytes, no NUL; runs in the workflow's cwd. */
    command: string;
    /** Integer from 1 to 86400000. */
    timeoutMs: number;
    /** Relative log path without traversal. */
    output?: string;
    role?: "ci" | "gate";
    provider?: string;
  }

  interface HostResult {
    key: string;
    ok: boolean;
    state: "passed" | "failed" | "timed-out" | "stopped";
    exitCode: number | null;
    /** 4 KiB preview. */
    stdout: string;
    /** 4 KiB preview. */
    stderr: string;
    outputPath: string;
    durationMs: number;
    error?: string;
  }

  interface SteerOptions {
    mode?: "steer" | "follow_up" | "auto";
    /** Integer from 0 to 1000000. */
    index?: number;
    /** Positive integer. */
    ackTimeoutMs?: number;
  }

  interface SteerReceipt {
    key: string;
    state: "queued" | "delivered" | "missed" | "failed";
    requestId?: string;
    error?: string;
  }

  /** The frozen `runs` object. Every promise it returns must be awaited, returned or chained. */
  interface Runs {
    /**
     * Runs one child and resolves to its result; rejects with `Run '<key>' failed: …` when it fails.
     * @param key The workflow key: 1–128 characters of `[A-Za-z0-9._-]`, starting with a letter or digit.
     */
    run(key: string, params: RunParams): Promise<ChildResult>;
    /** Runs children concurrently; resolves to an ordered array (failed children are `ok: false` entries). */
    all(items: RunItem[]): Promise<ChildResult[]>;
    /** Runs lanes of stages (at most 32 lanes, 16 stages each, 64 in total). */
    lanes(lanes: Lane[]): Promise<LaneBoard[]>;
    /** Runs a host command step. */
    host(key: string, params: HostParams): Promise<HostResult>;
    /** Sends a message to a child already launched under `key`. */
    steer(key: string, message: string, options?: SteerOptions): Promise<SteerReceipt>;
    /** Resolves to a child's result by key or run id. */
    status(keyOrRunId: string): Promise<ChildResult>;
    /** Formats a result as `[run <key>; id=<8 chars>]`. */
    ref(result: ChildResult): string;
    /** Formats results one ref per line. */
    refs(results: ChildResult[]): string;
  }
}

/** Launches and manages child agent runs: `runs.run`, `runs.all`, `runs.lanes`, `runs.host`, `runs.steer`, `runs.status`. */
declare const runs: PiSubagents.Runs;

/** Records a JSON value in the workflow's `status.workflow.emits`. */
declare function emit(value: PiSubagents.Json): void;

/** Mission state (only when the workflow has a mission; capped at 256 KiB). */
declare const state: {
  get(key: string): Promise<any>;
  set(key: string, value: PiSubagents.Json): Promise<void>;
};
