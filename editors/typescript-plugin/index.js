// TypeScript server plugin for piflow workflow scripts. A workflow script's body runs as an async
// function, so top-level `return` and `await` are valid; TypeScript reports them as errors. For
// workflow files only, this plugin removes exactly those diagnostics (and the "unused" findings
// that appear because TypeScript never checks a top-level return's expression), adds the
// declarations of the workflow globals to every project that contains a workflow file, and makes
// that project treat each file as a module so two workflows' top-level names never clash.
"use strict";

const path = require("path");

const DEFAULT_GLOBS = ["**/*.workflow.js"];
const WORKFLOW_DTS = path.join(__dirname, "piflow-workflow.d.ts");
const SUBAGENTS_DTS = path.join(__dirname, "piflow-subagents.d.ts");

/** "A 'return' statement can only be used within a function body." */
const TOP_LEVEL_RETURN = 1108;
/** Every diagnostic TypeScript 5 gives for `await`, `for await` or `await using` at the top level. */
const TOP_LEVEL_AWAIT = new Set([1309, 1375, 1378, 1431, 1432, 2853, 2854]);
/** "'x' is declared but its value is never read" and its variants. */
const UNUSED = new Set([6133, 6196, 6198, 6199]);

const SUBAGENTS_PRAGMA = /^\s*\/\/\s*piflow:\s*pi-subagents\b/;
const SUBAGENTS_CALL = /\bruns\s*\.\s*(?:run|all|lanes|host|steer|status|refs?)\s*\(/;

/** Translates one glob (`**`, `*`, `?`, `{a,b}`, `[...]`) to a regular expression source. */
function globSource(glob) {
  let out = "";
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const slash = glob[i + 2] === "/";
        out += slash ? "(?:.*/)?" : ".*";
        i += slash ? 2 : 1;
      } else {
        out += "[^/]*";
      }
    } else if (c === "?") out += "[^/]";
    else if (c === "{") { braces++; out += "(?:"; }
    else if (c === "}" && braces > 0) { braces--; out += ")"; }
    else if (c === "," && braces > 0) out += "|";
    else if (c === "[") {
      const end = glob.indexOf("]", i + 1);
      if (end < 0) out += "\\[";
      else { out += "[" + glob.slice(i + 1, end).replace(/^!/, "^").replace(/\\/g, "\\\\") + "]"; i = end; }
    } else out += c.replace(/[.+^$()|\\\]]/g, "\\$&");
  }
  return out;
}

/**
 * Compiles workflow globs to one matcher of absolute paths. A relative glob matches at any
 * directory boundary (`flows/*.js` matches `/repo/flows/a.js`), as the client's project root
 * is not known here; an absolute glob matches from the root.
 */
function compileGlobs(globs) {
  const sources = globs
    .filter((glob) => typeof glob === "string" && glob.trim() !== "")
    .map((glob) => glob.trim().replace(/\\/g, "/"))
    .map((glob) => (glob.startsWith("/") || /^[A-Za-z]:\//.test(glob) ? "^" : "(?:^|/)") + globSource(glob.replace(/^\.\//, "")) + "$");
  if (sources.length === 0) return () => false;
  const pattern = new RegExp(sources.join("|"));
  return (fileName) => pattern.test(fileName.replace(/\\/g, "/"));
}

/** The globs of a plugin configuration, or undefined when it names none (a precise log line says why). */
function globsOf(config, log) {
  if (!config || config.globs === undefined) return undefined;
  if (Array.isArray(config.globs) && config.globs.every((glob) => typeof glob === "string")) return config.globs;
  log(`piflow-typescript-plugin: ignoring "globs": expected an array of strings, got ${JSON.stringify(config.globs)}`);
  return undefined;
}

function init(modules) {
  const ts = modules.typescript;
  /** Globs sent by the client through `configurePlugin`; they override every project's own. */
  let clientGlobs;
  const projects = new Set();
  let log = () => undefined;

  /** Symbols that a top-level `return` expression of `sourceFile` refers to. */
  function returnedSymbols(checker, sourceFile) {
    const symbols = new Set();
    const collect = (node) => {
      if (ts.isIdentifier(node)) {
        const parent = node.parent;
        const symbol = parent && ts.isShorthandPropertyAssignment(parent) && parent.name === node
          ? checker.getShorthandAssignmentValueSymbol(parent)
          : checker.getSymbolAtLocation(node);
        if (symbol) symbols.add(symbol);
      }
      ts.forEachChild(node, collect);
    };
    const visit = (node) => {
      if (ts.isFunctionLike(node) || ts.isClassStaticBlockDeclaration(node)) return;
      if (ts.isReturnStatement(node)) {
        if (node.expression) collect(node.expression);
        return;
      }
      ts.forEachChild(node, visit);
    };
    ts.forEachChild(sourceFile, visit);
    return symbols;
  }

  /** The declared names inside a diagnostic's span. */
  function declaredNames(sourceFile, start, end) {
    const names = [];
    const visit = (node) => {
      if (node.end <= start || node.getStart(sourceFile) >= end) return;
      const parent = node.parent;
      if (ts.isIdentifier(node) && node.getStart(sourceFile) >= start && node.end <= end && parent && parent.name === node
        && (ts.isVariableDeclaration(parent) || ts.isBindingElement(parent) || ts.isParameter(parent)
          || ts.isFunctionDeclaration(parent) || ts.isClassDeclaration(parent))) {
        names.push(node);
      }
      ts.forEachChild(node, visit);
    };
    visit(sourceFile);
    return names;
  }

  function create(info) {
    const project = info.project;
    const logger = project.projectService.logger;
    log = (message) => logger.info(message);
    const projectGlobs = globsOf(info.config, log);
    let isWorkflowFile = compileGlobs(clientGlobs || projectGlobs || DEFAULT_GLOBS);
    const state = {
      project,
      reconfigure() { isWorkflowFile = compileGlobs(clientGlobs || projectGlobs || DEFAULT_GLOBS); },
    };
    projects.add(state);

    const languageService = info.languageService;
    const host = info.languageServiceHost;

    /** Whether a root file of this project is a pi-subagents script (pragma or `runs.*` call). */
    const subagentsCache = new Map();
    function isSubagentsScript(fileName) {
      const version = host.getScriptVersion(fileName);
      const cached = subagentsCache.get(fileName);
      if (cached && cached.version === version) return cached.value;
      const snapshot = host.getScriptSnapshot(fileName);
      const text = snapshot ? snapshot.getText(0, snapshot.getLength()) : "";
      const value = SUBAGENTS_PRAGMA.test(text) || SUBAGENTS_CALL.test(text);
      subagentsCache.set(fileName, { version, value });
      return value;
    }

    // The language service reads its root files and options from the host, for inferred and
    // configured projects alike: adding the declarations here types the globals with no user setup.
    const getScriptFileNames = host.getScriptFileNames;
    const workflowsOf = (names) => names.filter((name) => isWorkflowFile(name));
    host.getScriptFileNames = function () {
      const names = getScriptFileNames.call(this);
      const workflows = workflowsOf(names);
      if (workflows.length === 0) return names;
      const extra = [WORKFLOW_DTS];
      if (workflows.some(isSubagentsScript)) extra.push(SUBAGENTS_DTS);
      return names.concat(extra.filter((name) => !names.includes(name)));
    };
    // Each workflow file is its own function body, so its top-level names must not clash with
    // another workflow's: every file of such a project is a module (`moduleDetection: force`).
    const getCompilationSettings = host.getCompilationSettings;
    let forced = { base: undefined, settings: undefined };
    host.getCompilationSettings = function () {
      const base = getCompilationSettings.call(this);
      if (workflowsOf(getScriptFileNames.call(this)).length === 0) return base;
      if (forced.base !== base) forced = { base, settings: { ...base, moduleDetection: ts.ModuleDetectionKind.Force } };
      return forced.settings;
    };

    function withoutUnusedCausedByReturn(fileName, diagnostics) {
      if (!diagnostics.some((d) => UNUSED.has(d.code))) return diagnostics;
      const program = languageService.getProgram();
      const sourceFile = program && program.getSourceFile(fileName);
      if (!sourceFile) return diagnostics;
      const checker = program.getTypeChecker();
      const returned = returnedSymbols(checker, sourceFile);
      if (returned.size === 0) return diagnostics;
      return diagnostics.filter((d) => {
        if (!UNUSED.has(d.code) || d.start === undefined) return true;
        const names = declaredNames(sourceFile, d.start, d.start + (d.length || 0));
        return names.length === 0 || !names.every((name) => returned.has(checker.getSymbolAtLocation(name)));
      });
    }

    const proxy = Object.create(null);
    for (const key of Object.keys(languageService)) {
      const member = languageService[key];
      proxy[key] = typeof member === "function" ? member.bind(languageService) : member;
    }
    proxy.getSemanticDiagnostics = (fileName) => {
      const diagnostics = languageService.getSemanticDiagnostics(fileName);
      if (!isWorkflowFile(fileName)) return diagnostics;
      const kept = diagnostics.filter((d) => d.code !== TOP_LEVEL_RETURN && !TOP_LEVEL_AWAIT.has(d.code));
      return withoutUnusedCausedByReturn(fileName, kept);
    };
    proxy.getSuggestionDiagnostics = (fileName) => {
      const diagnostics = languageService.getSuggestionDiagnostics(fileName);
      return isWorkflowFile(fileName) ? withoutUnusedCausedByReturn(fileName, diagnostics) : diagnostics;
    };
    return proxy;
  }

  function onConfigurationChanged(config) {
    clientGlobs = globsOf(config, log);
    for (const state of projects) {
      if (state.project.isClosed()) {
        projects.delete(state);
        continue;
      }
      state.reconfigure();
      state.project.markAsDirty();
    }
  }

  return { create, onConfigurationChanged };
}

module.exports = init;
module.exports.compileGlobs = compileGlobs;
