// Routes the server's `piflow/*` notifications into the run model, the approval flow and the log.
// Works on anything with `onNotification`: the LanguageClient in VS Code, a bare JSON-RPC
// connection in the wire test.

import type { ApprovalFlow } from "./approvals";
import { errorText, shortId } from "./format";
import {
  decodeBudgetApproval,
  decodeCheckpoint,
  decodeRunFinished,
  decodeRunLog,
  decodeRunProgress,
  decodeRunStarted,
  Notification,
  type RunFinished,
} from "./protocol";
import type { RunModel } from "./runModel";

export interface Disposable {
  dispose(): void;
}

export interface NotificationSource {
  onNotification(method: string, handler: (params: unknown) => void): Disposable;
}

export interface NotificationSinks {
  model: RunModel;
  approvals: ApprovalFlow;
  log(line: string): void;
  finished(event: RunFinished): void;
  /** Fetches the full snapshot of a run whose agents are not known (`piflow.showRun`). */
  resync(runId: string): void;
}

export function bindNotifications(source: NotificationSource, sinks: NotificationSinks): Disposable[] {
  const { model, approvals } = sinks;
  function on<T>(method: string, decode: (params: unknown) => T | undefined, apply: (event: T) => void): Disposable {
    return source.onNotification(method, (params) => {
      const event = decode(params);
      if (event) apply(event);
      else sinks.log(`ignored malformed ${method}: ${JSON.stringify(params)}`);
    });
  }
  return [
    on(Notification.runStarted, decodeRunStarted, (event) => {
      model.started(event);
      sinks.log(`[${shortId(event.runId)}] started ${event.workflowName ?? event.uri ?? ""}`);
    }),
    on(Notification.runProgress, decodeRunProgress, (event) => {
      // A delta for a run whose full list this client never got (it missed messages): fetch it.
      if (!model.progress(event)) sinks.resync(event.runId);
      approvals.promptPending();
    }),
    on(Notification.checkpoint, decodeCheckpoint, (event) => {
      model.checkpoint(event);
      approvals.checkpoint(event);
    }),
    on(Notification.budgetApproval, decodeBudgetApproval, (event) => {
      model.budgetApproval(event);
      approvals.budgetApproval(event);
    }),
    on(Notification.runFinished, decodeRunFinished, (event) => {
      model.finished(event);
      const error = event.error ? ` ${errorText(event.error)}` : "";
      sinks.log(`[${shortId(event.runId)}] ${event.state}${error}`);
      sinks.finished(event);
    }),
    on(Notification.log, decodeRunLog, (event) => {
      sinks.log(`[${shortId(event.runId)}] ${event.message}`);
    }),
  ];
}
