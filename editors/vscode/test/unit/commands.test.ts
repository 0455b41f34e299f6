import assert from "node:assert/strict";
import { test } from "node:test";
import { Command, NOT_RUNNING, registerCommands } from "../../src/commands";
import { Notification } from "../../src/protocol";
import type { RunNode } from "../../src/runTree";
import { readSettings, type Settings } from "../../src/settings";
import { UNTRUSTED_MESSAGE } from "../../src/trust";
import { harness, type Harness } from "./harness";
import * as wire from "./payloads";
import { createVscode, settle, Uri, type StubState } from "./vscodeStub";

interface Setup {
  h: Harness;
  state: StubState;
  run(command: string, target?: unknown): Promise<void>;
  refreshes: number;
  restarts: number;
  /** Run views opened: the run, and the agent scrolled to. */
  opened: [string, string | undefined][];
}

function setup(options: { settings?: Partial<Settings["run"]>; running?: boolean; files?: string[] } = {}): Setup {
  const { api, state } = createVscode();
  const h = harness();
  h.notify = false;
  h.results.set("piflow.run", { runId: wire.RUN_ID });
  const settings = readSettings({ get: () => undefined });
  Object.assign(settings.run, options.settings);
  if (options.files) settings.files = options.files;
  const setup: Setup = {
    h,
    state,
    refreshes: 0,
    restarts: 0,
    opened: [],
    run: async (command, target) => {
      const handler = state.commands.get(command);
      assert.ok(handler, `${command} is registered`);
      await handler(target);
    },
  };
  registerCommands(api, {
    model: h.model,
    approvals: h.approvals,
    server: () => (options.running === false ? undefined : h.server),
    settings: () => settings,
    restartServer: () => {
      setup.restarts++;
      return Promise.resolve();
    },
    refreshRuns: () => {
      setup.refreshes++;
      return Promise.resolve();
    },
    openRun: (runId, agentId) => {
      setup.opened.push([runId, agentId]);
      return Promise.resolve();
    },
  });
  return setup;
}

test("every palette and tree command is registered", () => {
  const { state } = setup();
  assert.deepEqual([...state.commands.keys()].sort(), Object.values(Command).sort());
});

test("Run Workflow runs the active script with the run settings", async () => {
  const s = setup({ settings: { backend: "scripted", concurrency: 4, budget: { tokens: { hard: 1000 } } } });
  s.state.activeDocument = { uri: Uri.file("/work/review.workflow.js"), languageId: "javascript" };
  await s.run(Command.run);
  assert.deepEqual(s.h.sent, [
    {
      command: "piflow.run",
      args: { uri: "file:///work/review.workflow.js", backend: "scripted", concurrency: 4, budget: { tokens: { hard: 1000 } } },
    },
  ]);
  assert.deepEqual(s.state.statusMessages, ["piflow: started run 3f2a9c41"]);
});

test("Run Workflow from the explorer runs the file it was invoked on; without one it offers the workspace's scripts", async () => {
  const s = setup();
  await s.run(Command.run, Uri.file("/work/a.workflow.js"));
  s.state.files = [Uri.file("/work/b.workflow.js"), Uri.file("/work/c.workflow.js")];
  s.state.quickPick = () => 1;
  await s.run(Command.run);
  assert.deepEqual(s.state.quickPicks, [["b.workflow.js", "c.workflow.js"]]);
  assert.deepEqual(
    s.h.sent.map((c) => c.args.uri),
    ["file:///work/a.workflow.js", "file:///work/c.workflow.js"],
  );
});

test("Run with args validates the JSON in the input box and sends the parsed value", async () => {
  const s = setup();
  s.state.inputTries = ['{"topic": "x"', '{"topic": "durable"}', ""];
  s.state.inputAnswers.push('{"topic": "durable"}');
  await s.run(Command.runWithArgs, Uri.file("/work/a.workflow.js"));
  const [invalid, valid, empty] = s.state.inputValidation;
  assert.match(invalid ?? "", /^Not valid JSON: /);
  assert.equal(valid, undefined);
  assert.equal(empty, undefined, "empty means args = null");
  assert.deepEqual(s.h.sent[0]?.args, { uri: "file:///work/a.workflow.js", args: { topic: "durable" } });
});

test("a cancelled input box launches nothing", async () => {
  const s = setup();
  s.state.inputAnswers.push(undefined);
  await s.run(Command.runWithArgs, Uri.file("/work/a.workflow.js"));
  assert.deepEqual(s.h.sent, []);
  assert.deepEqual(s.state.shown, []);
});

test("an untrusted workspace launches and resumes nothing, and says why", async () => {
  const s = setup();
  s.state.trusted = false;
  s.state.buttonAnswers.push("Manage Workspace Trust");
  await s.run(Command.run, Uri.file("/work/a.workflow.js"));
  await s.run(Command.resume, { kind: "run", runId: wire.RUN_ID } satisfies RunNode);
  await settle();
  assert.deepEqual(s.h.sent, []);
  assert.deepEqual(
    s.state.shown.map((m) => [m.level, m.message]),
    [
      ["warning", UNTRUSTED_MESSAGE],
      ["warning", UNTRUSTED_MESSAGE],
    ],
  );
  assert.deepEqual(s.state.executed.map((e) => e.command), ["workbench.trust.manage"]);
});

test("pause and stop act on the run of a tree node", async () => {
  const s = setup();
  s.h.source.emit(Notification.runStarted, wire.started());
  const node: RunNode = { kind: "run", runId: wire.RUN_ID };
  await s.run(Command.pause, node);
  await s.run(Command.stop, node);
  assert.deepEqual(s.h.sent, [
    { command: "piflow.pause", args: { runId: wire.RUN_ID } },
    { command: "piflow.stop", args: { runId: wire.RUN_ID } },
  ]);
});

test("from the palette, Resume refreshes the runs and offers only resumable ones", async () => {
  const s = setup();
  s.h.model.listed([
    { runId: "run-paused-1", uri: null, workflowName: "a", state: "paused", phase: null, agents: { total: 2, settled: 1 }, tokens: 0, costUsd: 0 },
    { runId: "run-running", uri: null, workflowName: "b", state: "running", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
  ]);
  await s.run(Command.resume);
  assert.equal(s.refreshes, 1);
  assert.deepEqual(s.state.quickPicks, [["a"]]);
  assert.deepEqual(s.h.sent, [{ command: "piflow.resume", args: { runId: "run-paused-1" } }]);
});

test("resuming a budget-exhausted run asks for a budget patch", async () => {
  const s = setup();
  s.h.source.emit(Notification.runProgress, wire.progress("budget_exhausted", []));
  s.state.inputTries = ["[1]", '{"tokens": {"hard": 5000}}'];
  s.state.inputAnswers.push('{"tokens": {"hard": 5000}}');
  await s.run(Command.resume, { kind: "run", runId: wire.RUN_ID } satisfies RunNode);
  assert.match(s.state.inputValidation[0] ?? "", /budget patch is a JSON object/);
  assert.equal(s.state.inputValidation[1], undefined);
  assert.deepEqual(s.h.sent, [{ command: "piflow.resume", args: { runId: wire.RUN_ID, budget: { tokens: { hard: 5000 } } } }]);
});

test("Approve and Reject answer the tree's checkpoint or proposal", async () => {
  const s = setup();
  s.h.source.emit(Notification.checkpoint, wire.checkpoint("ship"));
  s.h.source.emit(Notification.budgetApproval, wire.budgetApproval("p-9"));
  await s.run(Command.approve, { kind: "checkpoint", runId: wire.RUN_ID, name: "ship" } satisfies RunNode);
  await s.run(Command.reject, { kind: "proposal", runId: wire.RUN_ID, proposalId: "p-9" } satisfies RunNode);
  assert.deepEqual(s.h.sent, [
    { command: "piflow.respond", args: { runId: wire.RUN_ID, name: "ship", approved: true } },
    { command: "piflow.respond", args: { runId: wire.RUN_ID, proposalId: "p-9", approved: false } },
  ]);
});

test("Approve from the palette picks among pending approvals", async () => {
  const s = setup();
  s.h.source.emit(Notification.runStarted, wire.started());
  s.h.source.emit(Notification.checkpoint, wire.checkpoint("ship"));
  await s.run(Command.approve);
  assert.deepEqual(s.state.quickPicks, [["review: checkpoint ship"]]);
  assert.equal(s.h.sent[0]?.args.approved, true);
  await s.run(Command.approve);
  assert.deepEqual(s.state.shown.map((m) => m.message), ["piflow: No checkpoint or budget proposal is awaiting an answer."]);
});

test("Show Run Details opens the run view of a run, or of an agent's run at that agent; never an untitled file", async () => {
  const s = setup();
  s.h.source.emit(Notification.runStarted, wire.started());
  await s.run(Command.showRunDetails, { kind: "run", runId: wire.RUN_ID } satisfies RunNode);
  await s.run(Command.showRunDetails, { kind: "agent", runId: wire.RUN_ID, agentId: "writer" } satisfies RunNode);
  assert.deepEqual(s.opened, [
    [wire.RUN_ID, undefined],
    [wire.RUN_ID, "writer"],
  ]);
  assert.deepEqual(s.state.openedDocuments, []);
});

test("Run Workflow takes the active JavaScript file only when it is a script (by name or piflow.files)", async () => {
  const plain = setup();
  plain.state.activeDocument = { uri: Uri.file("/work/flows/deploy.js"), languageId: "javascript" };
  plain.state.files = [Uri.file("/work/b.workflow.js")];
  await plain.run(Command.run);
  assert.deepEqual(plain.state.quickPicks, [["b.workflow.js"]], "deploy.js is no script: the workspace's scripts are offered");

  const globbed = setup({ files: ["**/flows/*.js"] });
  globbed.state.activeDocument = { uri: Uri.file("/work/flows/deploy.js"), languageId: "javascript" };
  await globbed.run(Command.run);
  assert.deepEqual(globbed.state.quickPicks, []);
  assert.deepEqual(globbed.h.sent.map((c) => c.args.uri), ["file:///work/flows/deploy.js"]);
});

test("Show Runs focuses the view and refreshes; Restart Server restarts", async () => {
  const s = setup();
  await s.run(Command.showRuns);
  await s.run(Command.restartServer);
  assert.deepEqual(s.state.executed.map((e) => e.command), ["piflow.runs.focus"]);
  assert.equal(s.refreshes, 1);
  assert.equal(s.restarts, 1);
});

test("while the server is down, commands say so instead of failing silently", async () => {
  const s = setup({ running: false });
  await s.run(Command.run, Uri.file("/work/a.workflow.js"));
  assert.deepEqual(s.state.shown, [{ level: "error", message: `piflow: ${NOT_RUNNING}`, buttons: [] }]);
});

test("a server error is shown with its code", async () => {
  const s = setup();
  s.h.results.set("piflow.run", new Error("UNKNOWN_MODEL: Unknown model: openai/nope"));
  await s.run(Command.run, Uri.file("/work/a.workflow.js"));
  assert.deepEqual(s.state.shown.map((m) => m.message), ["piflow: UNKNOWN_MODEL: Unknown model: openai/nope"]);
});
