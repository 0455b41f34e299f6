// A small stand-in for the `vscode` module: the parts the extension's modules use, recording what
// they show and answering prompts from scripts set by each test.

import type * as vscode from "vscode";

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    readonly query = "",
  ) {}

  get fsPath(): string {
    return this.path;
  }

  static file(path: string): Uri {
    return new Uri("file", path);
  }

  static from(parts: { scheme: string; path?: string; query?: string }): Uri {
    return new Uri(parts.scheme, parts.path ?? "", parts.query ?? "");
  }

  static parse(text: string): Uri {
    const match = /^([a-z][\w+.-]*):(?:\/\/)?([^?]*)(?:\?(.*))?$/i.exec(text);
    if (!match) throw new Error(`not a URI: ${text}`);
    return new Uri(match[1] ?? "", decodeURIComponent(match[2] ?? ""), match[3] ?? "");
  }

  toString(): string {
    const path = this.scheme === "file" ? `//${this.path}` : encodeURI(this.path);
    return `${this.scheme}:${path}${this.query ? `?${this.query}` : ""}`;
  }
}

class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}

  compareTo(other: Position): number {
    return this.line - other.line || this.character - other.character;
  }
}

class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
    this.start = typeof a === "number" ? new Position(a, b as number) : a;
    this.end = typeof a === "number" ? new Position(c ?? 0, d ?? 0) : (b as Position);
  }
}

class Selection extends Range {}

class DocumentLink {
  constructor(
    readonly range: Range,
    readonly target?: Uri,
  ) {}
}

/** The globs of the tests: `**` (any directories) and `*` (within a name). */
function globMatches(pattern: string, path: string): boolean {
  const source = pattern
    .split(/(\*\*\/|\*)/)
    .map((part) => (part === "**/" ? "(?:.*/)?" : part === "*" ? "[^/]*" : part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^(?:.*/)?${source}$`).test(path);
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
  command?: { command: string; title: string; arguments?: unknown[] };
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

export interface DiagnosticStub {
  severity: number;
  /** A `Range` made with `api.Range`. */
  range: object;
  message: string;
}

export interface TypeScriptExtensionStub {
  isActive: boolean;
  activations: number;
  /** Plugin configurations received through `configurePlugin`. */
  configured: [string, unknown][];
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
  /** What `workspace.openTextDocument` was asked to open: a URI, or untitled content. */
  openedDocuments: unknown[];
  /** What `window.showTextDocument` showed, with its options. */
  shownDocuments: { target: unknown; options: unknown }[];
  openDocuments: DocumentStub[];
  openListeners: ((document: DocumentStub) => void)[];
  closeListeners: ((document: DocumentStub) => void)[];
  /** Diagnostics `languages.getDiagnostics` answers, by URI. */
  diagnostics: Map<string, DiagnosticStub[]>;
  contentProviders: Map<string, unknown>;
  /** VS Code's TypeScript extension, or undefined when it is disabled. */
  typescript: TypeScriptExtensionStub | undefined;
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
    shownDocuments: [],
    openDocuments: [],
    openListeners: [],
    closeListeners: [],
    diagnostics: new Map(),
    contentProviders: new Map(),
    typescript: { isActive: false, activations: 0, configured: [] },
  };
  const typescriptExports = {
    getAPI: (version: number) =>
      version === 0
        ? { configurePlugin: (id: string, configuration: unknown) => state.typescript?.configured.push([id, configuration]) }
        : undefined,
  };
  const show =
    (level: Shown["level"]) =>
    (message: string, ...buttons: string[]): Promise<string | undefined> => {
      state.shown.push({ level, message, buttons });
      return Promise.resolve(state.buttonAnswers.shift());
    };
  const api = {
    Uri,
    Position,
    Range,
    Selection,
    DocumentLink,
    DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
    TextEditorRevealType: { Default: 0, InCenter: 1, InCenterIfOutsideViewport: 2, AtTop: 3 },
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
      showTextDocument: (target: unknown, options: unknown) => {
        state.shownDocuments.push({ target, options });
        return Promise.resolve({ selection: undefined, revealRange: () => undefined });
      },
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
      openTextDocument: async (target: unknown) => {
        state.openedDocuments.push(target);
        if (!(target instanceof Uri)) return target;
        // A virtual document's text comes from its scheme's provider, as in VS Code.
        const provider = state.contentProviders.get(target.scheme) as
          | { provideTextDocumentContent(uri: Uri): Promise<string> | string }
          | undefined;
        const text = provider ? await provider.provideTextDocumentContent(target) : "";
        return { uri: target, languageId: "markdown", getText: () => text };
      },
      registerTextDocumentContentProvider: (scheme: string, provider: unknown) => {
        state.contentProviders.set(scheme, provider);
        return { dispose: () => state.contentProviders.delete(scheme) };
      },
      get textDocuments() {
        return state.openDocuments;
      },
      onDidOpenTextDocument: (listener: (document: DocumentStub) => void) => {
        state.openListeners.push(listener);
        return { dispose: () => undefined };
      },
      onDidCloseTextDocument: (listener: (document: DocumentStub) => void) => {
        state.closeListeners.push(listener);
        return { dispose: () => undefined };
      },
    },
    languages: {
      match: (selector: { language?: string; scheme?: string; pattern?: string }[], document: DocumentStub) =>
        selector.some(
          (filter) =>
            (filter.language === undefined || filter.language === document.languageId) &&
            (filter.scheme === undefined || filter.scheme === document.uri.scheme) &&
            (filter.pattern === undefined || globMatches(filter.pattern, document.uri.fsPath)),
        )
          ? 10
          : 0,
      getDiagnostics: (uri: Uri) => state.diagnostics.get(uri.toString()) ?? [],
    },
    extensions: {
      getExtension: (id: string) => {
        const typescript = state.typescript;
        if (id !== "vscode.typescript-language-features" || !typescript) return undefined;
        return {
          get isActive() {
            return typescript.isActive;
          },
          get exports() {
            return typescript.isActive ? typescriptExports : undefined;
          },
          activate: () => {
            typescript.activations++;
            typescript.isActive = true;
            return Promise.resolve(typescriptExports);
          },
        };
      },
    },
  };
  return { api: api as unknown as typeof vscode, state };
}

/** Lets pending promise callbacks run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
