import assert from "node:assert/strict";
import { test } from "node:test";
import { expand, findExecutable, NOT_INSTALLED, resolveLaunch, type LaunchEnvironment } from "../../src/serverLaunch";

function environment(files: string[], fields: Partial<LaunchEnvironment> = {}): LaunchEnvironment {
  return {
    platform: "linux",
    searchPath: "/usr/local/bin:/usr/bin",
    home: "/home/ada",
    workspaceFolders: ["/work/project"],
    trusted: true,
    isExecutable: (file) => files.includes(file),
    hasPiflowModule: () => true,
    ...fields,
  };
}

const none = { command: [], pythonPath: "" };

test("by default piflow is found on PATH and started with `serve`", () => {
  assert.deepEqual(resolveLaunch(none, environment(["/usr/bin/piflow"])), {
    ok: true,
    command: "/usr/bin/piflow",
    args: ["serve"],
  });
});

test("without piflow on PATH a trusted workspace's .venv is used", () => {
  const venv = "/work/project/.venv/bin/piflow";
  assert.deepEqual(resolveLaunch(none, environment([venv])), { ok: true, command: venv, args: ["serve"] });
});

test("an untrusted workspace's .venv is never run", () => {
  const launch = resolveLaunch(none, environment(["/work/project/.venv/bin/piflow"], { trusted: false }));
  assert.deepEqual(launch, { ok: false, message: NOT_INSTALLED });
});

test("nothing found: the message says how to install piflow or configure the command", () => {
  assert.deepEqual(resolveLaunch(none, environment([])), {
    ok: false,
    message: "piflow is not installed: run `pip install piflow` or set piflow.server.command",
  });
});

test("piflow.server.command is taken whole, with ${workspaceFolder} and ~ expanded", () => {
  const settings = { command: ["${workspaceFolder}/tools/piflow", "serve", "--stdio"], pythonPath: "/ignored" };
  assert.deepEqual(resolveLaunch(settings, environment(["/work/project/tools/piflow"])), {
    ok: true,
    command: "/work/project/tools/piflow",
    args: ["serve", "--stdio"],
  });
  assert.equal(expand("~/venv/bin/python", environment([])), "/home/ada/venv/bin/python");
});

test("a configured command that does not exist is reported against its setting", () => {
  const launch = resolveLaunch({ command: ["/opt/piflow/bin/piflow", "serve"], pythonPath: "" }, environment([]));
  assert.ok(!launch.ok);
  assert.match(launch.message, /^piflow\.server\.command: `\/opt\/piflow\/bin\/piflow` was not found/);
});

test("piflow.server.pythonPath runs `python -m piflow serve` when piflow is importable", () => {
  const python = "/opt/py/bin/python3";
  assert.deepEqual(resolveLaunch({ command: [], pythonPath: python }, environment([python])), {
    ok: true,
    command: python,
    args: ["-m", "piflow", "serve"],
  });
  const missing = resolveLaunch({ command: [], pythonPath: python }, environment([python], { hasPiflowModule: () => false }));
  assert.deepEqual(missing, {
    ok: false,
    message: `piflow is not installed for ${python}: run \`${python} -m pip install piflow\` or set piflow.server.command`,
  });
});

test("on Windows PATH is searched with executable suffixes", () => {
  const env = environment(["C:\\Tools\\piflow.exe"], { platform: "win32", searchPath: "C:\\Windows;C:\\Tools" });
  assert.equal(findExecutable("piflow", env), "C:\\Tools\\piflow.exe");
});
