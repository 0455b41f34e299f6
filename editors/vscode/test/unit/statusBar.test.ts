import assert from "node:assert/strict";
import { test } from "node:test";
import { Notification } from "../../src/protocol";
import { RunStatusBar, statusSummary } from "../../src/statusBar";
import { harness } from "./harness";
import * as wire from "./payloads";
import { createVscode } from "./vscodeStub";

test("the status bar is hidden while no run is going", () => {
  const h = harness();
  assert.deepEqual(statusSummary(h.model), {
    visible: false,
    text: "piflow ",
    tooltip: "No workflow runs in progress",
    attention: false,
  });
});

test("the status bar counts running runs and runs awaiting an answer", () => {
  const h = harness();
  h.notify = false;
  h.model.listed([
    { runId: "r1", uri: null, workflowName: "a", state: "running", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
    { runId: "r2", uri: null, workflowName: "b", state: "queued", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
    { runId: "r3", uri: null, workflowName: "c", state: "completed", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
  ]);
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(Notification.checkpoint, wire.checkpoint());
  const summary = statusSummary(h.model);
  assert.equal(summary.text, "piflow $(sync~spin) 2 $(bell-dot) 1");
  assert.equal(summary.tooltip, "2 workflow runs running, 1 awaiting approval — click to show Workflow Runs");
  assert.equal(summary.attention, true);
});

test("the status-bar item follows the model and focuses the runs view when clicked", () => {
  const { api, state } = createVscode();
  const h = harness();
  h.notify = false;
  const bar = new RunStatusBar(api, h.model);
  const [item] = state.statusBarItems;
  assert.ok(item);
  assert.equal(item.command, "piflow.runs.focus");
  assert.equal(item.visible, false);

  h.source.emit(Notification.runStarted, wire.started());
  assert.equal(item.visible, true);
  assert.equal(item.text, "piflow $(sync~spin) 1");
  assert.equal(item.backgroundColor, undefined);

  h.source.emit(Notification.checkpoint, wire.checkpoint());
  assert.equal(item.text, "piflow $(bell-dot) 1");
  assert.equal((item.backgroundColor as unknown as { id: string }).id, "statusBarItem.warningBackground");

  h.source.emit(Notification.runFinished, wire.finished("completed"));
  assert.equal(item.visible, false);
  bar.dispose();
});
