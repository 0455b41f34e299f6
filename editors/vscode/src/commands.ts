// Palette and tree commands. Their ids differ from the server's (`piflow.run`, …), which the
// language client registers itself for the code lenses.

import type * as vscode from "vscode";
import type { Approval, ApprovalFlow } from "./approvals";
import { shortId } from "./format";
import type { Run, RunModel } from "./runModel";
import { runActions, runDescription, type RunNode } from "./runTree";
import {
  parseBudgetPatch,
  parseJson,
  runOptionsFromSettings,
  type Parsed,
  type RunOptions,
  type ServerCommands,
} from "./serverCommands";
import { isWorkflowScript, scriptPatterns } from "./scripts";
import type { Settings } from "./settings";
import { RUNS_VIEW_ID } from "./statusBar";
import { MANAGE_TRUST, UNTRUSTED_MESSAGE } from "./trust";

export const Command = {
  run: "piflow.runWorkflow",
  runWithArgs: "piflow.runWorkflowWithArgs",
  resume: "piflow.resumeRun",
  pause: "piflow.pauseRun",
  stop: "piflow.stopRun",
  approve: "piflow.approve",
  reject: "piflow.reject",
  showRuns: "piflow.showRuns",
  refreshRuns: "piflow.refreshRuns",
  showRunDetails: "piflow.showRunDetails",
  restartServer: "piflow.restartServer",
} as const;

export const NOT_RUNNING = "The piflow server is not running. Run “piflow: Restart Server” after fixing its settings.";

export interface CommandDeps {
  model: RunModel;
  approvals: ApprovalFlow;
  /** The running server's commands; undefined while it is not running. */
  server(): ServerCommands | undefined;
  settings(): Settings;
  restartServer(): Promise<void>;
  /** Merges `piflow.listRuns` into the model. */
  refreshRuns(): Promise<void>;
  /** Opens the run view of a run, scrolled to one of its agents if given. */
  openRun(runId: string, agentId?: string): Promise<void>;
}

/** The user dismissed a prompt: the command ends without a message. */
class Cancelled extends Error {}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function isNode(value: unknown): value is RunNode {
  return typeof value === "object" && value !== null && "kind" in value && "runId" in value;
}

export function registerCommands(api: typeof vscode, deps: CommandDeps): vscode.Disposable[] {
  const { window, workspace } = api;
  const lastArgs = new Map<string, string>();

  function server(): ServerCommands {
    const current = deps.server();
    if (!current) throw new Error(NOT_RUNNING);
    return current;
  }

  function requireTrust(): void {
    if (workspace.isTrusted) return;
    void window.showWarningMessage(UNTRUSTED_MESSAGE, MANAGE_TRUST).then((choice) => {
      if (choice === MANAGE_TRUST) void api.commands.executeCommand("workbench.trust.manage");
    });
    throw new Cancelled();
  }

  async function scriptUri(target: unknown): Promise<vscode.Uri> {
    if (target instanceof api.Uri) return target;
    const document = window.activeTextEditor?.document;
    // The server runs the editor's text of an open script, saved or not.
    if (document && isWorkflowScript(api, document, deps.settings().files)) return document.uri;
    const found = (await Promise.all(scriptPatterns(deps.settings().files).map((p) => workspace.findFiles(p, "**/node_modules/**", 500)))).flat();
    const unique = [...new Map(found.map((uri) => [uri.toString(), uri])).values()];
    if (unique.length === 0) throw new Error("No workflow script (*.workflow.js) is open or in the workspace.");
    const picked = await window.showQuickPick(
      unique.map((uri) => ({ label: workspace.asRelativePath(uri), uri })),
      { title: "Run workflow", placeHolder: "Workflow script to run" },
    );
    if (!picked) throw new Cancelled();
    return picked.uri;
  }

  /** Asks for JSON in an input box that checks it while typing; the parsed value. */
  async function askJson(options: vscode.InputBoxOptions, parse: (text: string) => Parsed): Promise<unknown> {
    const text = await window.showInputBox({
      ...options,
      validateInput: (value) => {
        const parsed = parse(value);
        return parsed.ok ? undefined : parsed.message;
      },
    });
    if (text === undefined) throw new Cancelled();
    const parsed = parse(text);
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.value;
  }

  async function launch(target: unknown, withArgs: boolean): Promise<void> {
    requireTrust();
    const commands = server();
    const uri = await scriptUri(target);
    const options: RunOptions = runOptionsFromSettings(deps.settings().run);
    if (withArgs) {
      const key = uri.toString();
      options.args = await askJson(
        {
          title: `Run ${workspace.asRelativePath(uri)} with args`,
          prompt: "Arguments as JSON: the script reads them as `args` (empty: null)",
          placeHolder: '{"topic": "durable workflows"}',
          value: lastArgs.get(key) ?? "",
        },
        (text) => (text.trim() === "" ? { ok: true, value: null } : parseJson(text)),
      );
      lastArgs.set(key, JSON.stringify(options.args));
    }
    const runId = await commands.run(uri.toString(), options);
    window.setStatusBarMessage(`piflow: started run ${shortId(runId)}`, 5000);
  }

  /** The run a tree node names, or one the user picks among those that allow `allowed`. */
  async function pickRun(target: unknown, title: string, allowed: (run: Run) => boolean): Promise<Run> {
    if (isNode(target)) {
      const run = deps.model.get(target.runId);
      if (run) return run;
    }
    await deps.refreshRuns().catch(() => undefined);
    const runs = deps.model.all().filter(allowed);
    if (runs.length === 0) throw new Error(`No workflow run to ${title.toLowerCase()}.`);
    const picked = await window.showQuickPick(
      runs.map((run) => ({ label: run.workflowName, description: `${shortId(run.runId)} · ${runDescription(run)}`, run })),
      { title: `${title} workflow run` },
    );
    if (!picked) throw new Cancelled();
    return picked.run;
  }

  async function resume(target: unknown): Promise<void> {
    requireTrust();
    const commands = server();
    const run = await pickRun(target, "Resume", (r) => runActions(r.state).resume);
    let budget: Record<string, unknown> | undefined;
    if (run.state === "budget_exhausted") {
      budget = (await askJson(
        {
          title: `Resume ${run.workflowName} (${shortId(run.runId)})`,
          prompt: "Budget patch as JSON (empty: resume unchanged). Raising a limit asks for approval.",
          placeHolder: '{"tokens": {"hard": 200000}}',
        },
        (text) => (text.trim() === "" ? { ok: true, value: undefined } : parseBudgetPatch(text)),
      )) as Record<string, unknown> | undefined;
    }
    await commands.resume(run.runId, budget);
  }

  async function pause(target: unknown): Promise<void> {
    const commands = server();
    const run = await pickRun(target, "Pause", (r) => runActions(r.state).pause);
    await commands.pause(run.runId);
  }

  async function stop(target: unknown): Promise<void> {
    const commands = server();
    const run = await pickRun(target, "Stop", (r) => runActions(r.state).stop);
    await commands.stop(run.runId);
  }

  async function pickApproval(target: unknown): Promise<Approval> {
    const checkpoint = (runId: string, name: string): Approval => ({ kind: "checkpoint", runId, name });
    const proposal = (runId: string, proposalId: string): Approval => ({ kind: "proposal", runId, proposalId });
    if (isNode(target) && target.kind === "checkpoint") return checkpoint(target.runId, target.name);
    if (isNode(target) && target.kind === "proposal") return proposal(target.runId, target.proposalId);
    const pending = deps.model.all().flatMap((run) => [
      ...run.checkpoints.map((c) => ({
        label: `${run.workflowName}: checkpoint ${c.name}`,
        description: c.prompt,
        approval: checkpoint(run.runId, c.name),
      })),
      ...run.proposals.map((p) => ({
        label: `${run.workflowName}: budget ${shortId(p.proposalId)}`,
        description: shortId(run.runId),
        approval: proposal(run.runId, p.proposalId),
      })),
    ]);
    if (pending.length === 0) throw new Error("No checkpoint or budget proposal is awaiting an answer.");
    const picked = await window.showQuickPick(pending, { title: "Answer workflow approval" });
    if (!picked) throw new Cancelled();
    return picked.approval;
  }

  async function answer(target: unknown, approved: boolean): Promise<void> {
    server(); // fails with NOT_RUNNING while the server is down
    await deps.approvals.answer(await pickApproval(target), approved);
  }

  async function showRuns(): Promise<void> {
    await api.commands.executeCommand(`${RUNS_VIEW_ID}.focus`);
    await deps.refreshRuns();
  }

  async function showRunDetails(target: unknown): Promise<void> {
    server(); // fails with NOT_RUNNING while the server is down
    const run = await pickRun(target, "Show", () => true);
    await deps.openRun(run.runId, isNode(target) && target.kind === "agent" ? target.agentId : undefined);
  }

  const handlers: Record<string, (target?: unknown) => Promise<void>> = {
    [Command.run]: (target) => launch(target, false),
    [Command.runWithArgs]: (target) => launch(target, true),
    [Command.resume]: resume,
    [Command.pause]: pause,
    [Command.stop]: stop,
    [Command.approve]: (target) => answer(target, true),
    [Command.reject]: (target) => answer(target, false),
    [Command.showRuns]: showRuns,
    [Command.refreshRuns]: () => deps.refreshRuns(),
    [Command.showRunDetails]: showRunDetails,
    [Command.restartServer]: () => deps.restartServer(),
  };

  return Object.entries(handlers).map(([id, handler]) =>
    api.commands.registerCommand(id, async (target?: unknown) => {
      try {
        await handler(target);
      } catch (error) {
        if (!(error instanceof Cancelled)) void window.showErrorMessage(`piflow: ${message(error)}`);
      }
    }),
  );
}
