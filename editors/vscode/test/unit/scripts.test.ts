import assert from "node:assert/strict";
import { test } from "node:test";
import type * as vscode from "vscode";
import { revealErrors } from "../../src/problems";
import {
  configureTypeScriptPlugin,
  isWorkflowScript,
  SCRIPTS_CONTEXT_KEY,
  scriptSelector,
  trackScriptContext,
  TYPESCRIPT_PLUGIN,
} from "../../src/scripts";
import { createVscode, settle, Uri, type DocumentStub } from "./vscodeStub";

const doc = (path: string, languageId = "javascript"): DocumentStub => ({ uri: Uri.file(path), languageId });
const asDocument = (document: DocumentStub) => document as unknown as vscode.TextDocument;

test("workflow scripts stay JavaScript: the selector names the javascript language with *.workflow.js and the configured globs", () => {
  assert.deepEqual(scriptSelector(["**/*.workflow.js", "flows/*.js"]), [
    { language: "javascript", scheme: "file", pattern: "**/*.workflow.js" },
    { language: "javascript", scheme: "file", pattern: "flows/*.js" },
  ]);
  assert.deepEqual(
    scriptSelector([]).map((filter) => filter.pattern),
    ["**/*.workflow.js"],
    "*.workflow.js even when piflow.files leaves it out",
  );
});

test("a script is a JavaScript file that matches a glob; other JavaScript files are not piflow's", () => {
  const { api } = createVscode();
  const files = ["**/flows/*.js"];
  assert.equal(isWorkflowScript(api, asDocument(doc("/w/ship.workflow.js")), files), true);
  assert.equal(isWorkflowScript(api, asDocument(doc("/w/flows/deploy.js")), files), true);
  assert.equal(isWorkflowScript(api, asDocument(doc("/w/app.js")), files), false);
  assert.equal(isWorkflowScript(api, asDocument(doc("/w/ship.workflow.js", "typescript")), files), false);
});

test("the Run menus' context key lists the open scripts, and follows opening and closing", async () => {
  const { api, state } = createVscode();
  state.openDocuments = [doc("/w/flows/a.js"), doc("/w/app.js"), doc("/w/b.workflow.js")];
  const context = trackScriptContext(api, () => ["**/flows/*.js"]);
  state.openDocuments.push(doc("/w/flows/c.js"));
  for (const listener of state.openListeners) listener(doc("/w/flows/c.js"));
  state.openDocuments = state.openDocuments.filter((d) => d.uri.fsPath !== "/w/flows/a.js");
  for (const listener of state.closeListeners) listener(doc("/w/flows/a.js"));
  for (const listener of state.closeListeners) listener(doc("/w/app.js"));
  await settle();
  assert.deepEqual(
    state.executed.map((e) => e.args),
    [
      [SCRIPTS_CONTEXT_KEY, ["/w/b.workflow.js", "/w/flows/a.js"]],
      [SCRIPTS_CONTEXT_KEY, ["/w/b.workflow.js", "/w/flows/a.js", "/w/flows/c.js"]],
      [SCRIPTS_CONTEXT_KEY, ["/w/b.workflow.js", "/w/flows/c.js"]],
    ],
    "set once per change, not again when nothing changed",
  );
  assert.ok(state.executed.every((e) => e.command === "setContext"));
  context.dispose();
});

test("the TypeScript plugin learns the script globs through the TypeScript extension's API", async () => {
  const { api, state } = createVscode();
  assert.equal(await configureTypeScriptPlugin(api, ["**/flows/*.js"]), true);
  assert.equal(state.typescript?.activations, 1, "the TypeScript extension is activated first");
  assert.deepEqual(state.typescript.configured, [[TYPESCRIPT_PLUGIN, { globs: ["**/*.workflow.js", "**/flows/*.js"] }]]);
  assert.equal(await configureTypeScriptPlugin(api, []), true);
  assert.equal(state.typescript.activations, 1, "an active extension is not activated again");
  state.typescript = undefined;
  assert.equal(await configureTypeScriptPlugin(api, []), false, "no TypeScript support (disabled): nothing to configure");
});

test("the lens `fix N errors first` opens the Problems panel and puts the cursor on the first error", async () => {
  const { api, state } = createVscode();
  const uri = Uri.file("/w/broken.workflow.js");
  const { Range, DiagnosticSeverity } = api;
  state.diagnostics.set(uri.toString(), [
    { severity: DiagnosticSeverity.Error, range: new Range(7, 2, 7, 9), message: "later" },
    { severity: DiagnosticSeverity.Warning, range: new Range(0, 0, 0, 4), message: "a warning" },
    { severity: DiagnosticSeverity.Error, range: new Range(3, 4, 3, 12), message: "first" },
  ]);
  await revealErrors(api, uri as unknown as vscode.Uri);
  assert.deepEqual(state.executed.map((e) => e.command), ["workbench.actions.view.problems"]);
  const [shown] = state.shownDocuments;
  assert.equal(shown?.target, uri);
  const selection = (shown.options as { selection: vscode.Range }).selection;
  assert.deepEqual([selection.start.line, selection.start.character], [3, 4]);
});
