// Entry point: wires the run model, its views, the commands and the language server together.
// The only module that loads `vscode` itself; the others receive it as a parameter.

import * as vscode from "vscode";
import { ApprovalFlow } from "./approvals";
import { registerCommands } from "./commands";
import { shortId } from "./format";
import { associateWorkflowScripts } from "./languageAssociation";
import type { RunFinished } from "./protocol";
import { needsAttention, RunModel } from "./runModel";
import { RunTreeProvider } from "./runTreeProvider";
import { ServerController } from "./serverController";
import { readSettings, SECTION, type Settings } from "./settings";
import { RUNS_VIEW_ID, RunStatusBar } from "./statusBar";

let controller: ServerController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("piflow");
  const model = new RunModel();
  let settings: Settings = readSettings(vscode.workspace.getConfiguration(SECTION));
  const approvals: ApprovalFlow = new ApprovalFlow(model, () => server.server(), {
    ask: (message, ...buttons) => vscode.window.showInformationMessage(message, ...buttons),
    error: (message) => void vscode.window.showErrorMessage(message),
    notify: () => settings.notifyApprovals,
  });
  const server = new ServerController(vscode, {
    model,
    approvals,
    output,
    settings: () => settings,
    finished: (event) => {
      reportFinished(model.get(event.runId)?.workflowName ?? "workflow", event);
    },
  });
  controller = server;

  const tree = new RunTreeProvider(vscode, model);
  const view = vscode.window.createTreeView(RUNS_VIEW_ID, { treeDataProvider: tree, showCollapseAll: true });
  const badge = model.onDidChange(() => {
    const awaiting = model.all().filter(needsAttention).length;
    view.badge = awaiting > 0 ? { value: awaiting, tooltip: `${awaiting} awaiting approval` } : undefined;
  });

  context.subscriptions.push(
    output,
    tree,
    view,
    badge,
    new RunStatusBar(vscode, model),
    associateWorkflowScripts(vscode, () => settings.files),
    ...registerCommands(vscode, {
      model,
      approvals,
      server: () => server.server(),
      settings: () => settings,
      restartServer: () => server.restart(),
      refreshRuns: () => server.refreshRuns(),
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!event.affectsConfiguration(SECTION)) return;
      settings = readSettings(vscode.workspace.getConfiguration(SECTION));
      if (event.affectsConfiguration(`${SECTION}.server`)) void server.restart();
    }),
    // Trust unlocks the workspace's own server settings and virtualenv: start again with them.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void server.restart()),
  );
  void server.start();
}

function reportFinished(workflow: string, event: RunFinished): void {
  const name = `Workflow ${workflow} (${shortId(event.runId)})`;
  if (event.state === "completed") {
    vscode.window.setStatusBarMessage(`$(pass) ${name} completed`, 10_000);
  } else if (event.error) {
    void vscode.window.showErrorMessage(`${name} ${event.state.replace(/_/g, " ")}: ${event.error.code}: ${event.error.message}`);
  } else {
    void vscode.window.showInformationMessage(`${name} ${event.state.replace(/_/g, " ")}`);
  }
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
