import assert from "node:assert/strict";
import { test } from "node:test";
import {
  commandUri,
  decodeBudgetApproval,
  decodeCheckpoint,
  decodeRunFinished,
  decodeRunList,
  decodeRunProgress,
  decodeRunStarted,
} from "../../src/protocol";
import * as wire from "./payloads";

test("a progress snapshot decodes with agents, budget and awaiting checkpoints", () => {
  const event = decodeRunProgress(
    wire.progress("awaiting_input", [wire.agentWire("poet", "completed", { tokens: 120, costUsd: 0.002 })], {
      phase: "draft",
      checkpoints: [{ name: "ship", prompt: "Ship?", context: { n: 1 } }],
      limits: { tokens: { hard: 1000 } },
    }),
  );
  assert.ok(event);
  assert.equal(event.state, "awaiting_input");
  assert.equal(event.phase, "draft");
  assert.deepEqual(
    event.agents.map((a) => [a.id, a.state, a.tokens]),
    [["poet", "completed", 120]],
  );
  assert.deepEqual(event.budget?.limits, { tokens: { hard: 1000 } });
  assert.equal(event.budget.usage.tokens, 120);
  assert.deepEqual(event.checkpoints, [{ name: "ship", prompt: "Ship?", context: { n: 1 } }]);
  assert.equal(event.proposals, null, "the snapshot lists no proposals");
});

test("snapshot entries that carry a state count only while pending", () => {
  const event = decodeRunProgress({
    runId: "r",
    state: "running",
    agentList: [{ id: "a", state: "running" }],
    checkpoints: [
      { name: "old", prompt: "?", context: null, state: "approved" },
      { name: "new", prompt: "?", context: null, state: "awaiting" },
    ],
    proposals: [{ proposalId: "p1", state: "approved" }],
  });
  assert.deepEqual(
    event?.checkpoints.map((c) => c.name),
    ["new"],
  );
  assert.deepEqual(event.proposals, []);
  assert.equal(event.agents[0]?.label, "a", "the label falls back to the id");
});

test("payloads without a run id are rejected", () => {
  assert.equal(decodeRunProgress({ state: "running" }), undefined);
  assert.equal(decodeRunStarted(null), undefined);
  assert.equal(decodeCheckpoint({ runId: "r" }), undefined, "a checkpoint needs a name");
  assert.equal(decodeBudgetApproval({ runId: "r" }), undefined, "a proposal needs an id");
});

test("a finished run keeps its result or its error", () => {
  assert.deepEqual(decodeRunFinished(wire.finished("completed", { result: { answer: "approved" } }))?.result, {
    answer: "approved",
  });
  assert.deepEqual(
    decodeRunFinished(wire.finished("failed", { error: { code: "AGENT_FAILED", message: "boom" } }))?.error,
    { code: "AGENT_FAILED", message: "boom", authored: false },
  );
});

test("budget approvals decode consumed usage and both limit sets", () => {
  const event = decodeBudgetApproval(wire.budgetApproval("p1"));
  assert.equal(event?.proposal.proposalId, "p1");
  assert.equal(event.proposal.consumed.tokens, 2100);
  assert.deepEqual(event.proposal.previous, { tokens: { hard: 2000 } });
  assert.deepEqual(event.proposal.proposed, { tokens: { hard: 4000 } });
});

test("listRuns answers are read from {runs} or a bare list; scriptPath becomes a file URI", () => {
  const summary = {
    runId: "r1",
    uri: null,
    scriptPath: "/work/a b.workflow.js",
    workflowName: "a",
    state: "paused",
    phase: null,
    agents: { total: 3, settled: 1 },
    costUsd: 0.5,
    tokens: 900,
  };
  const fromObject = decodeRunList({ runs: [summary, { nonsense: true }] });
  assert.equal(fromObject.length, 1);
  assert.equal(fromObject[0]?.uri, "file:///work/a%20b.workflow.js");
  assert.deepEqual(fromObject[0].agents, { total: 3, settled: 1 });
  assert.equal(decodeRunList([summary]).length, 1);
  assert.deepEqual(decodeRunList("nope"), []);
});

test("a lens command's uri is read from its one argument object", () => {
  assert.equal(commandUri([{ uri: "file:///w/a.workflow.js" }]), "file:///w/a.workflow.js");
  assert.equal(commandUri([]), undefined);
  assert.equal(commandUri(["file:///w/a.workflow.js"]), undefined);
});
