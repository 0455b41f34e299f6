// Entry point: wires the run model, its views, the commands and the language server together.
// The only module that loads `vscode` itself; the others receive it as a parameter.

import * as vscode from "vscode";
import { ApprovalFlow } from "./approvals";
import { registerCommands } from "./commands";
import { errorText, shortId } from "./format";
import type { RunFinished } from "./protocol";
import { RunLoader } from "./runLoader";
import { needsAttention, RunModel } from "./runModel";
import { RUN_VIEW_SCHEME } from "./runView";
import { RunViewProvider } from "./runViewProvider";
import { RunTreeProvider } from "./runTreeProvider";
import { configureTypeScriptPlugin, trackScriptContext } from "./scripts";
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
  const loader: RunLoader = new RunLoader(
    model,
    () => server.server(),
    () => {
      approvals.promptPending();
    },
    (line) => {
      output.appendLine(line);
    },
  );
  const server: ServerController = new ServerController(vscode, {
    model,
    approvals,
    loader,
    output,
    settings: () => settings,
    finished: (event) => {
      reportFinished(model.get(event.runId)?.workflowName ?? "workflow", event, () => runViews.open(event.runId));
    },
  });
  controller = server;

  const runViews = new RunViewProvider(vscode, model, () => server.server());
  const tree = new RunTreeProvider(vscode, model, (runId) => void loader.load(runId));
  const view = vscode.window.createTreeView(RUNS_VIEW_ID, { treeDataProvider: tree, showCollapseAll: true });
  const scriptContext = trackScriptContext(vscode, () => settings.files);
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
    runViews,
    vscode.workspace.registerTextDocumentContentProvider(RUN_VIEW_SCHEME, runViews),
    vscode.languages.registerDocumentLinkProvider({ scheme: RUN_VIEW_SCHEME }, runViews),
    scriptContext,
    ...registerCommands(vscode, {
      model,
      approvals,
      server: () => server.server(),
      settings: () => settings,
      restartServer: () => server.restart(),
      refreshRuns: () => server.refreshRuns(),
      openRun: (runId, agentId) => runViews.open(runId, agentId),
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!event.affectsConfiguration(SECTION)) return;
      settings = readSettings(vscode.workspace.getConfiguration(SECTION));
      if (event.affectsConfiguration(`${SECTION}.files`)) {
        scriptContext.update();
        configureScripts();
      }
      // The language client's document selector holds the script globs: a new client takes new ones.
      if (event.affectsConfiguration(`${SECTION}.server`) || event.affectsConfiguration(`${SECTION}.files`)) {
        void server.restart();
      }
    }),
    // Trust unlocks the workspace's own server settings and virtualenv: start again with them.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void server.restart()),
  );
  configureScripts();
  void server.start();

  function configureScripts(): void {
    configureTypeScriptPlugin(vscode, settings.files).catch((error: unknown) => {
      output.appendLine(`Could not configure the TypeScript plugin: ${String(error)}`);
    });
  }
}

const SHOW_RUN = "Show Run";

/** A run's end: quietly when it completed; a failure offers the run view (which agent failed, and why). */
function reportFinished(workflow: string, event: RunFinished, showRun: () => Promise<void>): void {
  const name = `Workflow ${workflow} (${shortId(event.runId)})`;
  if (event.state === "completed") {
    vscode.window.setStatusBarMessage(`$(pass) ${name} completed`, 10_000);
  } else if (event.error) {
    const text = `${name} ${event.state.replace(/_/g, " ")}: ${errorText(event.error)}`;
    void vscode.window.showErrorMessage(text, SHOW_RUN).then((choice) => (choice === SHOW_RUN ? showRun() : undefined));
  } else {
    void vscode.window.showInformationMessage(`${name} ${event.state.replace(/_/g, " ")}`);
  }
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
