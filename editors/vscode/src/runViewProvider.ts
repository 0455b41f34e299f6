// Serves run views as read-only `piflow-run:` documents (never an Untitled file that asks to be
// saved): the text of runView.ts from `piflow.showRun`, an agent's full output from
// `piflow.showAgent`, clickable transcripts, and a refresh while the run goes on.

import type * as vscode from "vscode";
import { NOT_RUNNING } from "./commands";
import type { RunModel } from "./runModel";
import {
  agentOutputText,
  parseRunViewQuery,
  renderRun,
  RUN_VIEW_SCHEME,
  runViewLocation,
  type RenderedRun,
  type RunViewLink,
  type RunViewTarget,
} from "./runView";
import type { ServerCommands } from "./serverCommands";

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class RunViewProvider implements vscode.TextDocumentContentProvider, vscode.DocumentLinkProvider {
  private readonly changed: vscode.EventEmitter<vscode.Uri>;
  readonly onDidChange: vscode.Event<vscode.Uri>;
  /** The last text served per run view document, for its links and agent positions. */
  private readonly rendered = new Map<string, RenderedRun>();
  /** What each open run view last showed of its run in the model; a change schedules a refresh. */
  private readonly shown = new Map<string, { uri: vscode.Uri; runId: string; signature: string }>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly subscriptions: { dispose(): void }[];

  constructor(
    private readonly api: typeof vscode,
    private readonly model: RunModel,
    private readonly server: () => ServerCommands | undefined,
    /** Refreshes of one view are this far apart at least, however fast its run changes. */
    private readonly refreshDelayMs = 300,
  ) {
    this.changed = new api.EventEmitter<vscode.Uri>();
    this.onDidChange = this.changed.event;
    this.subscriptions = [
      model.onDidChange(() => {
        this.runsChanged();
      }),
      api.workspace.onDidCloseTextDocument((document) => {
        const key = document.uri.toString();
        this.rendered.delete(key);
        this.shown.delete(key);
      }),
    ];
  }

  uri(target: RunViewTarget, name: string): vscode.Uri {
    return this.api.Uri.from({ scheme: RUN_VIEW_SCHEME, ...runViewLocation(target, name) });
  }

  /** Opens the view of a run (scrolled to one agent, if given) beside nothing else: a normal tab. */
  async open(runId: string, agentId?: string): Promise<void> {
    const name = this.model.get(runId)?.workflowName ?? "workflow";
    const document = await this.api.workspace.openTextDocument(this.uri({ kind: "run", runId }, name));
    const editor = await this.api.window.showTextDocument(document, { preview: false });
    const line = agentId === undefined ? undefined : this.rendered.get(document.uri.toString())?.agentLines.get(agentId);
    if (line !== undefined) {
      const position = new this.api.Position(line, 0);
      editor.selection = new this.api.Selection(position, position);
      editor.revealRange(new this.api.Range(position, position), this.api.TextEditorRevealType.AtTop);
    }
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const target = parseRunViewQuery(uri.query);
    if (!target) return `Not a piflow run: ${uri.toString()}`;
    const server = this.server();
    if (!server) return NOT_RUNNING;
    try {
      if (target.kind === "agent") return agentOutputText(await server.showAgent(target.runId, target.agentId));
      const rendered = renderRun(await server.showRun(target.runId));
      this.rendered.set(uri.toString(), rendered);
      this.shown.set(uri.toString(), { uri, runId: target.runId, signature: this.signature(target.runId) });
      return rendered.text;
    } catch (error) {
      return `piflow could not show run ${target.runId}: ${message(error)}`;
    }
  }

  provideDocumentLinks(document: vscode.TextDocument): vscode.DocumentLink[] {
    const rendered = this.rendered.get(document.uri.toString());
    if (!rendered) return [];
    const { DocumentLink, Range } = this.api;
    return rendered.links.map((link) => new DocumentLink(new Range(link.line, link.start, link.line, link.end), this.linkTarget(link)));
  }

  private linkTarget(link: RunViewLink): vscode.Uri {
    switch (link.target.kind) {
      case "file":
        return this.api.Uri.file(link.target.path);
      case "uri":
        return this.api.Uri.parse(link.target.uri);
      case "view":
        return this.uri(link.target.view, link.target.name);
    }
  }

  /** The model's revision of the run: when it differs, the view is out of date (O(1), whatever the run's size). */
  private signature(runId: string): string {
    return String(this.model.get(runId)?.revision ?? "");
  }

  private runsChanged(): void {
    for (const [key, view] of this.shown) {
      if (this.timers.has(key) || this.signature(view.runId) === view.signature) continue;
      this.timers.set(
        key,
        setTimeout(() => {
          this.timers.delete(key);
          this.changed.fire(view.uri);
        }, this.refreshDelayMs),
      );
    }
  }

  dispose(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    for (const subscription of this.subscriptions) subscription.dispose();
    this.changed.dispose();
  }
}
