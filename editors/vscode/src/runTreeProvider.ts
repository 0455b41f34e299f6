// The Workflow Runs tree view: maps the plain nodes of runTree.ts to VS Code TreeItems, and
// refreshes only what a change touched, so a run of thousands of agents costs per message what
// changed in it, not its size.

import type * as vscode from "vscode";
import { Command } from "./commands";
import type { RunChange, RunModel } from "./runModel";
import { childNodes, nodeKey, rootNodes, viewNode, type RunNode } from "./runTree";

type Refresh = RunNode | RunNode[] | undefined;

export class RunTreeProvider implements vscode.TreeDataProvider<RunNode> {
  private readonly changed: vscode.EventEmitter<Refresh>;
  private readonly subscription: { dispose(): void };
  readonly onDidChangeTreeData: vscode.Event<Refresh>;
  /** Every node handed to VS Code, by key: VS Code knows an element by identity, so a refresh fires that very object. */
  private readonly nodes = new Map<string, RunNode>();
  /** The runs at the root, in the order last handed out: another order refreshes the root. */
  private roots = "";
  /** Runs whose node (description and children) refreshes once the batch delay is over. */
  private readonly batched = new Map<string, ReturnType<typeof setTimeout>>();

  constructor(
    private readonly api: typeof vscode,
    private readonly model: RunModel,
    /** Fetches the agents of a run known only from a listing (shown once they arrive). */
    private readonly load: (runId: string) => void,
    /**
     * A run's node refreshes its children too, which costs VS Code the size of the run; progress
     * alone (totals, new agents) refreshes it at most this often. State changes show at once.
     */
    private readonly runRefreshMs = 1000,
  ) {
    this.changed = new api.EventEmitter<Refresh>();
    this.onDidChangeTreeData = this.changed.event;
    this.subscription = model.onDidChange((change) => {
      this.refresh(change);
    });
  }

  getChildren(element?: RunNode): RunNode[] {
    if (!element) {
      const roots = rootNodes(this.model);
      this.roots = order(roots);
      return roots.map((node) => this.intern(node));
    }
    if (element.kind === "run" && this.model.get(element.runId)?.agents === null) this.load(element.runId);
    return childNodes(this.model, element).map((node) => this.intern(node));
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
    for (const timer of this.batched.values()) clearTimeout(timer);
    this.batched.clear();
    this.subscription.dispose();
    this.changed.dispose();
  }

  private intern(node: RunNode): RunNode {
    const key = nodeKey(node);
    const known = this.nodes.get(key);
    if (known) return known;
    this.nodes.set(key, node);
    return node;
  }

  private refresh(change: RunChange | undefined): void {
    const runNode = change && this.nodes.get(nodeKey({ kind: "run", runId: change.runId }));
    if (!change || !runNode || order(rootNodes(this.model)) !== this.roots) {
      this.fireRoot();
      return;
    }
    if (change.run) {
      this.fireRun(runNode);
      return;
    }
    if (change.agents !== "all") {
      const agents = change.agents
        .map((agentId) => this.nodes.get(nodeKey({ kind: "agent", runId: change.runId, agentId })))
        .filter((node): node is RunNode => node !== undefined);
      if (agents.length > 0) this.changed.fire(agents);
    }
    if (!this.batched.has(change.runId)) {
      this.batched.set(
        change.runId,
        setTimeout(() => {
          this.fireRun(runNode);
        }, this.runRefreshMs),
      );
    }
  }

  private fireRun(runNode: RunNode): void {
    clearTimeout(this.batched.get(runNode.runId));
    this.batched.delete(runNode.runId);
    this.changed.fire(runNode);
  }

  private fireRoot(): void {
    for (const timer of this.batched.values()) clearTimeout(timer);
    this.batched.clear();
    this.changed.fire(undefined);
  }
}

function order(roots: RunNode[]): string {
  return roots.map((node) => node.runId).join("\n");
}
