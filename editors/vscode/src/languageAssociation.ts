// Opens documents that match `piflow.files` as workflow scripts. `*.workflow.js` is associated
// statically in package.json; other patterns are applied here while the extension is active.

import type * as vscode from "vscode";
import { LANGUAGE_ID } from "./settings";

/** Languages a matching document is switched from: never override a user's explicit choice of another. */
const SWITCHABLE = new Set(["javascript", "plaintext"]);

export function associateWorkflowScripts(api: typeof vscode, patterns: () => string[]): vscode.Disposable {
  const apply = (document: vscode.TextDocument): void => {
    if (document.uri.scheme !== "file" || !SWITCHABLE.has(document.languageId)) return;
    if (patterns().some((pattern) => api.languages.match({ pattern }, document) > 0)) {
      void api.languages.setTextDocumentLanguage(document, LANGUAGE_ID);
    }
  };
  api.workspace.textDocuments.forEach(apply);
  return api.workspace.onDidOpenTextDocument(apply);
}
