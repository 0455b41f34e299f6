// The `▶ Run (fix N errors first)` lens: opens the Problems panel and puts the cursor on the
// script's first error, instead of a message that lists them (and gets cut off).

import type * as vscode from "vscode";

export async function revealErrors(api: typeof vscode, uri: vscode.Uri): Promise<void> {
  await api.commands.executeCommand("workbench.actions.view.problems");
  const [first] = api.languages
    .getDiagnostics(uri)
    .filter((diagnostic) => diagnostic.severity === api.DiagnosticSeverity.Error)
    .sort((a, b) => a.range.start.compareTo(b.range.start));
  if (first) await api.window.showTextDocument(uri, { selection: first.range, preserveFocus: false });
}
