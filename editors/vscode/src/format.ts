// Short texts for numbers, budgets and runs, shared by the tree, the status bar and prompts.

import type { Limit, WorkflowFailure } from "./protocol";

/** 950 → "950", 12_300 → "12.3k", 4_500_000 → "4.5M". */
export function compactCount(value: number): string {
  const units: [number, string][] = [
    [1e9, "G"],
    [1e6, "M"],
    [1e3, "k"],
  ];
  for (const [size, suffix] of units) {
    if (Math.abs(value) >= size) return `${trimZeros((value / size).toFixed(1))}${suffix}`;
  }
  return String(Math.round(value));
}

/** Dollars with cents, or four decimals for amounts under a cent. */
export function dollars(value: number): string {
  if (value === 0) return "$0";
  return "$" + (Math.abs(value) < 0.01 ? value.toFixed(4) : value.toFixed(2));
}

function trimZeros(text: string): string {
  return text.replace(/\.0$/, "");
}

export function shortId(runId: string): string {
  return runId.slice(0, 8);
}

function amount(dimension: string, value: number): string {
  return dimension === "costUsd" ? dollars(value) : compactCount(value);
}

/** `{tokens: 1200, costUsd: 0.5}` → "tokens 1.2k, costUsd $0.50". */
export function formatUsage(usage: Record<string, number>): string {
  const parts = Object.entries(usage).map(([dim, value]) => `${dim} ${amount(dim, value)}`);
  return parts.length ? parts.join(", ") : "none";
}

/** `{tokens: {soft: 1000, hard: 2000}}` → "tokens soft 1k hard 2k". */
export function formatLimits(limits: Record<string, Limit>): string {
  const parts = Object.entries(limits).map(([dim, limit]) => {
    const bounds = (["soft", "hard"] as const)
      .filter((kind) => limit[kind] !== undefined)
      .map((kind) => `${kind} ${amount(dim, limit[kind] ?? 0)}`);
    return `${dim} ${bounds.join(" ") || "unlimited"}`;
  });
  return parts.length ? parts.join(", ") : "no limits";
}

/** "tokens 1.2k/5k (24%)" for every dimension with a limit. */
export function formatBudgetGauge(limits: Record<string, Limit>, usage: Record<string, number>): string {
  return Object.entries(limits)
    .filter(([, limit]) => limit.hard !== undefined || limit.soft !== undefined)
    .map(([dim, limit]) => {
      const bound = limit.hard ?? limit.soft ?? 0;
      const used = usage[dim] ?? 0;
      const percent = bound === 0 ? 100 : Math.round((used / bound) * 100);
      return `${dim} ${amount(dim, used)}/${amount(dim, bound)} (${percent}%)`;
    })
    .join(" · ");
}

/** JSON on one line, cut to `max` characters. */
export function oneLineJson(value: unknown, max = 200): string {
  const text = value === undefined ? "undefined" : JSON.stringify(value);
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

/** `CODE: message`, or only the message when the script's author wrote it (`throw new Error("…")`). */
export function errorText(error: WorkflowFailure): string {
  return error.authored ? error.message : `${error.code}: ${error.message}`;
}
