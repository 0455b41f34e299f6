// The run view's text: a run's state, result or error, approvals, and every agent with its
// output, error, attempts and transcript, as Markdown. Plain data in, plain text and link
// positions out; runViewProvider.ts serves it as a read-only `piflow-run:` document.

import { compactCount, dollars, errorText, formatBudgetGauge, shortId } from "./format";
import type { AgentDetail, RunDetail } from "./protocol";

export const RUN_VIEW_SCHEME = "piflow-run";

/** What a `piflow-run:` document shows: a whole run, or the full output of one agent. */
export type RunViewTarget = { kind: "run"; runId: string } | { kind: "agent"; runId: string; agentId: string };

/** A clickable span of the text: a file (transcript, script) or another run view document. */
export interface RunViewLink {
  line: number;
  start: number;
  end: number;
  target: { kind: "file"; path: string } | { kind: "uri"; uri: string } | { kind: "view"; view: RunViewTarget; name: string };
}

export interface RenderedRun {
  text: string;
  links: RunViewLink[];
  /** The line of each agent's heading, to reveal it. */
  agentLines: Map<string, number>;
}

/** Path and query of a run view document (`piflow-run:/<path>?<query>`); the path names its tab. */
export function runViewLocation(target: RunViewTarget, name: string): { path: string; query: string } {
  const query = new URLSearchParams(
    target.kind === "run" ? { run: target.runId } : { run: target.runId, agent: target.agentId },
  ).toString();
  const file = target.kind === "run" ? `${name} ${shortId(target.runId)}.md` : `${name} output.md`;
  return { path: `/${file.replace(/[/\\]/g, "_")}`, query };
}

/** The target of a run view document, from its query; undefined for a query that names none. */
export function parseRunViewQuery(query: string): RunViewTarget | undefined {
  const params = new URLSearchParams(query);
  const runId = params.get("run");
  if (!runId) return undefined;
  const agentId = params.get("agent");
  return agentId ? { kind: "agent", runId, agentId } : { kind: "run", runId };
}

/** An agent's full output as Markdown: a string (prose, usually) as is, anything else as JSON. */
export function agentOutputText(agent: AgentDetail): string {
  if (!agent.hasOutput) return agent.outputPreview ?? "(no output)";
  return typeof agent.output === "string" ? agent.output : fenced(agent.output).join("\n");
}

function words(state: string): string {
  return state.replace(/_/g, " ");
}

function fenced(value: unknown): string[] {
  if (typeof value === "string") return ["```text", ...value.split("\n"), "```"];
  // JSON.stringify answers undefined for undefined (and functions), whatever its type says.
  return ["```json", ...((JSON.stringify(value, null, 2) as string | undefined) ?? "null").split("\n"), "```"];
}

function usage(tokens: number, costUsd: number): string {
  return `${compactCount(tokens)} tok · ${dollars(costUsd)}`;
}

class Writer {
  readonly lines: string[] = [];
  readonly links: RunViewLink[] = [];

  line(text = ""): void {
    this.lines.push(text);
  }

  /** A line `prefix` + `label`, where `label` is a link. */
  link(prefix: string, label: string, target: RunViewLink["target"]): void {
    this.links.push({ line: this.lines.length, start: prefix.length, end: prefix.length + label.length, target });
    this.lines.push(prefix + label);
  }
}

function writeAgent(out: Writer, agent: AgentDetail, runId: string): void {
  const facts = [words(agent.state)];
  if (agent.role) facts.push(`role ${agent.role}`);
  if (agent.model) facts.push(agent.model);
  facts.push(`${agent.attempts} attempt${agent.attempts === 1 ? "" : "s"}`, usage(agent.tokens, agent.costUsd));
  out.line(facts.join(" · "));
  out.line();
  if (agent.error) {
    out.line(`**Error** ${errorText(agent.error)}`);
    out.line();
  }
  const full: RunViewLink["target"] = {
    kind: "view",
    view: { kind: "agent", runId, agentId: agent.id },
    name: agent.label,
  };
  if (agent.hasOutput) {
    out.line("**Output**");
    out.line();
    for (const line of fenced(agent.output)) out.line(line);
    out.line();
  } else if (agent.outputPreview !== null) {
    out.line(`**Output** (preview) ${agent.outputPreview}`);
    out.link("Full output: ", `${agent.label} output.md`, full);
    out.line();
  }
  if (agent.transcriptPath) {
    out.link("Transcript: ", agent.transcriptPath, { kind: "file", path: agent.transcriptPath });
    out.line();
  }
  if (agent.attemptList.length > 1 || agent.attemptList.some((attempt) => attempt.error)) {
    out.line("Attempts:");
    for (const attempt of agent.attemptList) {
      const parts = [`- #${attempt.number} ${words(attempt.state)}`, usage(attempt.tokens, attempt.costUsd)];
      if (attempt.error) parts.push(errorText(attempt.error));
      const prefix = parts.join(" · ");
      if (attempt.transcriptPath) {
        out.link(`${prefix} · transcript `, attempt.transcriptPath, { kind: "file", path: attempt.transcriptPath });
      } else {
        out.line(prefix);
      }
    }
    out.line();
  }
}

/**
 * Agents depth first, each child (spec J.5) right after its parent with its depth; an agent whose
 * parent is not listed is shown at the top level.
 */
export function agentTree<A extends { id: string; parentId: string | null }>(agents: readonly A[]): { agent: A; depth: number }[] {
  const known = new Set(agents.map((agent) => agent.id));
  const children = new Map<string, A[]>();
  const roots: A[] = [];
  for (const agent of agents) {
    if (agent.parentId === null || !known.has(agent.parentId) || agent.parentId === agent.id) roots.push(agent);
    else {
      const siblings = children.get(agent.parentId);
      if (siblings) siblings.push(agent);
      else children.set(agent.parentId, [agent]);
    }
  }
  const ordered: { agent: A; depth: number }[] = [];
  const seen = new Set<string>();
  const visit = (agent: A, depth: number): void => {
    if (seen.has(agent.id)) return;
    seen.add(agent.id);
    ordered.push({ agent, depth });
    for (const child of children.get(agent.id) ?? []) visit(child, depth + 1);
  };
  for (const agent of roots) visit(agent, 0);
  // Agents in a parent cycle (a malformed record) reach no root: still listed, at the top level.
  for (const agent of agents) visit(agent, 0);
  return ordered;
}

export function renderRun(run: RunDetail): RenderedRun {
  const out = new Writer();
  const agentLines = new Map<string, number>();
  out.line(`# ${run.workflowName ?? "workflow"} — ${words(run.state)}`);
  out.line();
  out.line(`Run ${run.runId}`);
  if (run.uri) out.link("Script: ", run.uri, { kind: "uri", uri: run.uri });
  const facts: string[] = [];
  if (run.phase) facts.push(`phase ${run.phase}`);
  const counts = run.agentCounts ?? {
    total: run.agents.length,
    settled: run.agents.filter((a) => ["completed", "failed", "cancelled"].includes(a.state)).length,
  };
  facts.push(`${counts.settled}/${counts.total} agents`, usage(run.tokens, run.costUsd));
  out.line(facts.join(" · "));
  if (run.budget) {
    const gauge = formatBudgetGauge(run.budget.limits, run.budget.usage);
    if (gauge) out.line(`Budget: ${gauge}`);
  }
  out.line();
  if (run.error) {
    out.line("## Error");
    out.line();
    out.line(errorText(run.error));
    out.line();
  }
  if (run.state === "completed" || (run.result !== undefined && run.result !== null)) {
    out.line("## Result");
    out.line();
    for (const line of fenced(run.result ?? null)) out.line(line);
    out.line();
  }
  if (run.checkpoints.length > 0) {
    out.line("## Awaiting approval");
    out.line();
    for (const checkpoint of run.checkpoints) out.line(`- checkpoint ${checkpoint.name}: ${checkpoint.prompt}`);
    out.line();
  }
  if (run.lanes && run.lanes.length > 0) {
    out.line("## Lanes");
    out.line();
    for (const board of run.lanes) {
      if (run.lanes.length > 1) out.line(`runs.lanes #${board.call}`);
      for (const lane of board.lanes) {
        const stages = lane.stages.map((s) => `${s.key} ${s.verdict ? `${s.state} (verdict ${s.verdict})` : s.state}`);
        out.line(`- **${lane.key}** ${lane.state}: ${stages.join(" → ")}`);
      }
      out.line();
    }
  }
  out.line("## Agents");
  out.line();
  if (run.agents.length === 0) {
    out.line("(none yet)");
    out.line();
  }
  for (const { agent, depth } of agentTree(run.agents)) {
    agentLines.set(agent.id, out.lines.length);
    // A child agent's heading sits one level under its parent's, so the outline nests them too.
    out.line(`${"#".repeat(Math.min(3 + depth, 6))} ${"  ".repeat(depth)}${agent.label}`);
    out.line();
    writeAgent(out, agent, run.runId);
  }
  return { text: out.lines.join("\n"), links: out.links, agentLines };
}
