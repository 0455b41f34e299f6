// The workflow script runtime inside the worker (spec A): globals, primitives, async context and
// the host-call queue. Evaluated once per worker, before the script, as a plain QuickJS script.
//
// Contract with runtime.py (the only caller):
// - dukpy installs `call_python` (and a `dukpy` data global) before every evaluation. This file
//   keeps the first `call_python` in a closure and turns both globals into inert accessors, so the
//   script never reaches them, even through setters it might define.
// - Every later evaluation calls `__pi_extensible_workflows_worker(...)`. The function first pulls
//   the request of that evaluation from Python (`call_python("inbox")`); a call the script makes
//   itself finds no request and does nothing. `call_python("tick")` reports progress (heartbeats).
// - Requests: `compile` (the argument is the instrumented body function), `launch` ({args,
//   functions, variables}), `settle` ({batches}: the host's settle lines, `{"t":"settle",
//   "results":[...]}` each, as it sent them) and `flush`. Each fills an outbox of JSON lines that
//   keeps filling while QuickJS drains the job queue after the call returns, and returns a report
//   whose `toJSON` dukpy calls once the queue has drained: {lines (one text), pending, finished}.
//   So every host call made by the script during that evaluation reaches Python in call order. The
//   outbox and the report have no prototype, so a script that changes Array.prototype or
//   Object.prototype (a `toJSON`, an index setter) cannot alter or swallow what reaches Python. A
//   request that is not JSON reports `{malformed: true}`.
(function (global) {
  "use strict";

  const hostCall = global.call_python;
  const LIMIT = 10 * 1024 * 1024;
  const OUTCOME_CODES = ["AGENT_TIMEOUT", "AGENT_FAILED", "RESULT_INVALID"];
  const REMOVED_GLOBALS = [
    "Date", "eval", "Function", "WebAssembly", "process", "require", "module", "exports", "console", "fetch",
    "XMLHttpRequest", "WebSocket", "performance", "crypto", "setTimeout", "setInterval", "setImmediate",
    "queueMicrotask", "Intl", "SharedArrayBuffer", "Atomics",
  ];

  // Intrinsics the protocol depends on, captured before the script can replace them.
  const apply = Reflect.apply;
  const ownKeys = Reflect.ownKeys;
  const { create, defineProperty, freeze, isFrozen, getPrototypeOf, setPrototypeOf, getOwnPropertyDescriptor,
    getOwnPropertyNames, keys: objectKeys, entries: objectEntries, fromEntries } = Object;
  const ObjectPrototype = Object.prototype;
  const hasOwn = Object.hasOwn;
  const isArray = Array.isArray;
  const join = Array.prototype.join;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const NativePromise = Promise;
  const promiseThen = Promise.prototype.then;
  const promiseReject = Promise.reject;
  const promiseResolve = Promise.resolve;
  const NativeError = Error;
  const NativeEvalError = EvalError;
  const toPrimitive = Symbol.toPrimitive;
  const encodeName = encodeURIComponent;
  const isFiniteNumber = Number.isFinite;

  const after = (promise, onFulfilled, onRejected) => apply(promiseThen, promise, [onFulfilled, onRejected]);

  // ---------------------------------------------------------------------------------- errors ---
  const workError = (code, message) => {
    const error = new NativeError(message);
    error.code = code;
    return error;
  };
  const hasMessage = (error) => Boolean(error) && typeof error === "object" && typeof error.message === "string";
  const codeOf = (error) => (error && typeof error === "object" && typeof error.code === "string" ? error.code : undefined);
  const textOf = (error) => {
    if (hasMessage(error)) return error.message;
    try {
      return String(error);
    } catch {
      return apply(ObjectPrototype.toString, error, []);
    }
  };
  // The wire shape of a failure (A.13): a thrown Error without a code is the author's own message.
  const describe = (error) => {
    const code = codeOf(error);
    // No prototype: JSON.stringify must not find a `toJSON` the script put on Object.prototype.
    const shape = setPrototypeOf({ code: code || "INTERNAL_ERROR", message: textOf(error) }, null);
    if (error && typeof error === "object" && typeof error.failedAt === "string") shape.failedAt = error.failedAt;
    shape.authored = Boolean(error && typeof error === "object" && error.authored === true) || (hasMessage(error) && !code);
    return shape;
  };
  const rebuild = (shape) => {
    const error = workError(typeof shape.code === "string" ? shape.code : "INTERNAL_ERROR", String(shape.message));
    if (typeof shape.failedAt === "string") error.failedAt = shape.failedAt;
    if (shape.authored === true) error.authored = true;
    return error;
  };

  // ------------------------------------------------------------------------------ JSON text ---
  const json = (value) => {
    const text = stringify(value);
    return text === undefined ? "null" : text;
  };
  const utf8Length = (text) => {
    let bytes = 0;
    for (let index = 0; index < text.length; index += 1) {
      const unit = text.charCodeAt(index);
      if (unit < 0x80) bytes += 1;
      else if (unit < 0x800) bytes += 2;
      else if (unit >= 0xd800 && unit < 0xdc00 && index + 1 < text.length) {
        bytes += 4;
        index += 1;
      } else bytes += 3;
    }
    return bytes;
  };
  const exceedsLimit = (text) => text.length * 3 > LIMIT && (text.length > LIMIT || utf8Length(text) > LIMIT);
  const encodePath = (names) => {
    let path = "";
    for (let index = 0; index < names.length; index += 1) path += (index ? "/" : "") + encodeName(names[index]);
    return path;
  };

  // ------------------------------------------------------------------------- async context ---
  // The structural path (parallel/pipeline) and worktree owner that follow the script's async flow.
  // `current` is correct whenever script code runs: synchronous calls inherit it, `within` swaps it
  // around task callbacks, instrumented awaits restore it on resumption, and promise callbacks run
  // in the context they were registered in.
  // The path's JSON is written by hand: JSON.stringify of an array would consult a `toJSON` the
  // script may have put on Array.prototype, strings it cannot intercept.
  const namesText = (names) => {
    let text = "[";
    for (let index = 0; index < names.length; index += 1) text += (index ? "," : "") + stringify(names[index]);
    return text + "]";
  };
  const contextOf = (path, owner) => ({ path, owner, pathText: namesText(path), ownerText: stringify(owner) });
  const ROOT = contextOf([], null);
  let current = ROOT;
  const within = (context, callback, args) => {
    const outer = current;
    current = context;
    try {
      return apply(callback, undefined, args);
    } finally {
      current = outer;
    }
  };
  const branch = (context, names) => contextOf(context.path.concat(names), context.owner);
  const currentContext = () => current;
  const resume = (context, value) => {
    current = context;
    return value;
  };
  let thenHook = null; // the pi-subagents dialect's launch tracking (see its section), else null
  const bound = (context, callback) =>
    typeof callback === "function" ? function (value) { return within(context, callback, [value]); } : callback;
  defineProperty(NativePromise.prototype, "then", {
    value: function then(onFulfilled, onRejected) {
      if (thenHook !== null) return apply(thenHook, this, [onFulfilled, onRejected]);
      const context = current;
      return apply(promiseThen, this, [bound(context, onFulfilled), bound(context, onRejected)]);
    },
    writable: false,
    enumerable: false,
    configurable: false,
  });

  // ----------------------------------------------------------------------------- host calls ---
  // One promise per call, resolved or rejected by `settle`. Agent outcomes (timeout, failure,
  // invalid result) fail only that promise; any other error also fails the run when the body has
  // already returned and waits for the call (A.1: an unawaited failing `phase(5)` fails the run).
  const newOutbox = () => setPrototypeOf([], null);
  let outbox = newOutbox();
  let lastId = 0;
  let finished = false;
  // Maps, not objects: QuickJS copies an object's shape on every new key, quadratic for 10k calls.
  const resolvers = new Map();
  const rejecters = new Map();
  let awaited = null; // {ids, resolve, reject} once the body has settled
  const emit = (line) => {
    outbox[outbox.length] = line;
  };
  // Tells Python the script is making progress, so a long synchronous turn that keeps calling the
  // host (a 100k-task fan-out) still heartbeats, while `while(true){}` does not.
  let work = 0;
  const progressed = () => {
    work += 1;
    if (work === 1024) {
      work = 0;
      hostCall("tick");
    }
  };
  // Sends one call; `fields` is the JSON text of the message after its op. Throws synchronously
  // when the message would cross the 10 MiB boundary, as the reference's `send` does.
  const call = (op, fields) => {
    const id = lastId + 1;
    const line = '{"t":"call","id":' + id + ',"op":"' + op + '"' + fields + "}";
    if (exceedsLimit(line)) throw workError("RPC_LIMIT_EXCEEDED", "RPC value exceeds the 10 MB JSON boundary");
    lastId = id;
    emit(line);
    progressed();
    return new NativePromise((resolve, reject) => {
      resolvers.set(id, resolve);
      rejecters.set(id, reject);
    });
  };
  const settle = (results) => {
    for (let index = 0; index < results.length; index += 1) {
      const result = results[index];
      const id = result && typeof result.id === "number" ? result.id : 0;
      const resolve = resolvers.get(id);
      if (resolve === undefined) continue;
      progressed();
      const reject = rejecters.get(id);
      resolvers.delete(id);
      rejecters.delete(id);
      let runFailure = null;
      if (result.ok === true) resolve(result.value === undefined ? null : result.value);
      else {
        const error = rebuild(result.error && typeof result.error === "object" ? result.error : {});
        if (!OUTCOME_CODES.includes(error.code)) runFailure = error;
        reject(error);
      }
      if (awaited !== null && awaited.ids.delete(id)) {
        const waiter = awaited;
        if (runFailure !== null || waiter.ids.size === 0) awaited = null;
        if (runFailure !== null) waiter.reject(runFailure);
        else if (waiter.ids.size === 0) waiter.resolve();
      }
    }
  };
  const inFlight = () => {
    const ids = new Set(resolvers.keys());
    if (!ids.size) return undefined;
    return new NativePromise((resolve, reject) => {
      awaited = { ids, resolve, reject };
    });
  };

  // A primitive's promise refuses coercion (A.4). The refusals live on a prototype between the
  // promise and Promise.prototype whose `constructor` stays Promise, so `await` and `Promise.all`
  // treat it as a native promise and no per-call functions are allocated.
  const refusing = (noun, interpolation) => {
    const refuse = (use) => ({
      value: function () { throw workError("INVALID_METADATA", "Workflow " + noun + " result is a Promise; await it before " + use); },
    });
    const properties = { constructor: { value: NativePromise }, toJSON: refuse("serialization") };
    if (interpolation) {
      properties.toString = refuse("interpolation");
      properties[toPrimitive] = refuse("interpolation");
    }
    return freeze(create(NativePromise.prototype, properties));
  };
  const AGENT_RESULT = refusing("agent", true);
  const CONVERSATION_RESULT = refusing("conversation", true);
  const FUNCTION_RESULT = refusing("function", false);
  const guarded = (promise, prototype) => setPrototypeOf(promise, prototype);

  const nextOccurrence = (counters, key) => {
    const occurrence = (counters.get(key) || 0) + 1;
    counters.set(key, occurrence);
    return occurrence;
  };
  const popCallSite = (values, noun) => {
    const callSite = values.pop();
    if (typeof callSite !== "string") throw workError("INTERNAL_ERROR", "Missing " + noun + " call-site identity");
    return callSite;
  };
  // `"path":[...],"occurrence":n,"worktreeOwner":...` of an identity message.
  const placement = (context, occurrence) =>
    '"path":' + context.pathText + ',"occurrence":' + occurrence + ',"worktreeOwner":' + context.ownerText;

  // ------------------------------------------------------------------------------ primitives ---
  const agentOccurrences = new Map();
  const internalAgent = (...values) => {
    const callSite = popCallSite(values, "workflow agent");
    const context = current;
    const occurrence = nextOccurrence(agentOccurrences, context.pathText + callSite);
    const options = values.length < 2 || values[1] === undefined ? {} : values[1];
    const identity = '{"callSite":' + stringify(callSite) + "," + placement(context, occurrence) + "}";
    const sent = call("agent", ',"prompt":' + json(values[0]) + ',"options":' + json(options) + ',"identity":' + identity);
    return guarded(sent, AGENT_RESULT);
  };

  const conversationOccurrences = new Map();
  const internalConversation = (...values) => {
    const callSite = popCallSite(values, "workflow conversation");
    const name = values[0];
    if (typeof name !== "string" || !name.trim()) throw workError("INVALID_METADATA", "conversation requires a non-empty name");
    const options = values.length < 2 || values[1] === undefined ? {} : values[1];
    if (!options || typeof options !== "object" || isArray(options)) {
      throw workError("INVALID_METADATA", "conversation options must be a JSON object");
    }
    const context = current;
    const occurrence = nextOccurrence(conversationOccurrences, stringify([context.path, callSite, name]));
    const fixed = parse(json(options));
    const defaultTimeout = fixed.timeoutMs;
    const defaultRetries = fixed.retries;
    delete fixed.timeoutMs;
    delete fixed.retries;
    const identity = '{"name":' + stringify(name.trim()) + ',"callSite":' + stringify(callSite) + ","
      + placement(context, occurrence) + "}";
    let completedTurns = 0;
    let active = false;
    return freeze({
      run(prompt, turnOptions = {}) {
        if (typeof prompt !== "string") throw workError("INVALID_METADATA", "conversation.run prompt must be a string");
        if (!turnOptions || typeof turnOptions !== "object" || isArray(turnOptions)
          || objectKeys(turnOptions).some((key) => key !== "timeoutMs" && key !== "retries")) {
          throw workError("INVALID_METADATA", "conversation.run options only support timeoutMs and retries");
        }
        if (active) throw workError("RESUME_INCOMPATIBLE", "Conversation turns cannot overlap");
        const turn = completedTurns + 1;
        const effective = {
          ...fixed,
          ...(defaultTimeout !== undefined && turnOptions.timeoutMs === undefined ? { timeoutMs: defaultTimeout } : {}),
          ...(defaultRetries !== undefined && turnOptions.retries === undefined ? { retries: defaultRetries } : {}),
          ...turnOptions,
        };
        const sent = call("turn", ',"prompt":' + json(prompt) + ',"options":' + json(effective)
          + ',"conversation":' + identity + ',"turn":' + turn);
        active = true;
        // A failed turn leaves the counter alone: the next run() retries the same turn number (A.5).
        const released = after(sent, (value) => {
          completedTurns = turn;
          active = false;
          return value;
        }, (error) => {
          active = false;
          throw error;
        });
        return guarded(released, CONVERSATION_RESULT);
      },
    });
  };

  const worktreeOccurrences = new Map();
  const internalWithWorktree = async (...values) => {
    const callSite = popCallSite(values, "withWorktree");
    if (values.length !== 1 && values.length !== 2) {
      throw workError("INVALID_METADATA", "withWorktree requires a callback or a name and callback");
    }
    const callback = values[values.length - 1];
    if (typeof callback !== "function") throw workError("INVALID_METADATA", "withWorktree callback must be a function");
    const context = current;
    let owner;
    if (values.length === 2) {
      if (typeof values[0] !== "string" || !values[0].trim()) {
        throw workError("INVALID_METADATA", "withWorktree name must be a non-empty string");
      }
      owner = encodePath(["worktree", "named", values[0].trim()]);
    } else {
      const occurrence = nextOccurrence(worktreeOccurrences, context.pathText + callSite);
      owner = encodePath(["worktree", "unnamed", ...context.path, "callsite:" + callSite, "occurrence:" + occurrence]);
    }
    return await within(contextOf(context.path, owner), callback, []);
  };

  const requireName = (value, kind) => {
    if (typeof value !== "string" || !value.trim()) throw workError("INVALID_METADATA", kind + " requires a stable explicit name");
  };
  const recordEntries = (value, kind) => {
    if (!value || typeof value !== "object" || isArray(value)) throw workError("INVALID_METADATA", kind + " must be a record");
    return objectEntries(value);
  };
  const failedAtOf = (error) => (error && typeof error === "object" && typeof error.failedAt === "string" ? error.failedAt : undefined);
  const failure = (name, failedAt, error) => ({ name, ok: false, failedAt, error: describe(error) });
  // Runs one branch callback in its scope (sync throws included) and reports how it settled.
  const runBranch = (context, names, callback, args, onValue, onError) => {
    let started;
    try {
      started = apply(promiseResolve, NativePromise, [within(branch(context, names), callback, args)]);
    } catch (error) {
      started = apply(promiseReject, NativePromise, [error]);
    }
    after(started, onValue, onError);
  };
  // Starts `count` branches and waits for every outcome record; CANCELLED rejects at once (A.6).
  // Plain counters instead of Promise.all: a 50k-branch fan-out allocates far less.
  // The outcome list has no prototype: an index setter the script puts on Array.prototype must not
  // swallow outcomes.
  const gather = (count, start) => new NativePromise((resolve, reject) => {
    const outcomes = setPrototypeOf(new Array(count), null);
    let remaining = count;
    let open = true;
    const record = (index, outcome) => {
      outcomes[index] = outcome;
      remaining -= 1;
      if (remaining === 0 && open) resolve(outcomes);
    };
    const cancel = (error) => {
      if (open) reject(error);
      open = false;
    };
    if (count === 0) resolve(outcomes);
    for (let index = 0; index < count; index += 1) start(index, record, cancel);
  });
  // The first failure in record order is rethrown with its failedAt; otherwise values by name.
  const keyedResults = (outcomes) => {
    for (let index = 0; index < outcomes.length; index += 1) {
      const outcome = outcomes[index];
      if (!outcome.ok) {
        const error = rebuild(outcome.error);
        error.failedAt = outcome.failedAt;
        throw error;
      }
    }
    const values = {};
    for (let index = 0; index < outcomes.length; index += 1) {
      const { name, value } = outcomes[index];
      defineProperty(values, name, { value, writable: true, enumerable: true, configurable: true });
    }
    return values;
  };

  const parallel = async (operationName, tasks) => {
    requireName(operationName, "parallel");
    const entries = recordEntries(tasks, "parallel tasks");
    for (const [name, run] of entries) {
      requireName(name, "parallel task");
      if (typeof run !== "function") throw workError("INVALID_METADATA", "parallel task values must be run functions");
    }
    const context = current;
    return keyedResults(await gather(entries.length, (index, record, cancel) => {
      const name = entries[index][0];
      runBranch(context, [operationName, name], entries[index][1], [], (value) => record(index, { name, ok: true, value }), (error) => {
        if (codeOf(error) === "CANCELLED") return cancel(error);
        const inner = failedAtOf(error);
        const names = inner === undefined ? [operationName, name] : [operationName, name, inner];
        return record(index, failure(name, encodePath(names), error));
      });
    }));
  };

  const pipeline = async (operationName, items, stages) => {
    requireName(operationName, "pipeline");
    const itemEntries = recordEntries(items, "pipeline items");
    const stageEntries = recordEntries(stages, "pipeline stages");
    if (!stageEntries.length) throw workError("INVALID_METADATA", "pipeline requires at least one stage");
    for (const [name] of itemEntries) requireName(name, "pipeline item");
    for (const [name, run] of stageEntries) {
      requireName(name, "pipeline stage");
      if (typeof run !== "function") throw workError("INVALID_METADATA", "pipeline stage values must be run functions");
    }
    const context = current;
    return keyedResults(await gather(itemEntries.length, (index, record, cancel) => {
      const name = itemEntries[index][0];
      const advance = (stageIndex, value) => {
        if (stageIndex === stageEntries.length) return record(index, { name, ok: true, value });
        const [stage, run] = stageEntries[stageIndex];
        return runBranch(context, [operationName, name, stage], run, [value], (next) => advance(stageIndex + 1, next), (error) => {
          if (codeOf(error) === "CANCELLED") return cancel(error);
          // The reference joins the already-encoded stage path with the inner one, encoding it again.
          const stagePath = encodePath([operationName, name, stage]);
          const inner = failedAtOf(error);
          return record(index, failure(name, inner === undefined ? stagePath : encodePath([stagePath, inner]), error));
        });
      };
      advance(0, itemEntries[index][1]);
    }));
  };

  // A.9: the host validates; labels count only the checkpoints it will accept, per raw name.
  const checkpointCounts = new Map();
  const acceptedCheckpoint = (input) => {
    if (!input || typeof input !== "object" || isArray(input)) return false;
    const keys = objectKeys(input);
    if (keys.length !== 3 || !keys.every((key) => key === "name" || key === "prompt" || key === "context")) return false;
    return typeof input.name === "string" && input.name.trim() !== "" && typeof input.prompt === "string"
      && utf8Length(input.prompt) <= 1024 && utf8Length(stringify(input.context)) <= 4096;
  };
  const checkpoint = (input) => {
    const value = json(input);
    const sent = parse(value);
    let label = null;
    if (acceptedCheckpoint(sent)) {
      const count = nextOccurrence(checkpointCounts, sent.name);
      label = count === 1 ? sent.name : sent.name + "#" + count;
    }
    return call("checkpoint", ',"value":' + value + ',"label":' + stringify(label));
  };

  const phase = (name) => call("phase", ',"name":' + json(name));
  const log = (message) => call("log", ',"message":' + json(message));

  const functionOccurrences = new Map();
  const extensionFunction = (name) => (...values) => {
    const input = values[0];
    if (values.length !== 1 || !input || typeof input !== "object" || isArray(input)) {
      throw workError("RESULT_INVALID", name + " requires exactly one JSON object argument");
    }
    const context = current;
    const occurrence = nextOccurrence(functionOccurrences, context.pathText + name);
    const identity = "{" + placement(context, occurrence) + "}";
    const sent = call("function", ',"name":' + stringify(name) + ',"input":' + json(input) + ',"identity":' + identity);
    return guarded(sent, FUNCTION_RESULT);
  };

  // ---------------------------------------------------------------------------------- prompt ---
  const PLACEHOLDER = /{{|}}|{([A-Za-z_$][\w$]*)}/g;
  const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
  const plainObject = (value) => {
    const prototype = getPrototypeOf(value);
    return prototype === null || prototype === ObjectPrototype;
  };
  const promptFailure = (at, problem) => workError("INVALID_METADATA", 'Prompt value "' + at + '" ' + problem);
  const childPath = (at, key) => (IDENTIFIER.test(key) ? at + "." + key : at + "[" + stringify(key) + "]");
  const checkPromptProperty = (owner, key, at, seen) => {
    const descriptor = getOwnPropertyDescriptor(owner, key);
    if (descriptor && (descriptor.get || descriptor.set)) throw promptFailure(at, "cannot use getters or setters");
    checkPromptValue(descriptor && descriptor.value, at, seen);
  };
  const checkPromptValue = (value, at, seen) => {
    if (value === null || typeof value === "string" || typeof value === "boolean") return;
    if (typeof value === "number") {
      if (!isFiniteNumber(value)) throw promptFailure(at, "must be a finite number");
      return;
    }
    if (typeof value !== "object") throw promptFailure(at, "cannot be " + typeof value);
    if (typeof value.then === "function") throw promptFailure(at, "is a Promise or thenable; await it before calling prompt()");
    if (!isArray(value) && !plainObject(value)) throw promptFailure(at, "must be a plain object");
    if (seen.has(value)) throw promptFailure(at, "contains a cycle");
    const keys = ownKeys(value);
    if (keys.some((key) => typeof key === "symbol")) throw promptFailure(at, "contains a symbol key");
    seen.add(value);
    if (isArray(value)) {
      for (let index = 0; index < value.length; index += 1) checkPromptProperty(value, String(index), at + "[" + index + "]", seen);
      for (const key of keys) {
        const index = Number(key);
        const element = Number.isInteger(index) && index >= 0 && index < value.length && String(index) === key;
        if (key !== "length" && !element) checkPromptProperty(value, key, childPath(at, key), seen);
      }
    } else {
      for (const key of keys) checkPromptProperty(value, key, childPath(at, key), seen);
    }
    seen.delete(value);
  };
  const prompt = (template, values) => {
    if (typeof template !== "string") throw workError("INVALID_METADATA", "prompt() template must be a string");
    if (!values || typeof values !== "object" || isArray(values) || !plainObject(values)) {
      throw workError("INVALID_METADATA", "prompt() values must be a plain object");
    }
    const placeholders = [];
    for (const match of template.matchAll(PLACEHOLDER)) if (match[1] !== undefined) placeholders.push(match[1]);
    const keys = ownKeys(values);
    if (keys.some((key) => typeof key === "symbol")) throw workError("INVALID_METADATA", "prompt() values must use string keys");
    const missing = placeholders.find((key) => !hasOwn(values, key));
    if (missing !== undefined) throw workError("INVALID_METADATA", 'Missing prompt value "' + missing + '"');
    const unused = keys.find((key) => !placeholders.includes(key));
    if (unused !== undefined) throw workError("INVALID_METADATA", 'Unused prompt value "' + unused + '"');
    for (const key of keys) checkPromptProperty(values, key, key, new Set());
    return template.replace(PLACEHOLDER, (match, key) => {
      if (match === "{{") return "{";
      if (match === "}}") return "}";
      return typeof values[key] === "string" ? values[key] : stringify(values[key], null, 2);
    });
  };

  // ======================================================== pi-subagents dialect (workflowScript) ===
  // `runs`, `emit`, `console` and `state` of a pi-subagents script (SUBAGENTS_SPEC A.2–A.9), installed
  // instead of the globals above when the launch names this dialect. The worker checks what the spec
  // says the worker throws synchronously (key grammar, key reuse, params shape, JSON boundary); the
  // host validates agents and limits and runs the children. `runs.lanes` and `runs.host` are hooks:
  // `subagentHooks.lanes` / `subagentHooks.host` (a JavaScript implementation on top of `runs`).
  const SUBAGENTS = "pi-subagents";
  const NativeRegExp = RegExp;
  const NativeProxy = Proxy;
  const reflectGet = Reflect.get;
  const KEY_GRAMMAR = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
  const LEGACY_FIELDS = ["action", "workflowScript", "tasks", "chain", "parallel", "concurrency", "chainDir",
    "globalConcurrencyLimit", "maxSubagentSpawnsPerRun"];
  const STEER_MODES = ["steer", "follow_up", "auto"];
  const STEER_FIELDS = ["mode", "index", "ackTimeoutMs"];
  const STATE_LIMIT = 256 * 1024;
  const subagentFailure = (message) => workError("INVALID_METADATA", message);
  const isInteger = Number.isInteger;
  const isPlainRecord = (value) => Boolean(value) && typeof value === "object" && !isArray(value);

  // The JSON boundary (A.2): the first value that is not plain JSON, as `{path, type}` (`type` is
  // "non-finite" for NaN/±Infinity), or null. `path` uses `.name` and `[i]` from the given root.
  const jsonProblem = (value, path, seen, allowUndefined = false) => {
    const kind = typeof value;
    if (value === null || (allowUndefined && value === undefined) || kind === "string" || kind === "boolean") return null;
    if (kind === "number") return isFiniteNumber(value) ? null : { path, type: "non-finite" };
    if (kind !== "object") return { path, type: kind };
    if (value instanceof NativeRegExp) return { path, type: "regular expression" };
    if (seen.has(value)) return { path, type: "cyclic value" };
    seen.add(value);
    try {
      if (isArray(value)) {
        for (let index = 0; index < value.length; index += 1) {
          if (!hasOwn(value, index)) {
            if (allowUndefined) continue;
            return { path: path + "[" + index + "]", type: "sparse array hole" };
          }
          const inner = jsonProblem(value[index], path + "[" + index + "]", seen, allowUndefined);
          if (inner !== null) return inner;
        }
        return null;
      }
      for (const key of ownKeys(value)) {
        if (typeof key === "symbol") return { path, type: "symbol key" };
        const inner = jsonProblem(value[key], path === "" ? key : path + "." + key, seen, allowUndefined);
        if (inner !== null) return inner;
      }
      return null;
    } finally {
      seen.delete(value);
    }
  };
  // `what must be a JSON value; received <type>.` or `what must contain only finite JSON numbers.`
  const requireJson = (value, what) => {
    const problem = jsonProblem(value, "", new Set());
    if (problem === null) return;
    const where = problem.path === "" ? what : what + "." + problem.path;
    if (problem.type === "non-finite") throw subagentFailure(where + " must contain only finite JSON numbers.");
    throw subagentFailure(where + " must be a JSON value; received " + problem.type + ".");
  };
  // Canonical JSON (sorted keys): the "same params" of key reuse (A.3).
  const canonical = (value) => {
    if (isArray(value)) {
      let text = "[";
      for (let index = 0; index < value.length; index += 1) text += (index ? "," : "") + canonical(value[index]);
      return text + "]";
    }
    if (value && typeof value === "object") {
      const names = objectKeys(value).sort();
      let text = "{";
      for (let index = 0; index < names.length; index += 1) {
        text += (index ? "," : "") + stringify(names[index]) + ":" + canonical(value[names[index]]);
      }
      return text + "}";
    }
    return stringify(value);
  };

  // The observation rule (A.2). QuickJS has no promise hooks, so launches are tracked by hand: a
  // launch's promise carries its record; `then` (and so Promise.all/race, `return`, chaining)
  // hands the records on to the derived promise, and a promise counts as observed when the script
  // awaits it (`await` is instrumented to call `observe`) or the body returns it.
  const carried = new WeakMap();
  const launches = [];
  const track = (promise, records) => {
    if (records.length) carried.set(promise, records);
    return promise;
  };
  const observe = (value) => {
    const records = value !== null && typeof value === "object" ? carried.get(value) : undefined;
    if (records !== undefined) for (let index = 0; index < records.length; index += 1) records[index].observed = true;
    return value;
  };
  const carryingThen = function then(onFulfilled, onRejected) {
    const records = carried.get(this);
    if (records === undefined) return apply(promiseThen, this, [onFulfilled, onRejected]);
    // A callback that returns a tracked promise hands its records on as well.
    const derived = [...records];
    const adopt = (callback) => (typeof callback === "function"
      ? function (value) {
        const next = apply(callback, undefined, [value]);
        const more = next !== null && typeof next === "object" ? carried.get(next) : undefined;
        if (more !== undefined) for (let index = 0; index < more.length; index += 1) derived.push(more[index]);
        return next;
      }
      : callback);
    return track(apply(promiseThen, this, [adopt(onFulfilled), adopt(onRejected)]), derived);
  };
  // Promise.all/allSettled/race/any of tracked promises carry the records of every member.
  const wrapCombinator = (name) => {
    const original = NativePromise[name];
    defineProperty(NativePromise, name, {
      value: function (iterable) {
        const members = [];
        const items = [];
        for (const item of iterable) {
          items[items.length] = item;
          const records = item !== null && typeof item === "object" ? carried.get(item) : undefined;
          if (records !== undefined) for (let index = 0; index < records.length; index += 1) members.push(records[index]);
        }
        return track(apply(original, this, [items]), members);
      },
      writable: true, enumerable: false, configurable: true,
    });
  };
  const unobservedFailure = () => {
    const kinds = [["run", "runs.run launch(es)",
      ". For ordinary parallel fanout use await runs.all([{key, agent, task}, ...]); do not read .output from unawaited launches."],
      ["steer", "runs.steer call(s)", ". Await or return each call."],
      ["host", "runs.host call(s)", ". Await or return each call."]];
    for (const [kind, noun, advice] of kinds) {
      const keys = [];
      for (const record of launches) if (record.kind === kind && !record.observed && !keys.includes(record.key)) keys.push(record.key);
      if (keys.length) {
        return subagentFailure("workflowScript completed with unawaited " + noun + ": "
          + keys.map((key) => "'" + key + "'").join(", ") + advice);
      }
    }
    return null;
  };

  // Keys (A.3): one result lane each; the same params reuse the invocation, others are an error.
  const invocations = new Map();
  const requireKey = (key, label) => {
    if (typeof key !== "string" || !KEY_GRAMMAR.test(key)) throw subagentFailure(label + " has an invalid key.");
  };
  const checkChildParams = (params, label) => {
    if (!isPlainRecord(params)) throw subagentFailure(label + " params must be an object.");
    for (const field of LEGACY_FIELDS) {
      if (hasOwn(params, field)) {
        throw subagentFailure("runs.run accepts one child via { agent, task } and execution controls only; use runs.all(...) and JavaScript control flow for orchestration.");
      }
    }
    if (hasOwn(params, "clarify")) throw subagentFailure(label + " does not support clarify UI.");
    if (hasOwn(params, "worktree") && typeof params.worktree !== "boolean") throw subagentFailure(label + " worktree must be true or false.");
    if (hasOwn(params, "gate") && hasOwn(params, "acceptance")) {
      throw subagentFailure(label + " gate cannot be combined with acceptance; use one gate command or acceptance.verify.");
    }
    const resuming = hasOwn(params, "resume") && params.resume !== undefined;
    if (resuming && hasOwn(params, "gate")) throw subagentFailure(label + " gate is not supported with retained resume.");
    if (resuming && hasOwn(params, "agent")) throw subagentFailure(label + " resume and agent are mutually exclusive.");
    if (resuming && (typeof params.task !== "string" || !params.task.trim())) {
      throw subagentFailure(label + " resume requires a non-empty task follow-up.");
    }
    if (resuming && isPlainRecord(params.resume)) {
      const fields = objectKeys(params.resume);
      if (fields.some((field) => field !== "workflowRunId" && field !== "key" && field !== "latest")) {
        throw subagentFailure("runs.run keyed resume contains unsupported fields.");
      }
      if (params.resume.latest !== true) throw subagentFailure("runs.run keyed resume requires latest: true.");
    }
    requireJson(params, label + " params");
  };
  // An earlier invocation of `key` with the same params, or null; throws on different params.
  const reuse = (key, text) => {
    const earlier = invocations.get(key);
    if (earlier === undefined) return null;
    if (earlier.text !== text) throw subagentFailure("Duplicate workflow key '" + key + "' used with incompatible launch params.");
    return earlier;
  };

  // Workflow defaults (A.1): the pragma's `defaults` are every child's params unless the child sets
  // them, merged before the checks so a bad default fails with the child's message. A resumed child
  // takes only the controls of a continuation (and a default `gate`, which the checks then refuse).
  const RESUME_DEFAULTS = ["gate", "timeoutMs", "toolBudget", "intercomBridge"];
  const workflow = { defaults: {}, usageBudget: false };
  const withDefaults = (params) => {
    if (!isPlainRecord(params)) return params;
    const resuming = hasOwn(params, "resume") && params.resume !== undefined;
    const merged = {};
    for (const field of objectKeys(workflow.defaults)) {
      if (!resuming || RESUME_DEFAULTS.includes(field)) merged[field] = workflow.defaults[field];
    }
    for (const field of objectKeys(params)) merged[field] = params[field];
    return merged;
  };
  // `async: true` (A.4) detaches a runs.run child only: a batch waits for its children.
  const refuseDetached = (params, label) => {
    if (params.async === true) {
      throw subagentFailure(label + " async: true is supported on runs.run only; launch a detached child with runs.run(key, { async: true, ... }).");
    }
  };

  // The keyed-access guard of a runs.all result (A.5): an ordered array, not a key map.
  const orderedResults = (results, keys) => new NativeProxy(results, {
    get(target, property, receiver) {
      if (typeof property === "string" && keys.includes(property) && !(property in target)) {
        throw subagentFailure("Cannot read runs.all result property '" + property + "'. runs.all resolves to an ordered array, not a key map. Use results[0], destructuring, or results.map(...).");
      }
      return reflectGet(target, property, receiver);
    },
  });

  const childCall = (items, batch) => call("children", ',"items":' + json(items) + ',"batch":' + (batch ? "true" : "false"));
  const runChild = (key, own) => {
    requireKey(key, "runs.run");
    const params = withDefaults(own);
    checkChildParams(params, "runs.run");
    const text = canonical(params);
    const earlier = reuse(key, text);
    if (earlier !== null) return earlier.promise;
    const record = { kind: "run", key, observed: false };
    launches.push(record);
    let promise;
    if (params.async !== true) promise = after(childCall([{ key, params }], false), (results) => results[0]);
    else if (workflow.usageBudget) {
      promise = apply(promiseReject, NativePromise, [subagentFailure("Run '" + key + "' failed: workflow usageBudget does not support async runs.run launches.")]);
    } else {
      // A detached child: a running receipt now; the host runs the child as a collected batch item
      // (its failures never reject), and the run waits for it before it ends (`inFlight`).
      after(childCall([{ key, params }], true), null, () => null);
      const agent = typeof params.agent === "string" ? params.agent : undefined;
      promise = apply(promiseResolve, NativePromise, [{ key, ok: false, state: "running", output: "", agent, async: true }]);
    }
    track(promise, [record]);
    invocations.set(key, { text, promise });
    return promise;
  };
  const runAll = (items) => {
    if (!isArray(items)) throw subagentFailure("runs.all(items) requires an array.");
    const batch = [];
    const seen = new Map();
    for (let index = 0; index < items.length; index += 1) {
      const label = "runs.all item " + index;
      const item = items[index];
      if (!isPlainRecord(item)) throw subagentFailure(label + " must be an object.");
      requireKey(item.key, label);
      const params = {};
      for (const field of objectKeys(item)) if (field !== "key") params[field] = item[field];
      const merged = withDefaults(params);
      checkChildParams(merged, label);
      refuseDetached(merged, label);
      const text = canonical(merged);
      if (seen.has(item.key) && seen.get(item.key) !== text) {
        throw subagentFailure("Duplicate workflow key '" + item.key + "' used with incompatible launch params.");
      }
      seen.set(item.key, text);
      reuse(item.key, text);
      batch.push({ key: item.key, params: merged, text });
    }
    const sent = childCall(batch.map(({ key, params }) => ({ key, params })), true);
    for (const { key, text } of batch) {
      if (!invocations.has(key)) {
        const index = batch.findIndex((entry) => entry.key === key);
        invocations.set(key, { text, promise: after(sent, (results) => results[index]) });
      }
    }
    return after(sent, (results) => orderedResults(results, batch.map((entry) => entry.key)));
  };
  const steer = (key, message, options) => {
    if (typeof key !== "string" || !KEY_GRAMMAR.test(key)) throw subagentFailure("runs.steer has an invalid key.");
    if (typeof message !== "string" || !message.trim()) throw subagentFailure("runs.steer message must be a non-empty string.");
    const given = options === undefined ? {} : options;
    if (!isPlainRecord(given)) throw subagentFailure("runs.steer options must be an object.");
    for (const field of objectKeys(given)) {
      if (!STEER_FIELDS.includes(field)) throw subagentFailure("runs.steer options contain unsupported field '" + field + "'.");
    }
    if (hasOwn(given, "mode") && !STEER_MODES.includes(given.mode)) throw subagentFailure("runs.steer mode must be 'steer', 'follow_up', or 'auto'.");
    if (hasOwn(given, "index") && !(isInteger(given.index) && given.index >= 0 && given.index <= 1000000)) {
      throw subagentFailure("runs.steer index must be an integer between 0 and 1000000.");
    }
    if (hasOwn(given, "ackTimeoutMs") && !(isInteger(given.ackTimeoutMs) && given.ackTimeoutMs > 0)) {
      throw subagentFailure("runs.steer ackTimeoutMs must be a positive integer.");
    }
    if (!invocations.has(key)) throw subagentFailure("runs.steer('" + key + "') requires a prior runs.run/runs.all launch with that key.");
    const record = { kind: "steer", key, observed: false };
    launches.push(record);
    return track(call("steer", ',"key":' + stringify(key) + ',"message":' + stringify(message) + ',"options":' + json(given)), [record]);
  };
  const status = (target) => {
    if (typeof target !== "string" || !target) throw subagentFailure("runs.status requires a workflow key or run id.");
    return call("status", ',"target":' + stringify(target));
  };
  const ref = (result) => {
    if (!isPlainRecord(result) || typeof result.key !== "string") throw subagentFailure("runs.ref requires a child result.");
    const id = typeof result.runId === "string" ? result.runId.slice(0, 8) : "none";
    return "[run " + result.key + "; id=" + id + "]";
  };
  const refs = (results) => {
    if (!isArray(results)) throw subagentFailure("runs.refs requires an array of child results.");
    return results.map(ref).join("\n");
  };
  // Hooks for `runs.lanes` and `runs.host`: an implementation receives {runs, invocations, track,
  // launches, call, requireKey, checkChildParams, requireJson, subagentFailure, withDefaults,
  // refuseDetached} and returns the method.
  const subagentHooks = { lanes: null, host: null };
  const unavailable = (name) => () => { throw subagentFailure(name + " is unavailable in this host context."); };

  // runs.host (A.7): the host validates the key and params, enforces the key namespace and the limit,
  // and runs the command (engine/subagents/host.py); the worker tracks observation and reserves the
  // key, so a later runs.run with it is a key-reuse error.
  const RESERVED = "\u0000reserved";
  subagentHooks.host = (tools) => (key, params) => {
    if (typeof key === "string" && isPlainRecord(params)) tools.requireJson(params, "runs.host('" + key + "') params");
    const record = { kind: "host", key: typeof key === "string" ? key : String(key), observed: false };
    const sent = tools.call("host", ',"key":' + json(key === undefined ? null : key) + ',"params":'
      + json(params === undefined ? null : params));
    tools.launches.push(record);
    if (typeof key === "string" && !tools.invocations.has(key)) tools.invocations.set(key, { text: RESERVED, promise: sent });
    return tools.track(sent, [record]);
  };

  // runs.lanes (A.6): the whole structure is checked here, before anything launches, with the
  // reference's messages; the host (engine/subagents/lanes.py) runs the first stages as one batch,
  // sequences each lane and returns the board.
  const laneKey = (value, owner) => {
    if (typeof value !== "string" || !KEY_GRAMMAR.test(value)) {
      throw subagentFailure(owner + " key must be 1-128 characters using letters, numbers, '.', '_' or '-', and start with a letter or number.");
    }
    return value;
  };
  subagentHooks.lanes = (tools) => (lanes) => {
    if (!isArray(lanes)) throw subagentFailure("runs.lanes(lanes) requires an array.");
    if (lanes.length === 0) throw subagentFailure("runs.lanes(lanes) requires at least one lane.");
    if (lanes.length > 32) throw subagentFailure("runs.lanes supports at most 32 lanes.");
    tools.requireJson(lanes, "runs.lanes lanes");
    if (utf8Length(canonical(lanes)) > 64 * 1024) throw subagentFailure("runs.lanes canonical JSON exceeds 64 KiB.");
    const generated = [];
    const plan = [];
    let total = 0;
    for (let laneIndex = 0; laneIndex < lanes.length; laneIndex += 1) {
      const lane = lanes[laneIndex];
      const laneLabel = "runs.lanes lane " + laneIndex;
      if (!isPlainRecord(lane)) throw subagentFailure(laneLabel + " must be an object.");
      if (objectKeys(lane).some((field) => field !== "key" && field !== "stages")) throw subagentFailure(laneLabel + " contains unsupported fields.");
      laneKey(lane.key, laneLabel);
      if (!isArray(lane.stages) || lane.stages.length === 0) throw subagentFailure(laneLabel + " stages must contain at least one stage.");
      if (lane.stages.length > 16) throw subagentFailure(laneLabel + " supports at most 16 stages.");
      const stageKeys = [];
      const stages = [];
      for (let stageIndex = 0; stageIndex < lane.stages.length; stageIndex += 1) {
        total += 1;
        if (total > 64) throw subagentFailure("runs.lanes supports at most 64 total stages.");
        const stage = lane.stages[stageIndex];
        const label = laneLabel + " stage " + stageIndex;
        if (!isPlainRecord(stage)) throw subagentFailure(label + " must be an object.");
        laneKey(stage.key, label);
        if (stageKeys.includes(stage.key)) throw subagentFailure(laneLabel + " contains duplicate stage key '" + stage.key + "'.");
        stageKeys.push(stage.key);
        const child = laneKey(lane.key + "." + stage.key, label + " generated");
        if (generated.includes(child)) throw subagentFailure("runs.lanes generated child key '" + child + "' is duplicated.");
        generated.push(child);
        const resume = stage.resume;
        if (resume !== undefined && resume !== "previous") {
          if (stageIndex === 0 && typeof resume === "string") {
            throw subagentFailure(label + " cannot resume a retained run id in runs.lanes; use runs.run(key, { resume: id }) outside lanes, or start the lane with an agent stage and use resume: \"previous\" later.");
          }
          throw subagentFailure(label + " resume must be 'previous'.");
        }
        if (stageIndex === 0 && resume === "previous") throw subagentFailure(label + " cannot resume previous without a predecessor stage.");
        const params = {};
        for (const field of objectKeys(stage)) if (field !== "key" && field !== "resume") params[field] = stage[field];
        const merged = tools.withDefaults(resume === "previous" ? { ...params, resume } : params);
        tools.checkChildParams(merged, label);
        tools.refuseDetached(merged, label);
        delete merged.resume;
        if (tools.invocations.has(child)) {
          throw subagentFailure("runs.lanes generated child key '" + child + "' is already used with incompatible launch params.");
        }
        stages.push({ key: stage.key, previous: resume === "previous", params: merged });
      }
      plan.push({ key: lane.key, stages });
    }
    const records = plan.map((lane) => ({ kind: "run", key: lane.key + "." + lane.stages[0].key, observed: false }));
    const sent = tools.call("lanes", ',"lanes":' + json(plan));
    for (const record of records) tools.launches.push(record);
    for (const child of generated) tools.invocations.set(child, { text: RESERVED, promise: sent });
    return tools.track(sent, records);
  };

  const emitValue = (value) => {
    if (value === undefined) throw subagentFailure("emit must be a JSON value; received undefined.");
    requireJson(value, "emit");
    return call("emit", ',"value":' + json(value));
  };
  const consoleLine = (level) => (...values) => {
    let text = "";
    for (let index = 0; index < values.length; index += 1) {
      const value = values[index];
      let part;
      if (typeof value === "string") part = value;
      else {
        try {
          part = stringify(value);
        } catch {
          part = undefined;
        }
        if (part === undefined) part = String(value);
      }
      text += (index ? " " : "") + part;
    }
    call("console", ',"level":' + stringify(level) + ',"text":' + stringify(text));
  };
  const stateGlobal = () => freeze({
    get: (key) => {
      requireKey(key, "state.get");
      return call("state", ',"action":"get","key":' + stringify(key));
    },
    set: (key, value) => {
      requireKey(key, "state.set");
      if (value === undefined) throw subagentFailure("workflowScript boundary value is invalid: undefined is not JSON-representable.");
      requireJson(value, "state.set value");
      const text = json(value);
      if (utf8Length(text) > STATE_LIMIT) throw subagentFailure("Workflow state exceeds the 256 KiB cap.");
      return call("state", ',"action":"set","key":' + stringify(key) + ',"value":' + text);
    },
  });

  const installSubagents = (config) => {
    for (const name of ["agent", "conversation", "withWorktree", "parallel", "pipeline", "checkpoint", "phase", "log", "prompt"]) {
      delete global[name];
    }
    thenHook = carryingThen;
    const fields = isPlainRecord(config.workflow) ? config.workflow : {};
    if (isPlainRecord(fields.defaults)) workflow.defaults = fields.defaults;
    workflow.usageBudget = fields.usageBudget !== undefined;
    for (const name of ["all", "allSettled", "race", "any"]) wrapCombinator(name);
    const runs = {
      run: runChild,
      all: runAll,
      steer,
      status,
      ref,
      refs,
      lanes: unavailable("runs.lanes"),
      host: unavailable("runs.host"),
    };
    const tools = { runs, invocations, track, launches, call, requireKey, checkChildParams, requireJson, subagentFailure, observe,
      withDefaults, refuseDetached };
    if (typeof subagentHooks.lanes === "function") runs.lanes = subagentHooks.lanes(tools);
    if (typeof subagentHooks.host === "function") runs.host = subagentHooks.host(tools);
    fixGlobal("runs", freeze(runs));
    setGlobal("emit", emitValue);
    setGlobal("console", freeze({ log: consoleLine("log"), info: consoleLine("info"), warn: consoleLine("warn"),
      error: consoleLine("error"), debug: consoleLine("debug") }));
    setGlobal("state", stateGlobal()); // every piflow run is its workflow's mission: state persists in the run store
  };
  // ======================================================== end of the pi-subagents dialect ===
  // At the body's end (A.2): unobserved launches fail the run; the result must be plain JSON.
  const finishSubagents = (value) => {
    const unobserved = unobservedFailure();
    if (unobserved !== null) throw unobserved;
    const problem = jsonProblem(value, "", new Set(), true);
    if (problem !== null) {
      const what = problem.type === "non-finite" ? "non-finite numbers are" : problem.type + " is";
      throw subagentFailure("workflowScript boundary value is invalid: " + what + " not JSON-representable.");
    }
    return value;
  };

  // ----------------------------------------------------------------------------- the globals ---
  const deepFreeze = (value) => {
    if (value && typeof value === "object" && !isFrozen(value)) {
      freeze(value);
      for (const child of Object.values(value)) deepFreeze(child);
    }
    return value;
  };
  const setGlobal = (name, value) => defineProperty(global, name, { value, writable: true, enumerable: false, configurable: true });
  const fixGlobal = (name, value) => defineProperty(global, name, { value, writable: false, enumerable: false, configurable: false });

  // Code generation from strings: eval/Function are gone and every function constructor reachable
  // through `.constructor` throws, as node:vm's `codeGeneration: {strings: false}` does.
  for (const sample of [function () {}, async function () {}, function* () {}, async function* () {}]) {
    const prototype = getPrototypeOf(sample);
    const closed = function () { throw new NativeEvalError("Code generation from strings disallowed for this context"); };
    closed.prototype = prototype;
    defineProperty(prototype, "constructor", { value: closed, writable: false, enumerable: false, configurable: false });
  }
  for (const name of REMOVED_GLOBALS) setGlobal(name, undefined);
  delete global.DOMException;
  const inert = { get() { return undefined; }, set() {}, enumerable: false, configurable: false };
  delete global.call_python;
  delete global.dukpy;
  defineProperty(global, "call_python", inert);
  defineProperty(global, "dukpy", inert);

  const trap = (message) => () => { throw workError("INVALID_METADATA", message); };
  const mathCopy = fromEntries(getOwnPropertyNames(Math).filter((name) => name !== "random").map((name) => [name, Math[name]]));
  setGlobal("Math", freeze(mathCopy));
  setGlobal("agent", trap("Workflow agent calls must use a direct agent(...) call; aliases and indirect calls are unsupported"));
  setGlobal("conversation", trap("conversation calls must use a direct conversation(...) call; aliases and indirect calls are unsupported"));
  setGlobal("withWorktree", trap("withWorktree calls must use a direct withWorktree(...) call; aliases and indirect calls are unsupported"));
  setGlobal("parallel", parallel);
  setGlobal("pipeline", pipeline);
  setGlobal("checkpoint", checkpoint);
  setGlobal("phase", phase);
  setGlobal("log", log);
  setGlobal("prompt", prompt);

  // ------------------------------------------------------------------------------ lifecycle ---
  let body = null;
  const finishWith = (line) => {
    if (finished) return;
    finished = true;
    emit(line);
  };
  const fail = (error) => finishWith('{"t":"done","ok":false,"error":' + stringify(describe(error)) + "}");
  const succeed = (value) => {
    let text;
    try {
      text = stringify(value === undefined ? null : value);
    } catch (error) {
      fail(error);
      return;
    }
    if (text === undefined) {
      fail(workError("RPC_LIMIT_EXCEEDED", "RPC values must be JSON-compatible"));
      return;
    }
    const line = '{"t":"done","ok":true,"value":' + text + "}";
    if (exceedsLimit(line)) fail(workError("RPC_LIMIT_EXCEEDED", "RPC value exceeds the 10 MB JSON boundary"));
    else finishWith(line);
  };
  const launch = (config) => {
    const script = body;
    body = null;
    if (typeof script !== "function") return;
    const subagents = config.dialect === SUBAGENTS;
    try {
      if (subagents) installSubagents(config);
      setGlobal("args", config.args === undefined ? null : config.args);
      for (const name of config.functions || []) fixGlobal(name, extensionFunction(name));
      for (const [name, value] of objectEntries(config.variables || {})) fixGlobal(name, deepFreeze(value));
    } catch (error) {
      fail(error);
      return;
    }
    const hidden = subagents ? [observe] : [internalAgent, internalConversation, internalWithWorktree, currentContext, resume];
    let completion;
    try {
      completion = within(ROOT, script, hidden);
    } catch (error) {
      completion = apply(promiseReject, NativePromise, [error]);
    }
    // A.1: before reporting, wait for the host calls still in flight when the body settled.
    const settled = after(completion, async (value) => {
      const checked = subagents ? finishSubagents(value) : value;
      await inFlight();
      return checked;
    });
    after(settled, succeed, fail);
  };

  // A step's report: its lines as one text (one string to hand over, not one per line), how many
  // host calls are still unanswered, and whether the script has finished. dukpy serialises the
  // result once the job queue has drained, so `toJSON` reads the outbox complete.
  const report = (box) => setPrototypeOf({
    toJSON: () => setPrototypeOf({
      lines: box.length ? apply(join, box, ["\n"]) + "\n" : "",
      pending: resolvers.size,
      finished,
    }, null),
  }, null);
  fixGlobal("__pi_extensible_workflows_worker", (compiled) => {
    let request;
    try {
      request = hostCall("inbox");
    } catch {
      return setPrototypeOf({ malformed: true }, null); // a request that is not JSON
    }
    if (!request || typeof request !== "object") return undefined;
    if (request.op === "compile") {
      body = compiled;
      return undefined;
    }
    if (request.op === "flush") {
      const box = outbox;
      outbox = newOutbox();
      return report(box);
    }
    const box = newOutbox();
    outbox = box;
    if (request.op === "launch") launch(request);
    else if (request.op === "settle") {
      // Batches as the host sent them: `{"t":"settle","results":[...]}` each.
      const batches = request.batches;
      for (let index = 0; index < batches.length; index += 1) settle(batches[index].results);
    }
    return report(box);
  });
})(globalThis);
