// piflow-typescript-plugin inside a real tsserver: the bundled examples are clean, exactly the
// top-level return/await errors disappear, and the workflow globals are typed and documented.
"use strict";

const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { after, before, describe, test } = require("node:test");
const { compileGlobs } = require("../index.js");
const { startTsserver } = require("./tsserver.js");

const PACKAGE_DIR = path.join(__dirname, "..");
const EXAMPLES_DIR = path.join(PACKAGE_DIR, "..", "..", "examples");
const EXAMPLES = fs.readdirSync(EXAMPLES_DIR).filter((name) => name.endsWith(".workflow.js")).sort();
/** What VS Code sends for loose JavaScript files when `js/ts.implicitProjectConfig.checkJs` is on. */
const INFERRED_OPTIONS = { allowJs: true, checkJs: true, module: "ESNext", target: "ES2022", allowNonTsExtensions: true };
const TOP_LEVEL_CODES = [1108, 1309, 1375, 1378, 1431, 1432, 2853, 2854];

const temporaryDirs = [];
function temporaryDir(prefix) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  temporaryDirs.push(dir);
  return dir;
}

/** A directory holding `files` (name → text). */
function workspace(files) {
  const dir = temporaryDir("piflow-ts-");
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

function examplesWorkspace(extra = {}) {
  const files = { ...extra };
  for (const name of EXAMPLES) files[name] = fs.readFileSync(path.join(EXAMPLES_DIR, name), "utf8");
  return workspace(files);
}

let probeLocation;
before(() => {
  // tsserver loads a global plugin from `<probe location>/node_modules/<name>`, as editors install it.
  probeLocation = temporaryDir("piflow-ts-probe-");
  fs.mkdirSync(path.join(probeLocation, "node_modules"));
  fs.symlinkSync(PACKAGE_DIR, path.join(probeLocation, "node_modules", "piflow-typescript-plugin"), "dir");
});
after(() => {
  for (const dir of temporaryDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs `body(server, dir)` against a tsserver with (or without) the plugin, with `dir`'s files opened as loose files. */
async function withServer({ plugin = true, dir, open = [] }, body) {
  const server = startTsserver({ plugin: plugin ? { probeLocation } : undefined, cwd: dir });
  try {
    await server.request("compilerOptionsForInferredProjects", { options: INFERRED_OPTIONS });
    for (const name of open) await server.request("open", { file: path.join(dir, name), projectRootPath: dir });
    return await body(server, dir);
  } finally {
    await server.close();
  }
}

/** The 1-based line and offset of the first `marker` in `text`, shifted by `shift` characters. */
function locate(text, marker, shift = 0) {
  const index = text.indexOf(marker);
  assert.ok(index >= 0, `marker ${marker} not found`);
  const before = text.slice(0, index + shift).split("\n");
  return { line: before.length, offset: before[before.length - 1].length + 1 };
}

const codes = (diagnostics) => diagnostics.map((d) => d.code);

describe("the bundled examples", () => {
  test("are free of TypeScript diagnostics with the plugin, in an inferred project with checkJs", async () => {
    const dir = examplesWorkspace();
    await withServer({ dir, open: EXAMPLES }, async (server) => {
      for (const name of EXAMPLES) {
        assert.deepEqual(await server.diagnostics(path.join(dir, name)), [], name);
      }
    });
  });

  test("are free of TypeScript diagnostics with the plugin, in a jsconfig.json project with checkJs", async () => {
    // No module option (so ES2015 modules): TypeScript then rejects every top-level await (TS1378).
    const jsconfig = { compilerOptions: { checkJs: true, target: "es2022", noUnusedLocals: true } };
    const dir = examplesWorkspace({ "jsconfig.json": JSON.stringify(jsconfig) });
    await withServer({ dir, open: EXAMPLES }, async (server) => {
      const info = await server.request("projectInfo", { file: path.join(dir, EXAMPLES[0]), needFileNameList: true });
      assert.equal(info.configFileName, path.join(dir, "jsconfig.json"));
      assert.ok(info.fileNames.includes(path.join(PACKAGE_DIR, "piflow-workflow.d.ts")), "the declarations are part of the project");
      for (const name of EXAMPLES) {
        assert.deepEqual(await server.diagnostics(path.join(dir, name)), [], name);
      }
    });
    await withServer({ plugin: false, dir, open: ["demo.workflow.js"] }, async (server) => {
      const found = codes(await server.diagnostics(path.join(dir, "demo.workflow.js")));
      assert.ok(found.includes(1378) && found.includes(1108), `without the plugin: ${found}`);
    });
  });

  test("get the top-level return and await errors and untyped globals without the plugin", async () => {
    const dir = examplesWorkspace();
    await withServer({ plugin: false, dir, open: EXAMPLES }, async (server) => {
      for (const name of EXAMPLES) {
        const found = codes(await server.diagnostics(path.join(dir, name)));
        assert.ok(found.includes(1108), `${name}: ${found}`);
        assert.ok(found.includes(2304), `${name} has globals TypeScript does not know: ${found}`);
      }
      const fleet = codes(await server.diagnostics(path.join(dir, "fleet.workflow.js")));
      assert.ok(fleet.includes(1375), `top-level await in a script file: ${fleet}`);
    });
  });
});

describe("diagnostics the plugin keeps", () => {
  test("a syntax error elsewhere in a workflow file is still reported", async () => {
    const dir = workspace({ "broken.workflow.js": "const x = await agent(\"a\");\nconst y = ;\nreturn x;\n" });
    await withServer({ dir, open: ["broken.workflow.js"] }, async (server) => {
      const found = await server.diagnostics(path.join(dir, "broken.workflow.js"));
      assert.deepEqual(found.map((d) => [d.code, d.line]), [[1109, 2]]);
    });
  });

  test("await in a nested non-async function and misspelled agent options are still errors", async () => {
    const text = [
      "function helper() { return await agent(\"a\"); }",
      "await agent(\"b\", { lable: \"b\" });",
      "await agent(\"c\", { thinking: \"hgih\" });",
      "return helper();",
      "",
    ].join("\n");
    const dir = workspace({ "checked.workflow.js": text });
    await withServer({ dir, open: ["checked.workflow.js"] }, async (server) => {
      const found = await server.diagnostics(path.join(dir, "checked.workflow.js"));
      assert.deepEqual(found.map((d) => [d.code, d.line]), [[1308, 1], [2561, 2], [2322, 3]]);
      assert.match(found[1].text, /Did you mean to write 'label'\?/);
    });
  });

  test("a JavaScript file that is not a workflow keeps its top-level return error", async () => {
    const dir = workspace({ "demo.workflow.js": "return 1;\n", "plain.js": "return 1;\n" });
    await withServer({ dir, open: ["demo.workflow.js", "plain.js"] }, async (server) => {
      assert.deepEqual(await server.diagnostics(path.join(dir, "demo.workflow.js")), []);
      assert.deepEqual(codes(await server.diagnostics(path.join(dir, "plain.js"))), [1108]);
    });
  });

  test("only variables that a top-level return uses stop being reported as unused", async () => {
    // A module (as a meta header makes it): its top-level declarations can be unused.
    const text = "export const meta = { name: \"u\" };\nconst used = await agent(\"a\");\nconst unused = 2;\nreturn { used };\n";
    const dir = workspace({ "unused.workflow.js": text });
    await withServer({ dir, open: ["unused.workflow.js"] }, async (server) => {
      const found = await server.diagnostics(path.join(dir, "unused.workflow.js"));
      assert.deepEqual(found.map((d) => [d.code, d.line]), [[6133, 3]]);
      assert.match(found[0].text, /'unused' is declared/);
    });
  });

  test("two workflow files may declare the same top-level names", async () => {
    const script = (label) => `const summary = await agent("${label}");\nreturn summary;\n`;
    const jsconfig = { compilerOptions: { checkJs: true, module: "esnext", target: "es2022" } };
    const dir = workspace({ "a.workflow.js": script("a"), "b.workflow.js": script("b"), "jsconfig.json": JSON.stringify(jsconfig) });
    await withServer({ dir, open: ["a.workflow.js", "b.workflow.js"] }, async (server) => {
      assert.deepEqual(await server.diagnostics(path.join(dir, "a.workflow.js")), []);
      assert.deepEqual(await server.diagnostics(path.join(dir, "b.workflow.js")), []);
    });
    await withServer({ plugin: false, dir, open: ["a.workflow.js"] }, async (server) => {
      assert.ok(codes(await server.diagnostics(path.join(dir, "a.workflow.js"))).includes(2451), "the clash exists without the plugin");
    });
  });

  test("globs sent with configurePlugin replace the default ones", async () => {
    const dir = workspace({ "a.flow.js": "return await agent(\"a\");\n", "b.workflow.js": "return 1;\n" });
    await withServer({ dir, open: ["a.flow.js", "b.workflow.js"] }, async (server) => {
      assert.ok(codes(await server.diagnostics(path.join(dir, "a.flow.js"))).includes(1108));
      await server.request("configurePlugin", { pluginName: "piflow-typescript-plugin", configuration: { globs: ["flows/**/*.js", "*.flow.js"] } });
      assert.deepEqual(await server.diagnostics(path.join(dir, "a.flow.js")), []);
      assert.deepEqual(codes(await server.diagnostics(path.join(dir, "b.workflow.js"))), [1108]);
    });
  });
});

test("relative globs match at any directory boundary, absolute ones from the root", () => {
  const isWorkflow = compileGlobs(["**/*.workflow.js", "flows/**/*.js", "/srv/{a,b}.js"]);
  const matched = ["/r/x.workflow.js", "C:\\r\\y.workflow.js", "/r/flows/b.js", "/r/flows/a/b.js", "/srv/a.js"];
  const unmatched = ["/r/workflow.js", "/r/x.workflow.jsx", "/r/notflows/b.js", "/r/srv/a.js", "/srv/c.js"];
  assert.deepEqual(matched.filter(isWorkflow), matched);
  assert.deepEqual(unmatched.filter(isWorkflow), []);
});

describe("the workflow globals", () => {
  const text = 'const answer = await agent("Summarise the diff.", {  });\nreturn answer;\n';

  test("hover on agent shows its documentation", async () => {
    const dir = workspace({ "hover.workflow.js": text });
    await withServer({ dir, open: ["hover.workflow.js"] }, async (server) => {
      const info = await server.request("quickinfo", { file: path.join(dir, "hover.workflow.js"), ...locate(text, "agent(", 1) });
      assert.match(info.displayString, /function agent<any>\(prompt: string, options\?: PiflowWorkflow\.AgentOptions\): Promise<any>/);
      assert.match(info.documentation, /Runs one agent and resolves to its final answer/);
    });
  });

  test("completion inside the options object offers the option keys", async () => {
    const dir = workspace({ "complete.workflow.js": text });
    await withServer({ dir, open: ["complete.workflow.js"] }, async (server) => {
      const file = path.join(dir, "complete.workflow.js");
      const completions = await server.request("completionInfo", { file, ...locate(text, "{  }", 2) });
      const names = completions.entries.map((entry) => entry.name);
      for (const key of ["label", "model", "thinking", "tools", "role", "outputSchema", "retries", "timeoutMs"]) {
        assert.ok(names.includes(key), `${key} in ${names}`);
      }
      const help = await server.request("signatureHelp", { file, ...locate(text, "{  }", 1) });
      assert.equal(help.items[help.selectedItemIndex].parameters[help.argumentIndex].name, "options");
    });
  });

  test("pi-subagents scripts get the runs global", async () => {
    const fleet = fs.readFileSync(path.join(EXAMPLES_DIR, "fleet.workflow.js"), "utf8");
    const dir = workspace({ "fleet.workflow.js": fleet });
    await withServer({ dir, open: ["fleet.workflow.js"] }, async (server) => {
      const info = await server.request("quickinfo", { file: path.join(dir, "fleet.workflow.js"), ...locate(fleet, "await runs.all", 7) });
      assert.match(info.displayString, /const runs: PiSubagents\.Runs/);
    });
  });

  test("rename of a variable works across the workflow file", async () => {
    const dir = examplesWorkspace();
    const demo = fs.readFileSync(path.join(dir, "demo.workflow.js"), "utf8");
    await withServer({ dir, open: ["demo.workflow.js"] }, async (server) => {
      const rename = await server.request("rename", { file: path.join(dir, "demo.workflow.js"), ...locate(demo, "const areas", 7) });
      assert.ok(rename.info.canRename);
      assert.equal(rename.locs[0].locs.length, 4);
    });
  });
});
