// The status-bar item: how many runs are going and how many wait for an answer; a click
// focuses the Workflow Runs view.

import type * as vscode from "vscode";
import { needsAttention, type RunModel } from "./runModel";

export const RUNS_VIEW_ID = "piflow.runs";

export interface StatusSummary {
  visible: boolean;
  text: string;
  tooltip: string;
  /** True while a run waits for an approval: the item is highlighted. */
  attention: boolean;
}

const ACTIVE_STATES = new Set(["queued", "running", "pausing"]);

export function statusSummary(model: RunModel): StatusSummary {
  const runs = model.all();
  const awaiting = runs.filter(needsAttention).length;
  const running = runs.filter((run) => ACTIVE_STATES.has(run.state) && !needsAttention(run)).length;
  const parts: string[] = [];
  const tips: string[] = [];
  if (running > 0) {
    parts.push(`$(sync~spin) ${running}`);
    tips.push(`${running} workflow run${running === 1 ? "" : "s"} running`);
  }
  if (awaiting > 0) {
    parts.push(`$(bell-dot) ${awaiting}`);
    tips.push(`${awaiting} awaiting approval`);
  }
  return {
    visible: parts.length > 0,
    text: `piflow ${parts.join(" ")}`,
    tooltip: tips.length ? `${tips.join(", ")} — click to show Workflow Runs` : "No workflow runs in progress",
    attention: awaiting > 0,
  };
}

export class RunStatusBar {
  private readonly item: vscode.StatusBarItem;
  private readonly subscription: { dispose(): void };

  constructor(
    private readonly api: typeof vscode,
    private readonly model: RunModel,
  ) {
    this.item = api.window.createStatusBarItem("piflow.status", api.StatusBarAlignment.Left, 10);
    this.item.name = "piflow workflow runs";
    this.item.command = `${RUNS_VIEW_ID}.focus`;
    this.subscription = model.onDidChange(() => {
      this.update();
    });
    this.update();
  }

  update(): void {
    const summary = statusSummary(this.model);
    this.item.text = summary.text;
    this.item.tooltip = summary.tooltip;
    this.item.backgroundColor = summary.attention
      ? new this.api.ThemeColor("statusBarItem.warningBackground")
      : undefined;
    if (summary.visible) this.item.show();
    else this.item.hide();
  }

  dispose(): void {
    this.subscription.dispose();
    this.item.dispose();
  }
}
