import assert from "node:assert/strict";
import { test } from "node:test";
import type * as vscode from "vscode";
import { Notification, decodeRunDetail, type RunDetail } from "../../src/protocol";
import { RunLoader } from "../../src/runLoader";
import { agentOutputText, parseRunViewQuery, renderRun, RUN_VIEW_SCHEME, runViewLocation } from "../../src/runView";
import { RunViewProvider } from "../../src/runViewProvider";
import { childNodes, rootNodes, viewNode } from "../../src/runTree";
import { harness, type Harness } from "./harness";
import * as wire from "./payloads";
import { createVscode, settle, Uri } from "./vscodeStub";

const TRANSCRIPT = "/state/piflow/transcripts/critic-2.jsonl";

function detail(state: string, agents: Record<string, unknown>[], fields: Record<string, unknown> = {}): RunDetail {
  const decoded = decodeRunDetail(wire.showRun(state, agents, fields));
  assert.ok(decoded);
  return decoded;
}

const writer = wire.agentDetailWire("writer", "completed", {
  output: { title: "Durable", lines: 2 },
  outputPreview: '{"title":"Durable","lines":2}',
});
const critic = wire.agentDetailWire("critic", "failed", {
  attempts: 2,
  error: { code: "AGENT_FAILED", message: "model refused" },
  transcriptPath: TRANSCRIPT,
  attemptList: [
    { number: 1, state: "failed", error: { code: "TIMEOUT", message: "took too long" }, tokens: 10, costUsd: 0 },
    { number: 2, state: "failed", error: { code: "AGENT_FAILED", message: "model refused" }, transcriptPath: TRANSCRIPT, tokens: 20, costUsd: 0.01 },
  ],
});
const big = wire.agentDetailWire("summarizer", "completed", { outputPreview: '"a very long answer…', outputTruncated: true });

test("showRun's snapshot decodes with each agent's output, error, attempts and transcript", () => {
  const run = detail("failed", [writer, critic, big], { error: { code: "AGENT_FAILED", message: "critic failed" } });
  assert.deepEqual(
    run.agents.map((a) => [a.label, a.hasOutput, a.outputTruncated, a.transcriptPath, a.attemptList.length]),
    [
      ["writer", true, false, null, 0],
      ["critic", false, false, TRANSCRIPT, 2],
      ["summarizer", false, true, null, 0],
    ],
  );
  assert.deepEqual(run.agents[1]?.attemptList[0]?.error, { code: "TIMEOUT", message: "took too long", authored: false });
  assert.deepEqual(run.error, { code: "AGENT_FAILED", message: "critic failed", authored: false });
});

test("the run view shows the state, result, every agent's output, error, attempts and transcript", () => {
  const rendered = renderRun(detail("completed", [writer, critic, big], { result: { shipped: true } }));
  const text = rendered.text;
  assert.match(text, /^# review — completed\n/);
  assert.match(text, /## Result\n\n```json\n\{\n {2}"shipped": true\n\}\n```/);
  assert.match(text, /### writer\n\ncompleted · openai\/gpt-5-mini · 1 attempt · 0 tok · \$0\n\n\*\*Output\*\*\n\n```json\n\{\n {2}"title": "Durable",/);
  assert.match(text, /### critic\n\nfailed · openai\/gpt-5-mini · 2 attempts .*\n\n\*\*Error\*\* AGENT_FAILED: model refused\n/);
  assert.match(text, /- #1 failed · 10 tok · \$0 · TIMEOUT: took too long\n/);
  assert.match(text, /\*\*Output\*\* \(preview\) "a very long answer…\nFull output: summarizer output\.md\n/);
  const lines = text.split("\n");
  const linked = rendered.links.map((link) => [lines[link.line]?.slice(link.start, link.end), link.target.kind]);
  assert.deepEqual(linked, [
    [wire.URI, "uri"],
    [TRANSCRIPT, "file"],
    [TRANSCRIPT, "file"],
    ["summarizer output.md", "view"],
  ]);
  assert.equal(lines[rendered.agentLines.get("critic") ?? -1], "### critic");
});

test("a string output is shown as text, and a run without agents says so", () => {
  const prose = wire.agentDetailWire("poet", "completed", { output: "Roses are red.\nDone.", outputPreview: "Roses are red. Done." });
  const [agent] = detail("completed", [prose]).agents;
  assert.ok(agent);
  assert.equal(agentOutputText(agent), "Roses are red.\nDone.");
  assert.match(renderRun(detail("completed", [prose])).text, /```text\nRoses are red\.\nDone\.\n```/);
  assert.match(renderRun(detail("running", [])).text, /## Agents\n\n\(none yet\)/);
});

test("a run view's address names its tab and carries the run (and agent) it shows", () => {
  const run = runViewLocation({ kind: "run", runId: wire.RUN_ID }, "review");
  assert.equal(run.path, "/review 3f2a9c41.md");
  assert.deepEqual(parseRunViewQuery(run.query), { kind: "run", runId: wire.RUN_ID });
  const agent = runViewLocation({ kind: "agent", runId: wire.RUN_ID, agentId: `${wire.RUN_ID}:1` }, "a/b");
  assert.equal(agent.path, "/a_b output.md");
  assert.deepEqual(parseRunViewQuery(agent.query), { kind: "agent", runId: wire.RUN_ID, agentId: `${wire.RUN_ID}:1` });
  assert.equal(parseRunViewQuery("x=1"), undefined);
});

function provider(h: Harness, running = true) {
  const { api, state } = createVscode();
  const views = new RunViewProvider(api, h.model, () => (running ? h.server : undefined), 0);
  state.contentProviders.set(RUN_VIEW_SCHEME, views);
  return { api, state, views };
}

test("the run view is a read-only piflow-run: document filled from piflow.showRun, with clickable transcripts", async () => {
  const h = harness();
  h.notify = false;
  h.source.emit(Notification.runStarted, wire.started());
  h.results.set("piflow.showRun", wire.showRun("failed", [critic]));
  const { state, views } = provider(h);
  await views.open(wire.RUN_ID, "critic");
  const [opened] = state.openedDocuments;
  assert.ok(opened instanceof Uri);
  assert.equal(opened.scheme, RUN_VIEW_SCHEME, "a virtual document, not an untitled one");
  assert.equal(opened.path, "/review 3f2a9c41.md");
  assert.deepEqual(h.sent, [{ command: "piflow.showRun", args: { runId: wire.RUN_ID } }]);
  assert.deepEqual(state.shownDocuments.map((s) => s.options), [{ preview: false }]);
  const links = views.provideDocumentLinks({ uri: opened } as unknown as vscode.TextDocument);
  assert.deepEqual(
    links.map((link) => [link.target?.scheme, link.target?.fsPath]),
    [
      ["file", "/work/review.workflow.js"],
      ["file", TRANSCRIPT],
      ["file", TRANSCRIPT],
    ],
  );
  views.dispose();
});

test("an agent's full output comes from piflow.showAgent", async () => {
  const h = harness();
  h.results.set("piflow.showAgent", wire.agentDetailWire("summarizer", "completed", { output: "the whole answer" }));
  const { api, views } = provider(h);
  const uri = views.uri({ kind: "agent", runId: wire.RUN_ID, agentId: "summarizer" }, "summarizer");
  assert.equal(await views.provideTextDocumentContent(uri), "the whole answer");
  assert.deepEqual(h.sent, [{ command: "piflow.showAgent", args: { runId: wire.RUN_ID, agentId: "summarizer" } }]);
  assert.equal(
    await views.provideTextDocumentContent(api.Uri.from({ scheme: RUN_VIEW_SCHEME, path: "/x.md" })),
    "Not a piflow run: piflow-run:/x.md",
  );
  views.dispose();
});

test("an open run view refreshes when its run changes, and says when the server is down", async () => {
  const h = harness();
  h.notify = false;
  h.source.emit(Notification.runStarted, wire.started());
  h.results.set("piflow.showRun", wire.showRun("running", [wire.agentDetailWire("writer", "running")]));
  const { views } = provider(h);
  const refreshed: string[] = [];
  views.onDidChange((uri) => refreshed.push(uri.path));
  const uri = views.uri({ kind: "run", runId: wire.RUN_ID }, "review");
  await views.provideTextDocumentContent(uri);
  h.source.emit(Notification.runProgress, wire.progress("running", [wire.agentWire("writer", "completed")]));
  h.source.emit(Notification.runProgress, wire.progress("running", [wire.agentWire("writer", "completed")]));
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(refreshed, ["/review 3f2a9c41.md"], "one refresh for a burst of changes");
  views.dispose();

  const down = provider(harness(), false);
  assert.match(await down.views.provideTextDocumentContent(uri), /piflow server is not running/);
  down.views.dispose();
});

test("a run waiting since before the window opened gets its checkpoint row, agents and prompt from its snapshot", async () => {
  const h = harness();
  h.answers.push(undefined);
  h.model.listed([
    { runId: wire.RUN_ID, uri: wire.URI, workflowName: "review", state: "awaiting_input", phase: "draft", agents: { total: 1, settled: 1 }, tokens: 64, costUsd: 0 },
    { runId: "done-run", uri: null, workflowName: "old", state: "completed", phase: null, agents: { total: 1, settled: 1 }, tokens: 0, costUsd: 0 },
  ]);
  h.results.set(
    "piflow.showRun",
    wire.showRun("awaiting_input", [writer], {
      checkpoints: [
        { name: "ship", prompt: "Ship?", context: null, state: "awaiting" },
        { name: "draft", prompt: "Draft ok?", context: null, state: "approved" },
      ],
    }),
  );
  const loader = new RunLoader(
    h.model,
    () => h.server,
    () => {
      h.approvals.promptPending();
    },
    (line) => h.logs.push(line),
  );
  await loader.loadActive();
  assert.deepEqual(h.sent.map((c) => c.args.runId), [wire.RUN_ID], "only runs still going are loaded at once");
  const [run] = rootNodes(h.model);
  assert.ok(run);
  assert.deepEqual(
    childNodes(h.model, run).map((node) => viewNode(h.model, node)?.label),
    ["checkpoint ship", "writer"],
  );
  await settle();
  assert.deepEqual(h.prompts.map((p) => p.message), ["Workflow review checkpoint ship: Ship?"]);
  await loader.load(wire.RUN_ID);
  assert.equal(h.sent.length, 1, "a run with a snapshot is not fetched again");
});

test("a failed snapshot fetch is logged and tried again on the next expansion", async () => {
  const h = harness();
  h.model.listed([
    { runId: "r1", uri: null, workflowName: "old", state: "completed", phase: null, agents: { total: 1, settled: 1 }, tokens: 0, costUsd: 0 },
  ]);
  h.results.set("piflow.showRun", new Error("RUN_NOT_FOUND: no run r1"));
  const loader = new RunLoader(h.model, () => h.server, () => undefined, (line) => h.logs.push(line));
  await Promise.all([loader.load("r1"), loader.load("r1")]);
  assert.equal(h.sent.length, 1, "one request for two expansions at once");
  assert.deepEqual(h.logs, ["piflow.showRun r1 failed: RUN_NOT_FOUND: no run r1"]);
  await loader.load("r1");
  assert.equal(h.sent.length, 2);
});

test("the run view of a pi-subagents run draws its lane board from showRun's subagents", () => {
  const subagents = {
    children: [], hostSteps: [], emits: [], console: [],
    lanes: [{ call: 1, lanes: [{ key: "ui", state: "blocked", failedStage: "review", stages: [
      { key: "write", state: "completed", verdict: null, error: null, runId: "c1" },
      { key: "review", state: "blocked", verdict: "blocked", error: null, runId: "c2" },
      { key: "fix", state: "skipped", verdict: null, error: null, runId: null },
    ] }] }],
  };
  const text = renderRun(detail("completed", [writer], { subagents })).text;
  assert.match(text, /## Lanes\n\n- \*\*ui\*\* blocked: write completed → review blocked \(verdict blocked\) → fix skipped\n/);
  assert.doesNotMatch(renderRun(detail("completed", [writer])).text, /## Lanes/);
});

test("the run view lists child agents right under their parent, indented one level deeper", () => {
  const rendered = renderRun(
    detail("running", [
      wire.agentDetailWire("lead", "waiting_for_child"),
      wire.agentDetailWire("solo", "completed"),
      wire.agentDetailWire("fixer", "running", { parentId: "lead" }),
      wire.agentDetailWire("tester", "queued", { parentId: "fixer" }),
      wire.agentDetailWire("orphan", "queued", { parentId: "gone" }),
    ]),
  );
  const headings = rendered.text.split("\n").filter((line) => line.startsWith("###"));
  assert.deepEqual(headings, ["### lead", "#### ␣␣fixer", "##### ␣␣␣␣tester", "### solo", "### orphan"].map((h) => h.replace(/␣/g, " ")));
  assert.equal(rendered.text.split("\n")[rendered.agentLines.get("tester") ?? -1], "#####     tester");
});

test("the run view shows a script's own error as written, and a coded error with its code", () => {
  const authored = renderRun(
    detail("failed", [], { error: { code: "INTERNAL_ERROR", message: "The release was rejected", authored: true } }),
  );
  assert.match(authored.text, /## Error\n\nThe release was rejected\n/);
  assert.doesNotMatch(authored.text, /INTERNAL_ERROR/);
  const coded = renderRun(detail("failed", [], { error: { code: "AGENT_FAILED", message: "critic failed" } }));
  assert.match(coded.text, /## Error\n\nAGENT_FAILED: critic failed\n/);
});
