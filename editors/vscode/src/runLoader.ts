// Fills in runs the editor only knows from `piflow.listRuns` (launched before the window opened, or
// from a terminal): their `piflow.showRun` snapshot gives the tree their agents, approvals and result.

import { isTerminal, type RunModel } from "./runModel";
import type { ServerCommands } from "./serverCommands";

export class RunLoader {
  private readonly loading = new Map<string, Promise<void>>();

  constructor(
    private readonly model: RunModel,
    private readonly server: () => ServerCommands | undefined,
    /** After a snapshot was merged (e.g. to prompt for the approvals it lists). */
    private readonly loaded: () => void,
    private readonly log: (line: string) => void,
  ) {}

  /** Loads a run that has no snapshot yet; a run with one keeps it (notifications are newer). */
  load(runId: string): Promise<void> {
    const server = this.server();
    if (!server || this.model.get(runId)?.agents !== null) return Promise.resolve();
    const pending = this.loading.get(runId);
    if (pending) return pending;
    const done = server
      .showRun(runId)
      .then(
        (detail) => {
          if (this.model.get(runId)?.agents !== null) return;
          this.model.detailed(detail);
          this.loaded();
        },
        (error: unknown) => {
          this.log(`piflow.showRun ${runId} failed: ${error instanceof Error ? error.message : String(error)}`);
        },
      )
      .finally(() => this.loading.delete(runId));
    this.loading.set(runId, done);
    return done;
  }

  /** Loads every run still going: those may wait for an answer, which the editor must show at once. */
  async loadActive(): Promise<void> {
    const active = this.model.all().filter((run) => run.agents === null && !isTerminal(run.state));
    await Promise.all(active.map((run) => this.load(run.runId)));
  }
}
