import assert from "node:assert/strict";
import { test } from "node:test";
import { APPROVE, REJECT } from "../../src/approvals";
import { Notification } from "../../src/protocol";
import { harness } from "./harness";
import * as wire from "./payloads";
import { settle } from "./vscodeStub";

test("a checkpoint prompts once with Approve and Reject, and Approve answers it by label", async () => {
  const h = harness();
  h.answers.push(APPROVE);
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(Notification.checkpoint, wire.checkpoint("ship", "Ship?", { version: 2 }));
  // The snapshot that follows lists the same checkpoint: no second prompt.
  h.source.emit(
    Notification.runProgress,
    wire.progress("awaiting_input", [], { checkpoints: [{ name: "ship", prompt: "Ship?", context: { version: 2 } }] }),
  );
  await settle();
  assert.deepEqual(h.prompts, [
    { message: 'Workflow review checkpoint ship: Ship? — context: {"version":2}', buttons: [APPROVE, REJECT] },
  ]);
  assert.deepEqual(h.sent, [{ command: "piflow.respond", args: { runId: wire.RUN_ID, name: "ship", approved: true } }]);
  assert.deepEqual(h.model.get(wire.RUN_ID)?.checkpoints, [], "answered: no longer pending");
});

test("a dismissed prompt sends nothing; the tree can still answer, once", async () => {
  const h = harness();
  h.answers.push(undefined);
  h.source.emit(Notification.checkpoint, wire.checkpoint("ship#2"));
  await settle();
  assert.equal(h.prompts.length, 1);
  assert.deepEqual(h.sent, []);

  const approval = { kind: "checkpoint", runId: wire.RUN_ID, name: "ship#2" } as const;
  assert.equal(await h.approvals.answer(approval, false), true);
  assert.equal(await h.approvals.answer(approval, true), false, "a second answer is not sent");
  assert.deepEqual(h.sent, [{ command: "piflow.respond", args: { runId: wire.RUN_ID, name: "ship#2", approved: false } }]);
});

test("a checkpoint seen first in a snapshot (a run launched elsewhere) prompts too", async () => {
  const h = harness();
  h.answers.push(REJECT);
  h.source.emit(
    Notification.runProgress,
    wire.progress("awaiting_input", [], { checkpoints: [{ name: "deploy", prompt: "Deploy now?", context: null }] }),
  );
  await settle();
  assert.deepEqual(h.prompts.map((p) => p.message), ["Workflow review checkpoint deploy: Deploy now?"]);
  assert.deepEqual(h.sent[0]?.args, { runId: wire.RUN_ID, name: "deploy", approved: false });
});

test("a failed answer is reported and can be tried again", async () => {
  const h = harness();
  h.notify = false;
  h.source.emit(Notification.checkpoint, wire.checkpoint());
  h.results.set("piflow.respond", new Error("RESUME_INCOMPATIBLE: Unknown workflow run"));
  const approval = { kind: "checkpoint", runId: wire.RUN_ID, name: "ship" } as const;
  assert.equal(await h.approvals.answer(approval, true), false);
  assert.deepEqual(h.errors, ["piflow could not send the answer: RESUME_INCOMPATIBLE: Unknown workflow run"]);
  assert.equal(h.model.get(wire.RUN_ID)?.checkpoints.length, 1, "still pending");
  h.results.delete("piflow.respond");
  assert.equal(await h.approvals.answer(approval, true), true);
});

test("a budget proposal prompts with the limits and answers by proposal id", async () => {
  const h = harness();
  h.answers.push(APPROVE);
  h.source.emit(Notification.runStarted, wire.started());
  h.source.emit(Notification.budgetApproval, wire.budgetApproval("p-1"));
  await settle();
  assert.deepEqual(h.prompts.map((p) => p.message), [
    "Workflow review (3f2a9c41) asks to raise its budget: tokens hard 2k → tokens hard 4k " +
      "(consumed: tokens 2.1k, costUsd $0.42, durationMs 5k, agentLaunches 3).",
  ]);
  assert.deepEqual(h.sent, [{ command: "piflow.respond", args: { runId: wire.RUN_ID, proposalId: "p-1", approved: true } }]);
  assert.deepEqual(h.model.get(wire.RUN_ID)?.proposals, []);
});

test("with notifications turned off nothing pops up, and the approval stays pending", async () => {
  const h = harness();
  h.notify = false;
  h.source.emit(Notification.checkpoint, wire.checkpoint());
  await settle();
  assert.deepEqual(h.prompts, []);
  assert.equal(h.model.get(wire.RUN_ID)?.checkpoints.length, 1);
});
