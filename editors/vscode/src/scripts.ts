// Which documents are workflow scripts. They stay JavaScript (so VS Code's TypeScript service keeps
// rename, definitions, formatting and signature help); piflow attaches to the JavaScript documents
// that match `*.workflow.js` or a `piflow.files` glob.

import type * as vscode from "vscode";

export const WORKFLOW_GLOB = "**/*.workflow.js";
export const SCRIPT_LANGUAGE = "javascript";
/** Context key: the paths of open workflow scripts that only a `piflow.files` glob makes scripts (menus). */
export const SCRIPTS_CONTEXT_KEY = "piflow.workflowScripts";
/** The TypeScript server plugin bundled with the extension (editors/typescript-plugin). */
export const TYPESCRIPT_PLUGIN = "piflow-typescript-plugin";
const TYPESCRIPT_EXTENSION = "vscode.typescript-language-features";

/** `*.workflow.js` first, then the configured globs, without repeats. */
export function scriptPatterns(files: readonly string[]): string[] {
  return [...new Set([WORKFLOW_GLOB, ...files])];
}

/** A document filter both VS Code and the language client accept (a glob pattern as a string). */
export interface ScriptFilter {
  language: string;
  scheme: string;
  pattern: string;
}

/** The language client's selector for scripts: JavaScript documents on disk matching a glob. */
export function scriptSelector(files: readonly string[]): ScriptFilter[] {
  return scriptPatterns(files).map((pattern) => ({ language: SCRIPT_LANGUAGE, scheme: "file", pattern }));
}

export function isWorkflowScript(api: typeof vscode, document: vscode.TextDocument, files: readonly string[]): boolean {
  return api.languages.match(scriptSelector(files), document) > 0;
}

export interface ScriptContext {
  /** Recomputes the context key (after `piflow.files` changed). */
  update(): void;
  dispose(): void;
}

/**
 * Keeps `piflow.workflowScripts` (the `when` clauses of the Run menus) equal to the open scripts that
 * a `piflow.files` glob adds; `*.workflow.js` files are matched by name in package.json.
 */
export function trackScriptContext(api: typeof vscode, files: () => readonly string[]): ScriptContext {
  let last = "";
  const update = (): void => {
    const paths = api.workspace.textDocuments
      .filter((document) => isWorkflowScript(api, document, files()))
      .map((document) => document.uri.fsPath)
      .sort();
    const key = JSON.stringify(paths);
    if (key === last) return;
    last = key;
    void api.commands.executeCommand("setContext", SCRIPTS_CONTEXT_KEY, paths);
  };
  update();
  const subscriptions = [api.workspace.onDidOpenTextDocument(update), api.workspace.onDidCloseTextDocument(update)];
  return {
    update,
    dispose: () => {
      for (const subscription of subscriptions) subscription.dispose();
    },
  };
}

/** The part of the TypeScript extension's API used here (`getAPI(0)`). */
interface TypeScriptApi {
  configurePlugin(pluginId: string, configuration: unknown): void;
}

interface TypeScriptExtensionExports {
  getAPI?(version: 0): TypeScriptApi | undefined;
}

/**
 * Tells the bundled TypeScript plugin which files are workflow scripts, so it accepts their
 * top-level `return`/`await` and types their globals. False when VS Code's TypeScript support is
 * disabled or too old to configure plugins.
 */
export async function configureTypeScriptPlugin(api: typeof vscode, files: readonly string[]): Promise<boolean> {
  const extension = api.extensions.getExtension<TypeScriptExtensionExports>(TYPESCRIPT_EXTENSION);
  if (!extension) return false;
  // Not named `exports`: that would shadow the CommonJS module's own in the compiled code.
  const extensionExports = extension.isActive ? extension.exports : await extension.activate();
  const typescript = extensionExports.getAPI?.(0);
  if (!typescript) return false;
  typescript.configurePlugin(TYPESCRIPT_PLUGIN, { globs: scriptPatterns(files) });
  return true;
}
