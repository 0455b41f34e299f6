// Progress deltas (issue 9): a reset lists every agent, a delta only the changed ones; the
// editor merges them in O(changed agents) and resyncs through piflow.showRun when it missed some.

import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeRunDetail, decodeRunProgress, Notification, type AgentView } from "../../src/protocol";
import { runDescription } from "../../src/runTree";
import { RunTreeProvider } from "../../src/runTreeProvider";
import { harness, type Harness } from "./harness";
import * as wire from "./payloads";
import { createVscode } from "./vscodeStub";

function quiet(): Harness {
  const h = harness();
  h.notify = false;
  return h;
}

function agents(h: Harness): string[] {
  return (h.model.get(wire.RUN_ID)?.agents ?? []).map((a) => `${a.id}:${a.state}`);
}

test("reset and delta flags decode; a message without reset is a full snapshot", () => {
  const full = decodeRunProgress(wire.progress("running", [wire.agentWire("a", "running")]));
  assert.equal(full?.reset, true, "today's snapshots carry no reset: they list every agent");
  assert.equal(full.agentCounts, null);
  const change = decodeRunProgress(wire.delta("running", [], { total: 7, settled: 2 }));
  assert.equal(change?.reset, false);
  assert.deepEqual(change.agentCounts, { total: 7, settled: 2 });
  const detail = decodeRunDetail(wire.showRun("running", [wire.agentDetailWire("a", "completed")]));
  assert.deepEqual(detail?.agentCounts, { total: 1, settled: 1 }, "showRun counts agents under `agents`");
  assert.equal(detail.reset, true);
});

test("a reset then deltas give the merged agent list, and totals from agentCounts", () => {
  const h = quiet();
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(
    Notification.runProgress,
    wire.delta("running", [wire.agentWire("a", "running"), wire.agentWire("b", "queued"), wire.agentWire("c", "queued")], { total: 3, settled: 0 }, true),
  );
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("b", "completed", { tokens: 500 })], { total: 4, settled: 1 }, false, { tokens: 500 }));
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("d", "running"), wire.agentWire("a", "failed")], { total: 4, settled: 2 }, false, { tokens: 900 }));
  assert.deepEqual(agents(h), ["a:failed", "b:completed", "c:queued", "d:running"], "upserted by id, in order of first sight");
  const run = h.model.get(wire.RUN_ID);
  assert.ok(run);
  assert.equal(runDescription(run), "running · 2/4 agents · 900 tok", "counts of the whole run, not of the last message");
  assert.equal(h.model.agent(wire.RUN_ID, "b")?.tokens, 500);

  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("z", "running")], { total: 1, settled: 0 }, true));
  assert.deepEqual(agents(h), ["z:running"], "a reset replaces the list");
  assert.equal(h.model.agent(wire.RUN_ID, "a"), undefined);
  assert.deepEqual(h.sent, [], "nothing was missed: no showRun");
});

test("a snapshot without reset (an older server) replaces the list and counts it", () => {
  const h = quiet();
  h.source.emit(Notification.runProgress, wire.progress("running", [wire.agentWire("a", "completed", { tokens: 10 }), wire.agentWire("b", "running")]));
  h.source.emit(Notification.runProgress, wire.progress("running", [wire.agentWire("b", "completed")]));
  assert.deepEqual(agents(h), ["b:completed"]);
  assert.deepEqual(h.model.get(wire.RUN_ID)?.agentCounts, { total: 1, settled: 1 });
});

test("a delta for a run never seen whole fetches piflow.showRun once, then merges on top of it", async () => {
  const h = quiet();
  h.results.set(
    "piflow.showRun",
    wire.showRun("running", [wire.agentDetailWire("a", "completed"), wire.agentDetailWire("b", "running")], {
      agents: { total: 2, settled: 1 },
    }),
  );
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("b", "running")], { total: 2, settled: 1 }));
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("b", "running", { tokens: 5 })], { total: 2, settled: 1 }));
  assert.equal(h.model.get(wire.RUN_ID)?.agents, null, "a partial list is not shown as the run's agents");
  assert.equal(runDescription(h.model.get(wire.RUN_ID) ?? assert.fail()), "running · 1/2 agents", "the counts hold meanwhile");
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(h.sent, [{ command: "piflow.showRun", args: { runId: wire.RUN_ID } }], "one showRun for the gap");
  assert.deepEqual(agents(h), ["a:completed", "b:running"]);

  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("b", "completed")], { total: 2, settled: 2 }));
  assert.deepEqual(agents(h), ["a:completed", "b:completed"]);
  assert.equal(h.sent.length, 1, "merged deltas need no more snapshots");
});

/** An agent whose fields count their reads: any view or merge that walks the whole run shows up. */
function counted(agent: AgentView, reads: { count: number }): AgentView {
  return new Proxy(agent, {
    get(target, key, receiver) {
      reads.count++;
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
}

test("100 deltas of 5 agents into a 3,000-agent run cost what changed, in the model and the tree", () => {
  const h = quiet();
  const { api } = createVscode();
  const tree = new RunTreeProvider(api, h.model, () => undefined, 60_000);
  const fired: (string | number)[] = [];
  tree.onDidChangeTreeData((element) => {
    fired.push(element === undefined ? "root" : Array.isArray(element) ? element.length : element.kind);
    // As VS Code does: the refreshed items are asked for again.
    for (const node of Array.isArray(element) ? element : []) tree.getTreeItem(node);
  });
  const total = 3000;
  const reads = { count: 0 };
  const everyone = Array.from({ length: total }, (_, i) => counted(decodeAgent(wire.agentWire(`agent-${i}`, "queued")), reads));
  h.model.progress({ ...decodeProgress(wire.delta("running", [], { total, settled: 0 }, true)), agents: everyone });
  const [root] = tree.getChildren();
  assert.ok(root);
  assert.equal(tree.getChildren(root).length, total, "the expanded run lists every agent once");
  reads.count = 0;
  fired.length = 0;

  let settled = 0;
  for (let round = 0; round < 100; round++) {
    const changed = Array.from({ length: 5 }, (_, k) => wire.agentWire(`agent-${total - 1 - (round * 5 + k)}`, "completed"));
    settled += 5;
    h.source.emit(Notification.runProgress, wire.delta("running", changed, { total, settled }));
  }
  // Replacing an agent reads its old state, tokens and cost once (the tally), and its parent: 4 reads × 500.
  assert.ok(reads.count <= 100 * 5 * 4, `the untouched agents were read ${reads.count} times`);
  assert.deepEqual(fired, Array(100).fill(5), "each delta refreshes its 5 tree items, never the whole run");
  const run = h.model.get(wire.RUN_ID);
  assert.ok(run?.agents);
  assert.equal(run.agents.length, total);
  assert.equal(run.agents.filter((a) => a.state === "completed").length, 500);
  assert.equal(runDescription(run), `running · 500/${total} agents`);
  tree.dispose();
});

test("the run's tree node refreshes at once on a state change, batched for progress and new agents", async () => {
  const h = quiet();
  const { api } = createVscode();
  const tree = new RunTreeProvider(api, h.model, () => undefined, 20);
  const fired: string[] = [];
  tree.onDidChangeTreeData((element) => fired.push(element === undefined ? "root" : Array.isArray(element) ? `agents ${element.length}` : element.kind));
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("a", "running")], { total: 1, settled: 0 }, true));
  const [root] = tree.getChildren();
  assert.ok(root);
  tree.getChildren(root);
  fired.length = 0;

  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("b", "queued")], { total: 2, settled: 0 }));
  h.source.emit(Notification.runProgress, wire.delta("running", [wire.agentWire("a", "completed")], { total: 2, settled: 1 }));
  assert.deepEqual(fired, ["agents 1"], "a new agent waits for the batched run refresh");
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(fired, ["agents 1", "run"], "one refresh of the run for the burst");
  assert.deepEqual(
    tree.getChildren(root).map((node) => tree.getTreeItem(node).label),
    ["a", "b"],
  );

  h.source.emit(Notification.runProgress, wire.delta("paused", [], { total: 2, settled: 1 }));
  assert.deepEqual(fired.slice(2), ["run"], "a new state shows at once");
  h.model.listed([{ runId: "other", uri: null, workflowName: "other", state: "awaiting_input", phase: null, agents: { total: 0, settled: 0 }, tokens: 0, costUsd: 0 }]);
  assert.deepEqual(fired.slice(3), ["root"], "another run: the root refreshes");
  tree.dispose();
});

function decodeProgress(payload: unknown): ReturnType<typeof decodeRunProgress> & object {
  const event = decodeRunProgress(payload);
  assert.ok(event);
  return event;
}

function decodeAgent(agent: wire.AgentWire): AgentView {
  const [decoded] = decodeProgress({ runId: "x", agents: [agent] }).agents;
  assert.ok(decoded);
  return decoded;
}
