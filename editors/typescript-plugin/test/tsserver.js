// A minimal client of a real tsserver process speaking its JSON protocol, for the plugin's tests.
"use strict";

const { spawn } = require("child_process");
const path = require("path");

const TSSERVER = path.join(__dirname, "..", "node_modules", "typescript", "lib", "tsserver.js");

/**
 * Starts tsserver as VS Code does (one inferred project per workspace root); `plugin` is undefined
 * (no plugin) or `{probeLocation}` to load piflow-typescript-plugin as a global plugin.
 */
function startTsserver({ plugin, cwd } = {}) {
  const argv = [TSSERVER, "--useInferredProjectPerProjectRoot", "--disableAutomaticTypingAcquisition", "--suppressDiagnosticEvents"];
  if (plugin) argv.push("--globalPlugins", "piflow-typescript-plugin", "--pluginProbeLocations", plugin.probeLocation);
  if (process.env.PIFLOW_TSSERVER_LOG) argv.push("--logVerbosity", "verbose", "--logFile", process.env.PIFLOW_TSSERVER_LOG);
  const child = spawn(process.execPath, argv, { cwd, stdio: ["pipe", "pipe", "inherit"] });
  let buffer = Buffer.alloc(0);
  let seq = 0;
  const pending = new Map();
  child.stdout.on("data", (data) => {
    buffer = Buffer.concat([buffer, data]);
    for (;;) {
      const header = /Content-Length: (\d+)\r\n\r\n/.exec(buffer.toString("latin1"));
      if (!header) return;
      const start = header.index + header[0].length;
      const end = start + Number(header[1]);
      if (buffer.length < end) return;
      const message = JSON.parse(buffer.subarray(start, end).toString("utf8"));
      buffer = buffer.subarray(end);
      if (message.type === "response" && pending.has(message.request_seq)) {
        pending.get(message.request_seq)(message);
        pending.delete(message.request_seq);
      }
    }
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  exited.then(() => {
    for (const resolve of pending.values()) resolve({ success: false, message: "tsserver exited" });
    pending.clear();
  });

  /** Sends one request and resolves to its response body; a failed request rejects with tsserver's message. */
  async function request(command, args) {
    const id = ++seq;
    const response = await new Promise((resolve) => {
      pending.set(id, resolve);
      child.stdin.write(JSON.stringify({ seq: id, type: "request", command, arguments: args }) + "\n");
    });
    if (!response.success) throw new Error(`tsserver ${command} failed: ${response.message}`);
    return response.body;
  }

  /** Syntactic, semantic and suggestion diagnostics of an open file, as `{code, line, text}`. */
  async function diagnostics(file) {
    const all = [];
    for (const command of ["syntacticDiagnosticsSync", "semanticDiagnosticsSync", "suggestionDiagnosticsSync"]) {
      for (const d of await request(command, { file })) all.push({ code: d.code, line: d.start.line, text: d.text, category: d.category });
    }
    return all;
  }

  async function close() {
    child.stdin.end();
    child.kill();
    await exited;
  }

  return { request, diagnostics, close };
}

module.exports = { startTsserver };
