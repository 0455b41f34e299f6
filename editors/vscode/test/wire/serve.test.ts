// The extension's protocol code against a real `piflow serve` over stdio, through the JSON-RPC
// layer vscode-languageclient itself uses: run → progress → checkpoint → respond → finished.
// The server is $PIFLOW_SERVER (relative to editors/vscode), by default the repository's venv.

import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import {
  createProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type ProtocolConnection,
} from "vscode-languageserver-protocol/node";
import { APPROVE, ApprovalFlow } from "../../src/approvals";
import { bindNotifications } from "../../src/notifications";
import type { RunFinished } from "../../src/protocol";
import { RunLoader } from "../../src/runLoader";
import { RunModel } from "../../src/runModel";
import { childNodes, rootNodes, viewNode } from "../../src/runTree";
import { agentOutputText, renderRun } from "../../src/runView";
import { ServerCommands } from "../../src/serverCommands";

const packageRoot = join(__dirname, "..", "..", "..");
const serverPath = resolve(packageRoot, process.env.PIFLOW_SERVER ?? "../../.venv/bin/piflow");
const skip = existsSync(serverPath) ? false : `piflow server not found at ${serverPath} (set PIFLOW_SERVER)`;

const SCRIPT = `phase("draft");
const draft = await agent("Write one line about durable workflows.", { label: "writer" });
const answer = await checkpoint({ name: "ship", prompt: "Ship?", context: null });
log("answer: " + answer);
return { draft, answer };
`;

interface Session {
  connection: ProtocolConnection;
  process: ChildProcessWithoutNullStreams;
  stderr: string[];
  workspace: string;
  /** Rejects when the server exits (before `dispose`), with what it printed. */
  exited: Promise<never>;
  dispose(): Promise<void>;
}

/** `piflow serve` in a temporary project, with HOME and XDG directories of its own. */
function startServer(): Session {
  const root = mkdtempSync(join(tmpdir(), "piflow-wire-"));
  const home = join(root, "home");
  const workspace = join(root, "project");
  for (const dir of [home, workspace]) mkdirSync(dir, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_CACHE_HOME: join(home, ".cache"),
  };
  const child = spawn(serverPath, ["serve"], { cwd: workspace, env });
  const stderr: string[] = [];
  child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
  const connection = createProtocolConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
  let disposing = false;
  const exited = new Promise<never>((_, fail) => {
    child.once("exit", (code, signal) => {
      if (!disposing) fail(new Error(`piflow serve exited (${signal ?? String(code)}):\n${stderr.join("")}`));
    });
  });
  exited.catch(() => undefined);
  return {
    connection,
    process: child,
    stderr,
    workspace,
    exited,
    dispose: async () => {
      disposing = true;
      const gone = new Promise((done) => child.once("exit", done));
      if (child.exitCode === null) {
        await connection.sendRequest("shutdown").catch(() => undefined);
        await connection.sendNotification("exit").catch(() => undefined);
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await gone;
        clearTimeout(timer);
      }
      connection.dispose();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The promise's value, unless the server exits or `ms` pass first. */
async function within<T>(promise: Promise<T>, ms: number, what: string, session: Session): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, fail) => {
    timer = setTimeout(() => {
      fail(new Error(`timed out after ${ms} ms waiting for ${what}; server stderr:\n${session.stderr.join("")}`));
    }, ms);
  });
  try {
    return await Promise.race([promise, session.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

test("a run launched through the extension's protocol code goes to a checkpoint, is approved and finishes", { skip, timeout: 90_000 }, async () => {
  const session = startServer();
  const { connection } = session;
  try {
    const scriptPath = join(session.workspace, "ship.workflow.js");
    writeFileSync(scriptPath, SCRIPT);
    const uri = pathToFileURL(scriptPath).toString();

    // What a client must answer for the server not to wait on it.
    connection.onRequest("window/workDoneProgress/create", () => null);
    connection.onRequest("client/registerCapability", () => null);
    connection.onRequest("client/unregisterCapability", () => null);
    connection.onRequest("workspace/configuration", (params: { items: unknown[] }) => params.items.map(() => null));
    connection.onRequest("window/showMessageRequest", () => null);
    connection.onRequest("workspace/codeLens/refresh", () => null);
    connection.onRequest("workspace/inlayHint/refresh", () => null);
    connection.onRequest("workspace/diagnostic/refresh", () => null);

    const sent: { command: string; args: Record<string, unknown> }[] = [];
    const server = new ServerCommands(async (command, args) => {
      sent.push({ command, args });
      return connection.sendRequest("workspace/executeCommand", { command, arguments: [args] });
    });
    const model = new RunModel();
    const treeAtCheckpoint: string[] = [];
    const prompts: string[] = [];
    const approvals = new ApprovalFlow(model, () => server, {
      ask: (message) => {
        prompts.push(message);
        for (const run of rootNodes(model)) {
          for (const node of childNodes(model, run)) {
            const view = viewNode(model, node);
            if (view) treeAtCheckpoint.push(`${view.label} [${view.contextValue}]`);
          }
        }
        return Promise.resolve(APPROVE);
      },
      error: (message) => assert.fail(message),
      notify: () => true,
    });
    const logs: string[] = [];
    let finish: (event: RunFinished) => void = () => undefined;
    const finished = new Promise<RunFinished>((done) => (finish = done));
    const loader = new RunLoader(
      model,
      () => server,
      () => {
        approvals.promptPending();
      },
      (line) => logs.push(line),
    );
    bindNotifications(connection, {
      model,
      approvals,
      log: (line) => logs.push(line),
      finished: (event) => {
        finish(event);
      },
      resync: (runId) => void loader.load(runId),
    });
    connection.listen();

    await within(
      connection.sendRequest("initialize", {
        processId: process.pid,
        rootUri: pathToFileURL(session.workspace).toString(),
        workspaceFolders: [{ uri: pathToFileURL(session.workspace).toString(), name: "project" }],
        capabilities: { window: { workDoneProgress: true }, workspace: { workspaceFolders: true } },
        initializationOptions: { piflow: { customNotifications: true } },
      }),
      30_000,
      "initialize",
      session,
    );
    await connection.sendNotification("initialized", {});
    await connection.sendNotification("textDocument/didOpen", {
      // As VS Code sends it: a workflow script stays JavaScript.
      textDocument: { uri, languageId: "javascript", version: 1, text: SCRIPT },
    });

    const runId = await within(server.run(uri), 30_000, "piflow.run", session);
    const result = await within(finished, 60_000, "piflow/runFinished", session);

    assert.equal(result.runId, runId);
    assert.equal(result.state, "completed", `run ended ${result.state}: ${JSON.stringify(result.error)}`);
    assert.deepEqual((result.result as { answer: string }).answer, "approved");

    assert.deepEqual(prompts, ["Workflow ship checkpoint ship: Ship?"]);
    assert.ok(treeAtCheckpoint.includes("checkpoint ship [approval checkpoint]"), treeAtCheckpoint.join("\n"));
    assert.deepEqual(
      sent.filter((c) => c.command === "piflow.respond").map((c) => c.args),
      [{ runId, name: "ship", approved: true }],
    );

    const run = model.get(runId);
    assert.ok(run, "the run is in the model");
    assert.equal(run.state, "completed");
    assert.deepEqual(
      run.agents?.map((a) => [a.label, a.state]),
      [["writer", "completed"]],
      "progress snapshots listed the agent",
    );
    assert.deepEqual(run.checkpoints, []);
    assert.ok(logs.some((line) => line.includes("answer: approved")), logs.join("\n"));

    const listed = await server.listRuns(uri);
    assert.deepEqual(
      listed.map((r) => [r.runId, r.state]),
      [[runId, "completed"]],
    );

    // The run view: what the agent answered, from showRun, and in full from showAgent.
    const detail = await within(server.showRun(runId), 30_000, "piflow.showRun", session);
    const view = renderRun(detail).text;
    assert.match(view, /^# ship — completed\n/);
    assert.match(view, /### writer\n\ncompleted · scripted\/default · 1 attempt/);
    assert.match(view, /\*\*Output\*\*\n\n```text\n\[scripted\] Write one line about durable workflows\.\n```/);
    assert.match(view, /## Result\n\n```json\n\{\n {2}"draft": "\[scripted\] Write one line/);
    const [agentId] = detail.agents.map((a) => a.id);
    assert.ok(agentId);
    const agent = await within(server.showAgent(runId, agentId), 30_000, "piflow.showAgent", session);
    assert.equal(agentOutputText(agent), "[scripted] Write one line about durable workflows.");
  } finally {
    await session.dispose();
  }
});
