// Starts, stops and restarts `piflow serve`; binds its notifications to the run model.

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import type * as vscode from "vscode";
import { State, type LanguageClient } from "vscode-languageclient/node";
import type { ApprovalFlow } from "./approvals";
import { createLanguageClient } from "./client";
import { Command } from "./commands";
import { bindNotifications, type Disposable } from "./notifications";
import type { RunFinished } from "./protocol";
import { revealErrors } from "./problems";
import type { RunLoader } from "./runLoader";
import type { RunModel } from "./runModel";
import { ServerCommands } from "./serverCommands";
import { resolveLaunch, type LaunchEnvironment } from "./serverLaunch";
import type { Settings } from "./settings";
import { MANAGE_TRUST, UNTRUSTED_MESSAGE } from "./trust";

const OPEN_SETTINGS = "Open Settings";

function isExecutable(file: string): boolean {
  try {
    if (!fs.statSync(file).isFile()) return false;
    if (process.platform !== "win32") fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function hasPiflowModule(python: string): boolean {
  return spawnSync(python, ["-c", "import piflow"], { timeout: 15_000, stdio: "ignore" }).status === 0;
}

export interface ControllerDeps {
  model: RunModel;
  approvals: ApprovalFlow;
  loader: RunLoader;
  output: vscode.OutputChannel;
  settings(): Settings;
  finished(event: RunFinished): void;
}

export class ServerController {
  private client: LanguageClient | undefined;
  private commands: ServerCommands | undefined;
  private bindings: Disposable[] = [];

  constructor(
    private readonly api: typeof vscode,
    private readonly deps: ControllerDeps,
  ) {}

  server(): ServerCommands | undefined {
    return this.client?.isRunning() ? this.commands : undefined;
  }

  async start(): Promise<void> {
    const { api, deps } = this;
    const folders = (api.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath);
    const environment: LaunchEnvironment = {
      platform: process.platform,
      searchPath: process.env.PATH ?? "",
      home: os.homedir(),
      workspaceFolders: folders,
      trusted: api.workspace.isTrusted,
      isExecutable,
      hasPiflowModule,
    };
    const launch = resolveLaunch(deps.settings().server, environment);
    if (!launch.ok) {
      deps.output.appendLine(launch.message);
      void api.window.showErrorMessage(launch.message, OPEN_SETTINGS).then((choice) => {
        if (choice === OPEN_SETTINGS) void api.commands.executeCommand("workbench.action.openSettings", "piflow.server");
      });
      return;
    }
    deps.output.appendLine(`Starting ${[launch.command, ...launch.args].join(" ")}`);
    const client = createLanguageClient({
      command: launch.command,
      args: launch.args,
      cwd: folders[0],
      output: deps.output,
      files: deps.settings().files,
      trusted: () => api.workspace.isTrusted,
      runWithArgs: (uri) => {
        void api.commands.executeCommand(Command.runWithArgs, api.Uri.parse(uri));
      },
      showErrors: (uri) => {
        void revealErrors(api, api.Uri.parse(uri));
      },
      refused: () => {
        void api.window.showWarningMessage(UNTRUSTED_MESSAGE, MANAGE_TRUST).then((choice) => {
          if (choice === MANAGE_TRUST) void api.commands.executeCommand("workbench.trust.manage");
        });
      },
    });
    this.bindings = [
      ...bindNotifications(client, {
        model: deps.model,
        approvals: deps.approvals,
        log: (line) => {
          deps.output.appendLine(line);
        },
        finished: (event) => {
          deps.finished(event);
        },
        resync: (runId) => void deps.loader.load(runId),
      }),
      // After every (re)start, learn the runs the server knows, launched here or elsewhere.
      client.onDidChangeState((event) => {
        if (event.newState === State.Running) {
          this.refreshRuns().catch((error: unknown) => {
            deps.output.appendLine(`piflow.listRuns failed: ${String(error)}`);
          });
        }
      }),
    ];
    this.client = client;
    this.commands = new ServerCommands((command, args) =>
      client.sendRequest("workspace/executeCommand", { command, arguments: [args] }),
    );
    // A failed start is reported by the client itself (with a link to the output), which also
    // restarts a server that dies, so the client is kept.
    await client.start().catch((error: unknown) => {
      deps.output.appendLine(`piflow server failed to start: ${error instanceof Error ? error.message : String(error)}`);
    });
  }

  /**
   * Merges the server's list of runs (also those launched from a terminal) into the model, with
   * the snapshot of each run still going: its agents, and the approvals it waits for.
   */
  async refreshRuns(): Promise<void> {
    const commands = this.server();
    if (!commands) return;
    this.deps.model.listed(await commands.listRuns());
    this.deps.approvals.promptPending();
    await this.deps.loader.loadActive();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.unbind();
    this.client = undefined;
    this.commands = undefined;
    // dispose() stops a running server; one that never started has nothing to stop.
    await client?.dispose().catch(() => undefined);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  private unbind(): void {
    for (const binding of this.bindings) binding.dispose();
    this.bindings = [];
  }
}
