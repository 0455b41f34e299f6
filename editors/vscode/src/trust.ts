// Workspace trust: an untrusted workspace gets diagnostics but launches no runs.

import { LAUNCHING_COMMANDS } from "./protocol";

export const UNTRUSTED_MESSAGE =
  "piflow launches no workflow runs in an untrusted workspace. Trust the workspace to run workflows; diagnostics keep working.";

export const MANAGE_TRUST = "Manage Workspace Trust";

/** Whether a server command may not be sent from this workspace. */
export function isRefused(command: string, trusted: boolean): boolean {
  return !trusted && LAUNCHING_COMMANDS.includes(command);
}
