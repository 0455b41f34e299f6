// The Workflow Runs tree view: maps the plain nodes of runTree.ts to VS Code TreeItems.

import type * as vscode from "vscode";
import { Command } from "./commands";
import type { RunModel } from "./runModel";
import { childNodes, rootNodes, viewNode, type RunNode } from "./runTree";

export class RunTreeProvider implements vscode.TreeDataProvider<RunNode> {
  private readonly changed: vscode.EventEmitter<undefined>;
  private readonly subscription: { dispose(): void };
  readonly onDidChangeTreeData: vscode.Event<undefined>;

  constructor(
    private readonly api: typeof vscode,
    private readonly model: RunModel,
    /** Fetches the agents of a run known only from a listing (shown once they arrive). */
    private readonly load: (runId: string) => void,
  ) {
    this.changed = new api.EventEmitter<undefined>();
    this.onDidChangeTreeData = this.changed.event;
    this.subscription = model.onDidChange(() => {
      this.changed.fire(undefined);
    });
  }

  getChildren(element?: RunNode): RunNode[] {
    if (!element) return rootNodes(this.model);
    if (element.kind === "run" && this.model.get(element.runId)?.agents === null) this.load(element.runId);
    return childNodes(this.model, element);
  }

  getTreeItem(element: RunNode): vscode.TreeItem {
    const { TreeItem, TreeItemCollapsibleState, ThemeIcon, ThemeColor } = this.api;
    const view = viewNode(this.model, element);
    if (!view) return new TreeItem("(gone)", TreeItemCollapsibleState.None);
    const state = !view.expandable
      ? TreeItemCollapsibleState.None
      : view.expanded
        ? TreeItemCollapsibleState.Expanded
        : TreeItemCollapsibleState.Collapsed;
    const item = new TreeItem(view.label, state);
    item.id = view.id;
    item.description = view.description;
    item.tooltip = view.tooltip;
    item.contextValue = view.contextValue;
    item.iconPath = new ThemeIcon(view.icon.id, view.icon.color ? new ThemeColor(view.icon.color) : undefined);
    if (element.kind === "agent" || element.kind === "error") {
      // A click shows what the agent answered, or why the run failed, in the run view.
      item.command = { command: Command.showRunDetails, title: "Show Run Details", arguments: [element] };
    }
    return item;
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}
