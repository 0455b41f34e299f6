// The LanguageClient that runs `piflow serve` over stdio, with the workspace-trust gate on the
// server's launching commands (the code lenses ▶ Run and ↻ Resume).

import type * as vscode from "vscode";
import { LanguageClient, type LanguageClientOptions, type Middleware, type ServerOptions } from "vscode-languageclient/node";
import { commandUri, ServerCommand } from "./protocol";
import { scriptSelector } from "./scripts";
import { isRefused } from "./trust";

/** Documents the server checks besides scripts: pi's workflow settings and roles, piflow.toml. */
const CONFIGURATION_SELECTOR = [
  { scheme: "file", pattern: "**/pi-extensible-workflows/settings.json" },
  { scheme: "file", pattern: "**/pi-extensible-workflows/roles/*.md" },
  { scheme: "file", pattern: "**/piflow.toml" },
];

export interface ClientSetup {
  command: string;
  args: string[];
  cwd: string | undefined;
  output: vscode.OutputChannel;
  /** `piflow.files`: the globs of workflow scripts. */
  files: readonly string[];
  trusted(): boolean;
  /** Tells the user that a launching command was refused. */
  refused(): void;
  /** Handles the `▶ Run with args…` lens here: asks for JSON args, then runs. */
  runWithArgs(uri: string): void;
  /** Handles the `▶ Run (fix N errors first)` lens here: shows the script's problems. */
  showErrors(uri: string): void;
}

function trustMiddleware(setup: ClientSetup): Middleware {
  return {
    executeCommand: (command, args, next) => {
      if (isRefused(command, setup.trusted())) {
        setup.refused();
        return undefined;
      }
      const uri = commandUri(args);
      if (command === ServerCommand.runWithArgs && uri) {
        setup.runWithArgs(uri);
        return { asked: true };
      }
      if (command === ServerCommand.showErrors && uri) {
        setup.showErrors(uri);
        return { shown: true };
      }
      return next(command, args) as unknown;
    },
    provideCodeLenses: async (document, token, next) => {
      const lenses = await next(document, token);
      if (setup.trusted() || !lenses) return lenses;
      return lenses.filter((lens) => !lens.command || !isRefused(lens.command.command, false));
    },
  };
}

export function createLanguageClient(setup: ClientSetup): LanguageClient {
  const serverOptions: ServerOptions = {
    command: setup.command,
    args: setup.args,
    options: setup.cwd ? { cwd: setup.cwd } : {},
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [...scriptSelector(setup.files), ...CONFIGURATION_SELECTOR],
    outputChannel: setup.output,
    initializationOptions: { piflow: { customNotifications: true } },
    middleware: trustMiddleware(setup),
  };
  return new LanguageClient("piflow", "piflow language server", serverOptions, clientOptions);
}
