// The extension's settings (`contributes.configuration` in package.json), read with their types.

import type { RunSettings } from "./serverCommands";
import type { ServerSettings } from "./serverLaunch";

export const SECTION = "piflow";
export const DEFAULT_FILES = ["**/*.workflow.js"];

/** The part of `WorkspaceConfiguration` read here. */
export interface ConfigurationReader {
  get(key: string): unknown;
}

export interface Settings {
  server: ServerSettings;
  run: RunSettings;
  /** Glob patterns of workflow scripts; `*.workflow.js` always is one. */
  files: string[];
  notifyApprovals: boolean;
}

function strings(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((item) => typeof item === "string") ? value : undefined;
}

function string(value: unknown): string {
  return typeof value === "string" ? value.trim() : "";
}

function object(value: unknown): Record<string, unknown> | null {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

export function readSettings(config: ConfigurationReader): Settings {
  const concurrency = config.get("run.concurrency");
  return {
    server: {
      command: strings(config.get("server.command")) ?? [],
      pythonPath: string(config.get("server.pythonPath")),
    },
    run: {
      backend: string(config.get("run.backend")),
      fixtures: string(config.get("run.fixtures")),
      concurrency: typeof concurrency === "number" && Number.isInteger(concurrency) && concurrency > 0 ? concurrency : null,
      budget: object(config.get("run.budget")),
    },
    files: strings(config.get("files")) ?? DEFAULT_FILES,
    notifyApprovals: config.get("approvals.notify") !== false,
  };
}
