// The extension's logic wired as in extension.ts, with a fake server on both ends: notifications
// go in through `emit`, executed server commands are recorded in `sent`.

import { ApprovalFlow } from "../../src/approvals";
import { bindNotifications, type NotificationSource } from "../../src/notifications";
import type { RunFinished } from "../../src/protocol";
import { RunLoader } from "../../src/runLoader";
import { RunModel } from "../../src/runModel";
import { ServerCommands } from "../../src/serverCommands";

export class FakeSource implements NotificationSource {
  private readonly handlers = new Map<string, (params: unknown) => void>();

  onNotification(method: string, handler: (params: unknown) => void): { dispose(): void } {
    this.handlers.set(method, handler);
    return { dispose: () => this.handlers.delete(method) };
  }

  emit(method: string, params: unknown): void {
    const handler = this.handlers.get(method);
    if (!handler) throw new Error(`nothing listens to ${method}`);
    handler(params);
  }

  get methods(): string[] {
    return [...this.handlers.keys()];
  }
}

export interface Sent {
  command: string;
  args: Record<string, unknown>;
}

export interface Harness {
  model: RunModel;
  approvals: ApprovalFlow;
  server: ServerCommands;
  source: FakeSource;
  sent: Sent[];
  logs: string[];
  finished: RunFinished[];
  prompts: { message: string; buttons: string[] }[];
  errors: string[];
  /** The button each new prompt is answered with (undefined: dismissed). */
  answers: (string | undefined)[];
  notify: boolean;
  /** Answers for server commands, by command name; an Error is thrown back. */
  results: Map<string, unknown>;
}

export function harness(): Harness {
  const model = new RunModel();
  const h: Partial<Harness> & Pick<Harness, "sent" | "logs" | "finished" | "prompts" | "errors" | "answers" | "results"> = {
    sent: [],
    logs: [],
    finished: [],
    prompts: [],
    errors: [],
    answers: [],
    results: new Map(),
    notify: true,
  };
  const server = new ServerCommands((command, args) => {
    h.sent.push({ command, args });
    const result = h.results.get(command);
    return result instanceof Error ? Promise.reject(result) : Promise.resolve(result ?? {});
  });
  const approvals = new ApprovalFlow(model, () => server, {
    ask: (message, ...buttons) => {
      h.prompts.push({ message, buttons });
      return Promise.resolve(h.answers.shift());
    },
    error: (message) => h.errors.push(message),
    notify: () => h.notify ?? true,
  });
  const source = new FakeSource();
  const loader = new RunLoader(
    model,
    () => server,
    () => {
      approvals.promptPending();
    },
    (line) => h.logs.push(line),
  );
  bindNotifications(source, {
    model,
    approvals,
    log: (line) => h.logs.push(line),
    finished: (event) => h.finished.push(event),
    resync: (runId) => void loader.load(runId),
  });
  return Object.assign(h, { model, approvals, server, source }) as Harness;
}
