"""Spec A.1, A.2, A.4, A.10, A.13 inside a real worker: globals, results, errors, promise guards, prompt()."""

from __future__ import annotations

import pytest
from test_worker_host import Host, failure, reject, run

from piflow.engine.worker.protocol import LogCall

REMOVED = [
    *("Date", "eval", "Function", "WebAssembly", "process", "require", "module", "exports", "console", "fetch"),
    *("XMLHttpRequest", "WebSocket", "performance", "crypto", "setTimeout", "setInterval", "setImmediate"),
    *("queueMicrotask", "Intl", "SharedArrayBuffer", "Atomics"),
]


async def test_removed_globals_are_undefined() -> None:
    body = "return [" + ", ".join(f"typeof {name}" for name in REMOVED) + ", typeof structuredClone]"
    assert await run(body) == ["undefined"] * (len(REMOVED) + 1)


async def test_dukpy_bridge_is_unreachable() -> None:
    body = (
        "const names = Object.getOwnPropertyNames(globalThis);"
        "return [typeof call_python, typeof dukpy, typeof globalThis.call_python, typeof DOMException,"
        " names.filter((n) => n.startsWith('_dukpy')).length]"
    )
    assert await run(body) == ["undefined", "undefined", "undefined", "undefined", 0]


async def test_script_defined_setter_never_receives_the_bridge() -> None:
    body = """
    const stolen = [];
    try {
      Object.defineProperty(globalThis, "call_python", { set(v) { stolen.push(v); } });
    } catch (e) { stolen.push("refused"); }
    await phase("next evaluation");
    return [stolen, typeof call_python];
    """
    assert await run(body) == [["refused"], "undefined"]


async def test_available_globals() -> None:
    body = (
        "return [typeof agent, typeof conversation, typeof parallel, typeof pipeline, typeof checkpoint,"
        " typeof phase, typeof withWorktree, typeof log, typeof prompt, typeof Promise, typeof JSON,"
        " typeof Object, typeof Map, typeof Reflect, typeof parseInt, globalThis === this]"
    )
    functions = ["function"] * 9
    assert await run(body) == [*functions, "function", "object", "function", "function", "object", "function", True]


@pytest.mark.parametrize(
    "expression",
    [
        "(function(){}).constructor('return 1')",
        "(async function(){}).constructor('return 1')",
        "(function*(){}).constructor('yield 1')",
        "(async function*(){}).constructor('yield 1')",
        "(() => 1).constructor('return 1')",
        "Object.getPrototypeOf(class {}).constructor('return 1')",
        "new (Reflect.getPrototypeOf(function(){}).constructor)('return 1')",
    ],
)
async def test_function_constructors_are_closed(expression: str) -> None:
    body = f"try {{ {expression}; return 'compiled'; }} catch (e) {{ return [e.name, e.message]; }}"
    assert await run(body) == ["EvalError", "Code generation from strings disallowed for this context"]


async def test_eval_is_gone() -> None:
    assert await run("try { eval('1'); return 'ran'; } catch (e) { return e.name; }") == "TypeError"


async def test_dynamic_import_cannot_load_files() -> None:
    assert (
        await run("try { await import('/etc/passwd'); return 'loaded'; } catch (e) { return 'refused'; }") == "refused"
    )


async def test_math_is_a_frozen_copy_without_random() -> None:
    body = "return [typeof Math.random, Object.isFrozen(Math), Math.max(1, 3), Math.PI > 3, 'random' in Math]"
    assert await run(body) == ["undefined", True, 3, True, False]


async def test_args_are_a_fresh_json_copy() -> None:
    body = "args.list.push(4); return [args, Object.isFrozen(args)]"
    assert await run(body, args={"list": [1, 2, 3], "name": "x"}) == [{"list": [1, 2, 3, 4], "name": "x"}, False]


async def test_args_default_to_null() -> None:
    assert await run("return args") is None


async def test_top_level_await_and_return() -> None:
    assert await run("const a = await agent('one'); return a + '!'") == "echo:one!"


async def test_undefined_result_is_null() -> None:
    assert await run("const x = 1;") is None


async def test_result_members_that_are_not_json_vanish() -> None:
    assert await run("return {a: 1, f: () => 2, u: undefined, n: NaN}") == {"a": 1, "n": None}


async def test_function_result_is_not_json() -> None:
    error = await failure("return () => 1")
    assert (error.code, error.message) == ("RPC_LIMIT_EXCEEDED", "RPC values must be JSON-compatible")


async def test_oversized_result_exceeds_the_boundary() -> None:
    error = await failure("return 'x'.repeat(10 * 1024 * 1024)")
    assert (error.code, error.message) == ("RPC_LIMIT_EXCEEDED", "RPC value exceeds the 10 MB JSON boundary")


async def test_result_counts_utf8_bytes() -> None:
    error = await failure("return '\u00e9'.repeat(5 * 1024 * 1024 + 1)")
    assert error.code == "RPC_LIMIT_EXCEEDED"


async def test_thrown_error_is_authored_internal_error() -> None:
    error = await failure("throw new Error('Deploy blocked: tests failed')")
    assert (error.code, error.message, error.authored) == ("INTERNAL_ERROR", "Deploy blocked: tests failed", True)


async def test_thrown_string_is_not_authored() -> None:
    error = await failure("throw 'plain thrown value'")
    assert (error.code, error.message, error.authored) == ("INTERNAL_ERROR", "plain thrown value", False)


async def test_thrown_coded_object_keeps_its_code() -> None:
    error = await failure("throw {code: 'AGENT_FAILED', message: 'gave up', failedAt: 'agent/x'}")
    assert (error.code, error.message, error.failed_at, error.authored) == ("AGENT_FAILED", "gave up", "agent/x", False)


async def test_thrown_unknown_code_becomes_authored_internal_error() -> None:
    error = await failure("throw Object.assign(new Error('disk full'), {code: 'ENOSPC'})")
    assert (error.code, error.message, error.authored) == ("INTERNAL_ERROR", "disk full", True)


async def test_caught_host_error_exposes_code_message_failed_at() -> None:
    host = Host(agent=reject("AGENT_FAILED", "model refused", "agent/callsite%3A0%3A1/occurrence%3A1"))
    body = "try { await agent('x'); } catch (e) { return [e.code, e.message, e.failedAt]; }"
    assert await run(body, host) == ["AGENT_FAILED", "model refused", "agent/callsite%3A0%3A1/occurrence%3A1"]


async def test_unawaited_failing_phase_fails_the_run() -> None:
    error = await failure("phase(5); return 1", Host(phase=reject("INTERNAL_ERROR", "phase name must be a string")))
    assert (error.code, error.message) == ("INTERNAL_ERROR", "phase name must be a string")


async def test_unawaited_failing_agent_does_not_fail_the_run() -> None:
    host = Host(agent=reject("AGENT_FAILED", "nope"))
    assert await run("agent('ignored'); return 'done'", host) == "done"


async def test_result_waits_for_pending_calls() -> None:
    host = Host()
    assert await run("log('late'); return 1", host) == 1
    assert host.of("log") == [LogCall(id=1, message="late")]


async def test_rejection_handled_in_a_later_evaluation_is_fine() -> None:
    host = Host(agent=reject("AGENT_FAILED", "first fails"))
    body = "const a = agent('a'); await phase('between'); try { await a; } catch (e) { return e.message; }"
    assert await run(body, host) == "first fails"


@pytest.mark.parametrize(
    ("expression", "use"),
    [
        ("JSON.stringify({p})", "serialization"),
        ("String(p)", "interpolation"),
        ("'x' + p", "interpolation"),
        ("`${p}`", "interpolation"),
    ],
)
async def test_agent_promise_refuses_coercion(expression: str, use: str) -> None:
    body = f"const p = agent('x'); try {{ {expression}; }} catch (e) {{ await p; return [e.code, e.message]; }}"
    assert await run(body) == ["INVALID_METADATA", f"Workflow agent result is a Promise; await it before {use}"]


async def test_agent_promise_awaits_and_joins() -> None:
    body = "const p = agent('a'); return [p instanceof Promise, await p, await Promise.all([agent('b'), p])]"
    assert await run(body) == [True, "echo:a", ["echo:b", "echo:a"]]


async def test_unawaited_agent_in_result_fails_serialization() -> None:
    error = await failure("return {a: agent('x')}")
    assert (error.code, error.message) == (
        "INVALID_METADATA",
        "Workflow agent result is a Promise; await it before serialization",
    )


async def test_indirect_agent_call_is_a_trap() -> None:
    error = await failure("const a = agent; a('x')")
    assert error.code == "INVALID_METADATA"
    assert (
        error.message
        == "Workflow agent calls must use a direct agent(...) call; aliases and indirect calls are unsupported"
    )


async def test_tagged_template_agent_is_not_a_call() -> None:
    error = await failure("agent`hi`")
    assert error.message.startswith("Workflow agent calls must use a direct agent(...) call")


async def test_reserved_instrumentation_name_is_rejected() -> None:
    error = await failure('__pi_extensible_workflows_agent("x", {}, "0:1")')
    assert (error.code, error.message) == (
        "INVALID_METADATA",
        "__pi_extensible_workflows_agent is reserved for workflow agent instrumentation",
    )


async def test_syntax_error_is_invalid_syntax() -> None:
    error = await failure("const x = ;")
    assert error.code == "INVALID_SYNTAX"
    assert error.message.startswith("Invalid workflow syntax: ")


async def test_engine_early_error_is_invalid_syntax() -> None:
    error = await failure("let a = 1; let a = 2;")
    assert error.code == "INVALID_SYNTAX"


async def test_deadlocked_script_fails_instead_of_hanging() -> None:
    error = await failure("await new Promise(() => {})")
    assert (error.code, error.message) == (
        "INTERNAL_ERROR",
        "Workflow script is waiting for a promise that can never settle",
    )


async def test_prompt_spec_example() -> None:
    assert await run('return prompt("{{a}} {a} {b} {c}", {a: "s", b: [1], c: null})') == "{a} s [\n  1\n] null"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("prompt(1, {})", "prompt() template must be a string"),
        ("prompt('x', [])", "prompt() values must be a plain object"),
        ("prompt('x', new Map())", "prompt() values must be a plain object"),
        ("prompt('x', {[Symbol('s')]: 1})", "prompt() values must use string keys"),
        ("prompt('{a}', {})", 'Missing prompt value "a"'),
        ("prompt('x', {a: 1})", 'Unused prompt value "a"'),
        ("prompt('{a}', {a: NaN})", 'Prompt value "a" must be a finite number'),
        ("prompt('{a}', {a: () => 1})", 'Prompt value "a" cannot be function'),
        ("prompt('{a}', {a: undefined})", 'Prompt value "a" cannot be undefined'),
        ("prompt('{a}', {a: 1n})", 'Prompt value "a" cannot be bigint'),
        ("prompt('{a}', {a: {b: Symbol()}})", 'Prompt value "a.b" cannot be symbol'),
        (
            "prompt('{a}', {a: [1, Promise.resolve()]})",
            'Prompt value "a[1]" is a Promise or thenable; await it before calling prompt()',
        ),
        ("prompt('{a}', {a: {'b c': new Map()}})", 'Prompt value "a["b c"]" must be a plain object'),
        ("prompt('{a}', {a: (() => { const o = {}; o.o = o; return o; })()})", 'Prompt value "a.o" contains a cycle'),
        ("prompt('{a}', {a: {[Symbol('k')]: 1}})", 'Prompt value "a" contains a symbol key'),
        ("prompt('{a}', {a: {get g() { return 1; }}})", 'Prompt value "a.g" cannot use getters or setters'),
        ("prompt('{a}', {a: Object.assign([1], {extra: Infinity})})", 'Prompt value "a.extra" must be a finite number'),
    ],
)
async def test_prompt_errors(call: str, message: str) -> None:
    body = f"try {{ {call}; return 'ok'; }} catch (e) {{ return [e.code, e.message]; }}"
    assert await run(body) == ["INVALID_METADATA", message]


async def test_prompt_renders_strings_raw_and_checks_but_skips_array_extras() -> None:
    body = (
        "const list = Object.assign(['x'], {note: 'skip'});"
        "return prompt('{s}|{list}|{o}', {s: 'a\\nb', list, o: {k: true}})"
    )
    assert await run(body) == 'a\nb|[\n  "x"\n]|{\n  "k": true\n}'


async def test_prompt_accepts_null_prototype_values() -> None:
    assert await run("return prompt('{a}', Object.assign(Object.create(null), {a: 'v'}))") == "v"


# -- escape and exhaustion attempts: each is contained as a clear run failure --------------------------
async def test_deep_recursion_is_a_clear_error() -> None:
    error = await failure("function dive(n) { return dive(n + 1) + 1 } return dive(0)")
    assert error.code == "INTERNAL_ERROR"
    assert "stack" in error.message.lower()


async def test_huge_string_is_contained() -> None:
    error = await failure('let s = "x"; while (true) s = s + s;')
    assert error.code == "INTERNAL_ERROR"
    assert error.message in ("out of memory", "invalid string length") or "length" in error.message


async def test_prototype_tampering_cannot_reach_the_runtime() -> None:
    body = """
    Object.prototype.then = function (resolve) { resolve("hijacked") };
    Array.prototype.push = null;
    let refused = false;
    try {
      Promise.prototype.then = function () { throw new Error("tampered then") };
    } catch (error) {
      refused = error instanceof TypeError;  // strict mode (spec A.1): the runtime's `then` is read-only
    }
    const answer = await agent("still answered");
    delete Object.prototype.then;
    return [answer, refused];
    """
    host = Host()
    assert await run(body, host) == ["echo:still answered", True]
    assert [call.prompt for call in host.of("agent")] == ["still answered"]


@pytest.mark.parametrize(
    "expression",
    [
        "(async function(){}).constructor('return 1')",
        "Object.getPrototypeOf(function*(){}).constructor('yield 1')",
        "Reflect.construct(Object.getPrototypeOf(async () => {}).constructor, ['return 1'])",
    ],
)
async def test_constructor_chains_cannot_compile_code(expression: str) -> None:
    error = await failure(f"return {expression}")
    assert error.code == "INTERNAL_ERROR"
