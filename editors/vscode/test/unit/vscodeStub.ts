// A small stand-in for the `vscode` module: the parts the extension's modules use, recording what
// they show and answering prompts from scripts set by each test.

import type * as vscode from "vscode";

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}

  static file(path: string): Uri {
    return new Uri("file", path);
  }

  toString(): string {
    return `${this.scheme}://${this.fsPath}`;
  }
}

class ThemeColor {
  constructor(readonly id: string) {}
}

class ThemeIcon {
  constructor(
    readonly id: string,
    readonly color?: ThemeColor,
  ) {}
}

class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  contextValue?: string;
  iconPath?: ThemeIcon;
  constructor(
    readonly label: string,
    readonly collapsibleState: number,
  ) {}
}

class EventEmitter<T> {
  private readonly listeners = new Set<(value: T) => void>();
  fired = 0;
  readonly event = (listener: (value: T) => void): { dispose(): void } => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };
  fire(value: T): void {
    this.fired++;
    for (const listener of this.listeners) listener(value);
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export interface StatusBarItemStub {
  text: string;
  tooltip: string;
  name: string;
  command: string;
  backgroundColor: ThemeColor | undefined;
  visible: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

export interface DocumentStub {
  uri: Uri;
  languageId: string;
}

export interface Shown {
  level: "info" | "warning" | "error";
  message: string;
  buttons: string[];
}

/** What a test scripts and then inspects. */
export interface StubState {
  trusted: boolean;
  shown: Shown[];
  /** Answers to notifications, in order; undefined = dismissed. */
  buttonAnswers: (string | undefined)[];
  inputAnswers: (string | undefined)[];
  /** The validation message the input box showed for each value tried through `inputTries`. */
  inputTries: string[];
  inputValidation: (string | undefined)[];
  quickPick: (items: readonly { label: string }[]) => number | undefined;
  quickPicks: string[][];
  commands: Map<string, (...args: unknown[]) => unknown>;
  executed: { command: string; args: unknown[] }[];
  statusBarItems: StatusBarItemStub[];
  statusMessages: string[];
  activeDocument: DocumentStub | undefined;
  files: Uri[];
  openedDocuments: { language: string; content: string }[];
  openDocuments: DocumentStub[];
  openListeners: ((document: DocumentStub) => void)[];
  /** Documents whose language was switched, with the new id. */
  switched: [string, string][];
  /** Glob patterns `languages.match` accepts, by document path suffix. */
  matches: (pattern: string, document: DocumentStub) => boolean;
}

export function createVscode(): { api: typeof vscode; state: StubState } {
  const state: StubState = {
    trusted: true,
    shown: [],
    buttonAnswers: [],
    inputAnswers: [],
    inputTries: [],
    inputValidation: [],
    quickPick: () => 0,
    quickPicks: [],
    commands: new Map(),
    executed: [],
    statusBarItems: [],
    statusMessages: [],
    activeDocument: undefined,
    files: [],
    openedDocuments: [],
    openDocuments: [],
    openListeners: [],
    switched: [],
    matches: () => false,
  };
  const show =
    (level: Shown["level"]) =>
    (message: string, ...buttons: string[]): Promise<string | undefined> => {
      state.shown.push({ level, message, buttons });
      return Promise.resolve(state.buttonAnswers.shift());
    };
  const api = {
    Uri,
    ThemeColor,
    ThemeIcon,
    TreeItem,
    EventEmitter,
    TreeItemCollapsibleState: { None: 0, Collapsed: 1, Expanded: 2 },
    StatusBarAlignment: { Left: 1, Right: 2 },
    window: {
      showInformationMessage: show("info"),
      showWarningMessage: show("warning"),
      showErrorMessage: show("error"),
      setStatusBarMessage: (message: string) => {
        state.statusMessages.push(message);
        return { dispose: () => undefined };
      },
      createStatusBarItem: () => {
        const item: StatusBarItemStub = {
          text: "",
          tooltip: "",
          name: "",
          command: "",
          backgroundColor: undefined,
          visible: false,
          show: () => {
            item.visible = true;
          },
          hide: () => {
            item.visible = false;
          },
          dispose: () => undefined,
        };
        state.statusBarItems.push(item);
        return item;
      },
      showInputBox: (options: { validateInput?: (value: string) => string | undefined }) => {
        for (const value of state.inputTries) state.inputValidation.push(options.validateInput?.(value));
        return Promise.resolve(state.inputAnswers.shift());
      },
      showQuickPick: <T extends { label: string }>(items: readonly T[]) => {
        state.quickPicks.push(items.map((item) => item.label));
        const index = state.quickPick(items);
        return Promise.resolve(index === undefined ? undefined : items[index]);
      },
      get activeTextEditor() {
        return state.activeDocument && { document: state.activeDocument };
      },
      showTextDocument: () => Promise.resolve(undefined),
    },
    commands: {
      registerCommand: (id: string, handler: (...args: unknown[]) => unknown) => {
        if (state.commands.has(id)) throw new Error(`command ${id} already registered`);
        state.commands.set(id, handler);
        return { dispose: () => state.commands.delete(id) };
      },
      executeCommand: (command: string, ...args: unknown[]) => {
        state.executed.push({ command, args });
        return Promise.resolve(undefined);
      },
    },
    workspace: {
      get isTrusted() {
        return state.trusted;
      },
      findFiles: () => Promise.resolve(state.files),
      asRelativePath: (uri: Uri) => uri.fsPath.replace(/^\/work\//, ""),
      openTextDocument: (options: { language: string; content: string }) => {
        state.openedDocuments.push(options);
        return Promise.resolve(options);
      },
      get textDocuments() {
        return state.openDocuments;
      },
      onDidOpenTextDocument: (listener: (document: DocumentStub) => void) => {
        state.openListeners.push(listener);
        return { dispose: () => undefined };
      },
    },
    languages: {
      match: (selector: { pattern: string }, document: DocumentStub) => (state.matches(selector.pattern, document) ? 10 : 0),
      setTextDocumentLanguage: (document: DocumentStub, language: string) => {
        state.switched.push([document.uri.fsPath, language]);
        return Promise.resolve(document);
      },
    },
  };
  return { api: api as unknown as typeof vscode, state };
}

/** Lets pending promise callbacks run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
