// Globals of pi-extensible-workflows 1.0.1 workflow scripts (*.workflow.js), for TypeScript and
// JavaScript tooling. Added to every TypeScript project that contains a workflow script by
// piflow-typescript-plugin; usable by hand with `/// <reference path="piflow-workflow.d.ts" />`.
// The script body runs as an async function: top-level `await` and `return` are allowed, the
// returned JSON value is the workflow's result.

declare namespace PiflowWorkflow {
  /** A value that survives the JSON boundary between the script and the host. */
  type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

  /** Reasoning effort of an agent; also the `:thinking` suffix of a model reference. */
  type ThinkingLevel = "off" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";

  /** The error codes of pi-extensible-workflows 1.0.1, as caught errors expose them in `code`. */
  type ErrorCode =
    | "CONFIG_ERROR" | "INVALID_SETTINGS" | "INVALID_SYNTAX" | "INVALID_METADATA" | "DUPLICATE_NAME"
    | "INVALID_SCHEMA" | "UNKNOWN_MODEL" | "UNKNOWN_TOOL" | "UNKNOWN_AGENT_TYPE" | "RUN_OWNED"
    | "REGISTRY_FROZEN" | "GLOBAL_COLLISION" | "MISSING_WORKFLOW" | "RPC_LIMIT_EXCEEDED" | "AGENT_TIMEOUT"
    | "AGENT_FAILED" | "RESULT_INVALID" | "CANCELLED" | "WORKER_UNRESPONSIVE" | "WORKTREE_FAILED"
    | "RESUME_INCOMPATIBLE" | "BUDGET_EXHAUSTED" | "INTERNAL_ERROR";

  /**
   * What a failed primitive rejects with. Rely on `code`: `e instanceof Error` is false.
   * @example try { await agent("…") } catch (e) { if (e.code === "AGENT_TIMEOUT") … }
   */
  interface WorkflowError {
    /** One of the workflow error codes. */
    code: ErrorCode;
    message: string;
    /** Journal path of the failed agent, for AGENT_TIMEOUT, AGENT_FAILED and RESULT_INVALID. */
    failedAt?: string;
  }

  /**
   * The accepted JSON Schema subset: a plain object with a shape (`type`, `$ref`, `anyOf`,
   * `oneOf`, `allOf`, `const` or `enum`); `required` an array of strings; `properties` an object.
   */
  interface JsonSchema {
    /** "object", "array", "string", "number", "integer", "boolean" or "null", or an array of them. */
    type?: string | string[];
    properties?: { [name: string]: JsonSchema };
    required?: string[];
    items?: JsonSchema;
    enum?: Json[];
    const?: Json;
    anyOf?: JsonSchema[];
    oneOf?: JsonSchema[];
    allOf?: JsonSchema[];
    $ref?: string;
    description?: string;
    [keyword: string]: unknown;
  }

  /**
   * Options of `agent()` and `conversation()`. A `role` agent takes its model, thinking and tools
   * from the role file, so `role` excludes `model`, `thinking` and `tools`.
   * Extensions that read more keys can add them: `declare namespace PiflowWorkflow { interface AgentOptions { myKey?: string } }`.
   */
  interface AgentOptions {
    /** Display name of the agent in progress views and journals; a non-empty string. Default: the role, else the model id. */
    label?: string;
    /**
     * Model reference: `provider/model[:thinking]`, a bare model id known to exactly one provider,
     * or a model alias from the workflow settings (`modelAliases`). Not allowed together with `role`.
     * @example "openai/gpt-5.1"  "anthropic/claude-sonnet-4:high"  "smart"
     */
    model?: string;
    /** Reasoning effort: off, minimal, low, medium, high, xhigh or max. Not allowed together with `role`. */
    thinking?: ThinkingLevel;
    /** Tools the agent may use, each one of the launching session's tools (e.g. "read", "grep", "bash"). Not allowed together with `role`. */
    tools?: string[];
    /** Agent role: a `roles/<role>.md` file that sets the model, thinking, tools and system prompt. */
    role?: string;
    /** JSON Schema of the result: the agent must submit a schema-valid value, which `agent()` resolves to. */
    outputSchema?: JsonSchema;
    /** Extra attempts after a failed one (integer ≥ 0, default 0). */
    retries?: number;
    /** Time limit of each attempt in milliseconds (integer ≥ 1), or null for none (the default). */
    timeoutMs?: number | null;
    /** Passed through untouched to agent setup hooks. */
    name?: string;
    /** Passed through untouched to agent setup hooks. */
    continueFrom?: Json;
    /** Passed through untouched to agent setup hooks. */
    advisor?: boolean;
  }

  /** Per-turn options of `conversation(...).run()`: only these two are allowed. */
  interface ConversationTurnOptions {
    /** Time limit of this turn's attempts in milliseconds, or null for none. */
    timeoutMs?: number | null;
    /** Extra attempts for this turn after a failed one (integer ≥ 0). */
    retries?: number;
  }

  /** A named multi-turn agent session; each turn continues the transcript of the last successful one. */
  interface Conversation {
    /**
     * Sends the next turn and resolves to the agent's answer. Turns must not overlap: await each one.
     * @param prompt The message of this turn.
     * @param turnOptions `timeoutMs` and `retries` for this turn only.
     */
    readonly run: <T = any>(prompt: string, turnOptions?: ConversationTurnOptions) => Promise<T>;
  }

  /** The question of a `checkpoint()`: only these three keys are allowed. */
  interface CheckpointRequest {
    /** Stable name of the approval; repeated names become `name#2`, `name#3`, … */
    name: string;
    /** The question shown to the approver (at most 1024 UTF-8 bytes). */
    prompt: string;
    /** JSON shown with the question (required, null allowed; at most 4096 bytes serialised). */
    context: Json;
  }
}

/**
 * Runs one agent and resolves to its final answer: the last assistant message's text, or the
 * schema-validated value when `outputSchema` is set. Call it directly (`agent(...)`), never through an alias.
 * Rejects with `{code, message, failedAt}` on AGENT_TIMEOUT, AGENT_FAILED or RESULT_INVALID.
 * @param prompt The task of the agent.
 * @param options label, model, thinking, tools, role, outputSchema, retries, timeoutMs.
 * @example const review = await agent("Review the diff.", { role: "reviewer", label: "review" });
 */
declare function agent<T = any>(prompt: string, options?: PiflowWorkflow.AgentOptions): Promise<T>;

/**
 * Opens a named conversation: an agent session that keeps its transcript across `run()` turns.
 * `timeoutMs` and `retries` become per-turn defaults; the other options are fixed for all turns.
 * @param name A non-blank string literal, stable across runs (it is part of the journal key).
 * @param options The agent options.
 * @example const chat = conversation("design"); const plan = await chat.run("Propose a plan.");
 */
declare function conversation(name: string, options?: PiflowWorkflow.AgentOptions): PiflowWorkflow.Conversation;

/**
 * Runs every task concurrently and resolves to their values keyed like `tasks`. If a task fails,
 * rejects with the first failure in record order once all have settled.
 * @param operationName A non-blank string literal naming the fan-out (part of each task's journal key).
 * @param tasks An object literal of functions, one per task, each called with no arguments.
 * @example const { api, ui } = await parallel("scan", { api: () => agent("Scan the API."), ui: () => agent("Scan the UI.") });
 */
declare function parallel<Tasks extends { [taskName: string]: () => unknown }>(
  operationName: string,
  tasks: Tasks,
): Promise<{ [K in keyof Tasks]: Awaited<ReturnType<Tasks[K]>> }>;

/**
 * Runs every item through the stages: items concurrently, the stages of one item in order, each
 * stage called with the previous stage's value (the first with the item's value). Resolves to
 * the last stage's values keyed like `items`.
 * @param operationName A non-blank string literal naming the pipeline.
 * @param items An object literal of the items' initial values.
 * @param stages An object literal of at least one stage function.
 * @example const fixed = await pipeline("fix", { api: "api bug" }, { patch: (bug) => agent(`Fix ${bug}`), review: (p) => agent(`Review ${p}`) });
 */
declare function pipeline<Items extends { [itemName: string]: unknown }>(
  operationName: string,
  items: Items,
  stages: { [stageName: string]: (value: any) => unknown },
): Promise<{ [K in keyof Items]: any }>;

/**
 * Runs the callback with its agents in a git worktree (created when the first agent starts) and
 * returns the callback's value unchanged. The same name means the same worktree.
 * @example const notes = await withWorktree("release", async () => agent("Bump the version."));
 */
declare function withWorktree<T>(callback: () => T): T;
/**
 * Runs the callback with its agents in the named git worktree and returns the callback's value unchanged.
 * @param name A non-blank name; the same name means the same worktree.
 */
declare function withWorktree<T>(name: string, callback: () => T): T;

/**
 * Asks a person for approval and resolves to "approved" or "rejected". The run waits (state
 * awaiting_input) until someone answers in the editor or with `piflow approve`.
 * @example if (await checkpoint({ name: "ship", prompt: "Ship it?", context: { version } }) !== "approved") return;
 */
declare function checkpoint(request: PiflowWorkflow.CheckpointRequest): Promise<"approved" | "rejected">;

/**
 * Fills a template: `{name}` is replaced by `values.name` (strings raw, anything else as indented
 * JSON); `{{` and `}}` are literal braces. Every placeholder needs a value and every value must be used.
 * @param template The text with `{placeholder}`s.
 * @param values A plain object of JSON values, one per placeholder.
 * @example prompt("Review {file} for {focus}.", { file, focus: "security" })
 */
declare function prompt(template: string, values: { [placeholder: string]: unknown }): string;

/**
 * Sets the run's current phase, shown in progress views; waits while the run is paused.
 * @param name The phase name (a string literal lists it in the workflow's phases).
 */
declare function phase(name: string): Promise<void>;

/**
 * Writes a line to the run's log (`Workflow <name>: <message>`); it is not sent to any model.
 * @param message The text, cut to 4096 bytes.
 */
declare function log(message: string): Promise<void>;

/** The run's arguments (`piflow run --args JSON`, or the tool call's `args`); null when none were given. */
declare const args: any;
