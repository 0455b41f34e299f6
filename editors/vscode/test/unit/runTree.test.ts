import assert from "node:assert/strict";
import { test } from "node:test";
import { Notification } from "../../src/protocol";
import { childNodes, rootNodes, runActions, viewNode, type RunNode } from "../../src/runTree";
import { RunTreeProvider } from "../../src/runTreeProvider";
import { harness, type Harness } from "./harness";
import * as wire from "./payloads";
import { createVscode } from "./vscodeStub";

function tree(h: Harness): { label: string; description: string; icon: string; context: string; children: string[] }[] {
  const lines = (node: RunNode): string[] =>
    childNodes(h.model, node).map((child) => {
      const view = viewNode(h.model, child);
      return view ? `${view.icon.id} ${view.label} — ${view.description} [${view.contextValue}]` : "(gone)";
    });
  return rootNodes(h.model).map((node) => {
    const view = viewNode(h.model, node);
    assert.ok(view);
    return {
      label: view.label,
      description: view.description,
      icon: view.icon.id,
      context: view.contextValue,
      children: lines(node),
    };
  });
}

function quiet(): Harness {
  const h = harness();
  h.notify = false;
  return h;
}

test("a started run shows at once, named by the server", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  const [run] = tree(h);
  assert.equal(run?.label, "review");
  assert.match(run.description, /^3f2a9c41 · running$/);
  assert.equal(run.icon, "sync~spin");
  assert.equal(run.context, "run pause stop");
});

test("a run without a workflow name is named after its script", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, { runId: "r1", uri: "file:///w/deploy%20all.workflow.js", workflowName: "" });
  assert.equal(tree(h)[0]?.label, "deploy all");
});

test("progress snapshots fill the run with its agents, their state, tokens and cost", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(
    Notification.runProgress,
    wire.progress(
      "running",
      [
        wire.agentWire("scout", "completed", { tokens: 12_300, costUsd: 0.0123, role: "scout" }),
        wire.agentWire("writer", "running", { tokens: 800, costUsd: 0.004, activity: "responding" }),
        wire.agentWire("critic", "queued"),
      ],
      { phase: "audit", limits: { tokens: { soft: 10_000, hard: 20_000 } } },
    ),
  );
  const [run] = tree(h);
  assert.equal(run?.description, "3f2a9c41 · running · audit · 1/3 agents · 13.1k tok · $0.02");
  assert.deepEqual(run.children, [
    "dashboard budget — tokens 13.1k/20k (66%) [budget]",
    "pass scout — completed · openai/gpt-5-mini · 12.3k tok · $0.01 [agent]",
    "sync~spin writer — running · openai/gpt-5-mini · 800 tok · $0.0040 · responding [agent]",
    "clock critic — queued · openai/gpt-5-mini [agent]",
  ]);
});

test("an awaiting checkpoint comes first with Approve/Reject, and leaves once the run goes on", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(Notification.checkpoint, wire.checkpoint("ship", "Ship?", { version: 2 }));
  h.source.emit(
    Notification.runProgress,
    wire.progress("awaiting_input", [wire.agentWire("poet", "completed")], {
      checkpoints: [{ name: "ship", prompt: "Ship?", context: { version: 2 } }],
    }),
  );
  let [run] = tree(h);
  assert.equal(run?.icon, "bell-dot");
  assert.equal(run.context, "run stop");
  assert.deepEqual(run.children[0], "question checkpoint ship — Ship? [approval checkpoint]");
  const node: RunNode = { kind: "checkpoint", runId: wire.RUN_ID, name: "ship" };
  assert.match(viewNode(h.model, node)?.tooltip ?? "", /Context: \{"version":2\}/);

  h.source.emit(Notification.runProgress, wire.progress("running", [wire.agentWire("poet", "completed")]));
  [run] = tree(h);
  assert.deepEqual(run?.children, ["pass poet — completed · openai/gpt-5-mini [agent]"]);
  assert.equal(viewNode(h.model, node), undefined, "the answered checkpoint is gone");
});

test("a budget proposal waits in the tree until the run leaves budget_exhausted", () => {
  const h = quiet();
  h.source.emit(Notification.runProgress, wire.progress("budget_exhausted", []));
  h.source.emit(Notification.budgetApproval, wire.budgetApproval("9b1c7e52-aaaa"));
  h.source.emit(Notification.runProgress, wire.progress("budget_exhausted", []));
  let [run] = tree(h);
  assert.equal(run?.context, "run resume stop");
  assert.deepEqual(run.children, ["question budget 9b1c7e52 — tokens hard 4k [approval proposal]"]);
  h.source.emit(Notification.runProgress, wire.progress("running", []));
  [run] = tree(h);
  assert.deepEqual(run?.children, []);
});

test("a finished run shows its result state or its error", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(Notification.checkpoint, wire.checkpoint());
  h.source.emit(
    Notification.runFinished,
    wire.finished("failed", { error: { code: "AGENT_FAILED", message: "Agent writer failed" } }),
  );
  const [run] = tree(h);
  assert.equal(run?.icon, "error");
  assert.equal(run.context, "run");
  assert.deepEqual(run.children, ["error AGENT_FAILED — Agent writer failed [error]"]);
  assert.deepEqual(h.finished.map((f) => f.state), ["failed"]);
  assert.ok(h.logs.some((line) => line === "[3f2a9c41] failed AGENT_FAILED: Agent writer failed"));
});

test("runs are ordered by attention, then newest first", () => {
  const h = quiet();
  h.model.listed([
    { runId: "a-done", uri: null, workflowName: "a", state: "completed", phase: null, agents: { total: 1, settled: 1 }, tokens: 0, costUsd: 0 },
    { runId: "b-running", uri: null, workflowName: "b", state: "running", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
    { runId: "c-waiting", uri: null, workflowName: "c", state: "awaiting_input", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
    { runId: "d-done", uri: null, workflowName: "d", state: "completed", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 },
  ]);
  assert.deepEqual(
    tree(h).map((r) => r.label),
    ["c", "b", "d", "a"],
  );
});

test("the lifecycle decides which run actions are offered", () => {
  assert.deepEqual(runActions("running"), { pause: true, resume: false, stop: true });
  assert.deepEqual(runActions("paused"), { pause: false, resume: true, stop: true });
  assert.deepEqual(runActions("interrupted"), { pause: false, resume: true, stop: true });
  assert.deepEqual(runActions("completed"), { pause: false, resume: false, stop: false });
});

test("the tree provider maps nodes to TreeItems and refreshes on every change", () => {
  const { api } = createVscode();
  const h = quiet();
  const loads: string[] = [];
  const provider = new RunTreeProvider(api, h.model, (runId) => loads.push(runId));
  let refreshes = 0;
  provider.onDidChangeTreeData(() => refreshes++);
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(Notification.runProgress, wire.progress("running", [wire.agentWire("poet", "running")]));
  assert.equal(refreshes, 2);

  const [root] = provider.getChildren();
  assert.ok(root);
  const item = provider.getTreeItem(root);
  assert.equal(item.label, "review");
  assert.equal(item.id, `run/${wire.RUN_ID}`);
  assert.equal(item.collapsibleState, api.TreeItemCollapsibleState.Expanded);
  assert.equal(item.contextValue, "run pause stop");
  assert.equal((item.iconPath as { id: string }).id, "sync~spin");

  const [agent] = provider.getChildren(root);
  assert.ok(agent);
  const agentItem = provider.getTreeItem(agent);
  assert.equal(agentItem.collapsibleState, api.TreeItemCollapsibleState.None);
  assert.equal(agentItem.tooltip, "poet\nstate: running\nmodel: openai/gpt-5-mini\nattempts: 1\ntokens: 0\ncost: $0");
  assert.deepEqual(agentItem.command?.command, "piflow.showRunDetails", "a click on an agent opens the run view");
  assert.deepEqual(agentItem.command.arguments, [agent]);
  assert.equal(item.command, undefined, "a click on a run expands it");
  assert.deepEqual(loads, [], "a run with a snapshot is not loaded again");

  h.source.emit(Notification.runFinished, wire.finished("completed", { result: { answer: "approved" } }));
  assert.equal(provider.getTreeItem(root).collapsibleState, api.TreeItemCollapsibleState.Collapsed);
  assert.match(provider.getTreeItem(root).tooltip as string, /\nResult: \{"answer":"approved"\}$/);
  const done = provider.getTreeItem(root).iconPath as { id: string; color?: { id: string } };
  assert.deepEqual([done.id, done.color?.id], ["pass", "testing.iconPassed"]);
  provider.dispose();
  h.source.emit(Notification.runStarted, wire.started());
  assert.equal(refreshes, 3, "a disposed provider no longer listens");
});

test("expanding a run known only from a listing loads its snapshot", () => {
  const { api } = createVscode();
  const h = quiet();
  const loads: string[] = [];
  const provider = new RunTreeProvider(api, h.model, (runId) => loads.push(runId));
  h.model.listed([
    { runId: "old-run", uri: null, workflowName: "nightly", state: "completed", phase: null, agents: { total: 3, settled: 3 }, tokens: 0, costUsd: 0 },
  ]);
  const [root] = provider.getChildren();
  assert.ok(root);
  assert.deepEqual(provider.getChildren(root), []);
  assert.deepEqual(loads, ["old-run"]);
});

test("a pi-subagents run shows its live lane board: each lane, then its stages", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  const board = (review: string, fix: string, api: string): unknown => [
    {
      call: 1,
      lanes: [
        { key: "api", state: api === "completed" ? "complete" : "running", failedStage: null,
          stages: [{ key: "write", state: api, verdict: null, error: null, runId: null }] },
        { key: "ui", state: review === "blocked" ? "blocked" : "running", failedStage: review === "blocked" ? "review" : null,
          stages: [
            { key: "write", state: "completed", verdict: null, error: null, runId: "c1" },
            { key: "review", state: review, verdict: review === "blocked" ? "blocked" : null, error: null, runId: null },
            { key: "fix", state: fix, verdict: null, error: null, runId: null },
          ] },
      ],
    },
  ];
  const emit = (lanes: unknown): void => {
    h.source.emit(Notification.runProgress, { ...(wire.progress("running", []) as object), lanes });
  };
  emit(board("running", "pending", "running"));
  const lanes = (): string[] => tree(h)[0]?.children.filter((line) => line.includes("[lane]")) ?? [];
  assert.deepEqual(lanes(), [
    "sync~spin lane api — running · 0/1 stages [lane]",
    "sync~spin lane ui — running · 1/3 stages [lane]",
  ]);
  emit(board("blocked", "skipped", "running"));
  assert.deepEqual(lanes(), [
    "sync~spin lane api — running · 0/1 stages [lane]",
    "debug-stop lane ui — blocked · 1/3 stages · at review [lane]",
  ]);
  const ui = childNodes(h.model, { kind: "run", runId: wire.RUN_ID }).find((n) => n.kind === "lane" && n.lane === "ui");
  assert.ok(ui);
  const stages = childNodes(h.model, ui).map((node) => {
    const view = viewNode(h.model, node);
    return view && `${view.icon.id} ${view.label} — ${view.description}`;
  });
  assert.deepEqual(stages, [
    "pass write — completed",
    "debug-stop review — blocked (verdict blocked)",
    "debug-step-over fix — skipped",
  ]);
  // a progress without `lanes` (an older server, or a resync) keeps the board
  h.source.emit(Notification.runProgress, wire.progress("running", []));
  assert.equal(lanes().length, 2);
});

/** The agents of the first run as an indented outline: two spaces per level of child (spec J.5). */
function outline(h: Harness): string[] {
  const lines: string[] = [];
  const walk = (node: RunNode, depth: number): void => {
    for (const child of childNodes(h.model, node)) {
      const view = viewNode(h.model, child);
      if (child.kind !== "agent" || !view) continue;
      lines.push(`${"  ".repeat(depth)}${view.label}${view.expandable ? (view.expanded ? " ▾" : " ▸") : ""}`);
      walk(child, depth + 1);
    }
  };
  const [run] = rootNodes(h.model);
  if (run) walk(run, 0);
  return lines;
}

test("child agents nest under the agent that started them, and grandchildren under theirs", () => {
  const h = quiet();
  h.source.emit(
    Notification.runProgress,
    wire.delta(
      "running",
      [
        wire.agentWire("lead", "waiting_for_child"),
        wire.agentWire("fixer", "running", { parentId: "lead" }),
        wire.agentWire("solo", "completed"),
        wire.agentWire("tester", "running", { parentId: "fixer" }),
        wire.agentWire("docs", "queued", { parentId: "lead" }),
      ],
      { total: 5, settled: 1 },
      true,
    ),
  );
  assert.deepEqual(outline(h), ["lead ▾", "  fixer ▾", "    tester", "  docs", "solo"]);
  const lead = viewNode(h.model, { kind: "agent", runId: wire.RUN_ID, agentId: "lead" });
  assert.equal(lead?.icon.id, "type-hierarchy-sub");
});

test("a delta's child waits at the top level until its parent is known, then moves under it", () => {
  const h = quiet();
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("lead", "running")], { total: 1, settled: 0 }, true));
  h.source.emit(
    Notification.runProgress,
    wire.delta("running", [wire.agentWire("tester", "running", { parentId: "fixer" })], { total: 2, settled: 0 }),
  );
  assert.deepEqual(outline(h), ["lead", "tester"]);
  h.source.emit(
    Notification.runProgress,
    wire.delta("running", [wire.agentWire("fixer", "running", { parentId: "lead" })], { total: 3, settled: 0 }),
  );
  assert.deepEqual(outline(h), ["lead ▾", "  fixer ▾", "    tester"]);
  // A progress-only delta of a child keeps the nesting.
  h.source.emit(
    Notification.runProgress,
    wire.delta("running", [wire.agentWire("tester", "completed", { parentId: "fixer" })], { total: 3, settled: 1 }),
  );
  assert.deepEqual(outline(h), ["lead ▾", "  fixer ▾", "    tester"]);
  assert.equal(h.model.agent(wire.RUN_ID, "tester")?.state, "completed");
});

test("a script's own error reads as written, without the INTERNAL_ERROR code", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(
    Notification.runFinished,
    wire.finished("failed", { error: { code: "INTERNAL_ERROR", message: "The release was rejected", authored: true } }),
  );
  const [run] = tree(h);
  assert.deepEqual(run?.children, ["error The release was rejected —  [error]"]);
  const error = viewNode(h.model, { kind: "error", runId: wire.RUN_ID });
  assert.equal(error?.tooltip, "The release was rejected");
  assert.ok(h.logs.includes("[3f2a9c41] failed The release was rejected"), h.logs.join("\n"));
  assert.ok(!h.logs.some((line) => line.includes("INTERNAL_ERROR")));
});
