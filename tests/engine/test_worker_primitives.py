"""Spec A.5–A.12 inside a real worker: parallel, pipeline, conversation, checkpoint, phase/log, extensions."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from test_worker_host import Host, failure, reject, run

from piflow.engine.worker.protocol import AgentCall, FunctionCall, LogCall, PhaseCall, Placement, TurnCall
from piflow.errors import WorkflowError


def path(*names: str) -> str:
    return "/".join(quote(name, safe="-_.!~*'()") for name in names)


def agent_path(call: AgentCall) -> str:
    """The agent's journal path (G.2), as the host computes it for failedAt."""
    placement = call.placement
    return path("agent", *placement.path, f"callsite:{call.call_site}", f"occurrence:{placement.occurrence}")


def failing_agent(prompt: str, code: str = "AGENT_FAILED") -> Any:
    def answer(call: AgentCall) -> Any:
        if call.prompt == prompt:
            raise WorkflowError(code, f"{prompt} failed", failed_at=agent_path(call))
        return f"echo:{call.prompt}"

    return answer


# -- parallel (A.6) ----------------------------------------------------------------------------------


async def test_parallel_returns_values_keyed_in_record_order() -> None:
    body = "return await parallel('batch', {b: () => agent('b'), a: async () => 2, c: () => 3})"
    assert await run(body) == {"b": "echo:b", "a": 2, "c": 3}


async def test_parallel_of_an_empty_record() -> None:
    assert await run("return await parallel('batch', {})") == {}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("parallel('', {})", "parallel requires a stable explicit name"),
        ("parallel(5, {})", "parallel requires a stable explicit name"),
        ("parallel('b', null)", "parallel tasks must be a record"),
        ("parallel('b', [() => 1])", "parallel tasks must be a record"),
        ("parallel('b', {' ': () => 1})", "parallel task requires a stable explicit name"),
        ("parallel('b', {a: 1})", "parallel task values must be run functions"),
    ],
)
async def test_parallel_validation(call: str, message: str) -> None:
    error = await failure(f"await {call}")
    assert (error.code, error.message) == ("INVALID_METADATA", message)


async def test_parallel_validates_every_task_before_starting_any() -> None:
    host = Host()
    await failure("await parallel('b', {a: () => agent('a'), b: 2})", host)
    assert host.calls == []


async def test_parallel_rethrows_the_first_failure_in_record_order() -> None:
    body = """
    await parallel("batch", {
      ok: () => 1,
      late: async () => { await phase("one"); await phase("two"); throw new Error("late failure"); },
      early: () => { throw new Error("early failure"); },
    });
    """
    error = await failure(body)
    assert (error.code, error.message, error.failed_at, error.authored) == (
        "INTERNAL_ERROR",
        "late failure",
        "batch/late",
        True,
    )


async def test_parallel_failure_without_a_code_is_internal_error() -> None:
    error = await failure("await parallel('batch', {a: () => { throw {message: 'no code'}; }})")
    assert (error.code, error.message, error.failed_at) == ("INTERNAL_ERROR", "no code", "batch/a")


async def test_parallel_waits_for_every_task_before_failing() -> None:
    host = Host()
    body = (
        "await parallel('batch', {a: () => { throw new Error('x'); }, "
        "b: async () => { await phase('p'); await agent('b'); }})"
    )
    await failure(body, host)
    assert [call.op for call in host.calls] == ["phase", "agent"]


async def test_parallel_failed_at_wraps_the_inner_path() -> None:
    body = 'await parallel("batch", {a: () => 1, b: () => agent("second")})'
    error = await failure(body, Host(agent=failing_agent("second")))
    start = body.index('agent("second")')
    inner = path("agent", "batch", "b", f"callsite:{start}:{start + 15}", "occurrence:1")
    assert error.failed_at == path("batch", "b", inner)
    assert (error.code, error.message) == ("AGENT_FAILED", "second failed")


async def test_cancelled_propagates_at_once() -> None:
    body = """
    let steps = 0;
    try {
      await parallel("batch", {
        slow: async () => { for (let i = 0; i < 5; i++) { await phase("p" + i); steps++; } },
        cancelled: () => agent("cancelled"),
      });
    } catch (e) { return [e.code, e.message, e.failedAt ?? null, steps < 5]; }
    """
    result = await run(body, Host(agent=reject("CANCELLED", "Workflow cancelled")))
    assert result == ["CANCELLED", "Workflow cancelled", None, True]


# -- pipeline (A.7) ----------------------------------------------------------------------------------


async def test_pipeline_runs_stages_in_order_per_item() -> None:
    host = Host()
    body = """
    return await pipeline("pipe", {x: 1, y: 10}, {
      double: (v) => v * 2,
      ask: (v) => agent("item " + v),
    });
    """
    assert await run(body, host) == {"x": "echo:item 2", "y": "echo:item 20"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("pipeline(' ', {}, {s: () => 1})", "pipeline requires a stable explicit name"),
        ("pipeline('p', 1, {s: () => 1})", "pipeline items must be a record"),
        ("pipeline('p', {}, [])", "pipeline stages must be a record"),
        ("pipeline('p', {}, {})", "pipeline requires at least one stage"),
        ("pipeline('p', {'': 1}, {s: () => 1})", "pipeline item requires a stable explicit name"),
        ("pipeline('p', {i: 1}, {'': () => 1})", "pipeline stage requires a stable explicit name"),
        ("pipeline('p', {i: 1}, {s: 1})", "pipeline stage values must be run functions"),
    ],
)
async def test_pipeline_validation(call: str, message: str) -> None:
    error = await failure(f"await {call}")
    assert (error.code, error.message) == ("INVALID_METADATA", message)


async def test_pipeline_failed_at_is_the_stage_path() -> None:
    error = await failure("await pipeline('pipe', {i: 1}, {first: (v) => v, second: () => { throw new Error('no'); }})")
    assert (error.message, error.failed_at) == ("no", "pipe/i/second")


async def test_pipeline_failed_at_double_encodes_the_inner_path() -> None:
    body = "await pipeline('pipe', {i: 1}, {s: () => agent('inner')})"
    error = await failure(body, Host(agent=failing_agent("inner")))
    inner = path("agent", "pipe", "i", "s", f"callsite:{body.index('agent(')}:{body.index(')})') + 1}", "occurrence:1")
    assert error.failed_at == quote("pipe/i/s", safe="") + "/" + quote(inner, safe="-_.!~*'()")


async def test_pipeline_stops_an_item_at_its_failing_stage() -> None:
    host = Host()
    await failure("await pipeline('p', {i: 1}, {a: () => { throw new Error('x'); }, b: () => agent('never')})", host)
    assert host.calls == []


# -- conversation (A.5) -------------------------------------------------------------------------------


async def test_conversation_turns() -> None:
    host = Host()
    body = """
    const dev = conversation(" dev ", {model: "m", timeoutMs: 5, retries: 1, skip: undefined});
    return [Object.isFrozen(dev), await dev.run("one"), await dev.run("two", {timeoutMs: 9})];
    """
    assert await run(body, host) == [True, "turn1:one", "turn2:two"]
    first, second = host.of("turn")
    call_site = f"{body.index('conversation(')}:{body.index('});') + 2}"
    placement = Placement(path=(), occurrence=1, worktree_owner=None)
    assert first == TurnCall(
        id=1,
        prompt="one",
        options={"model": "m", "timeoutMs": 5, "retries": 1},
        conversation="dev",
        call_site=call_site,
        placement=placement,
        turn=1,
    )
    assert (second.options, second.conversation, second.call_site, second.placement, second.turn) == (
        {"model": "m", "retries": 1, "timeoutMs": 9},
        "dev",
        call_site,
        placement,
        2,
    )


async def test_failed_turn_does_not_advance() -> None:
    failures = iter([True, False, False])

    def turn(call: TurnCall) -> Any:
        if next(failures):
            raise WorkflowError("AGENT_FAILED", "turn failed")
        return call.turn

    body = "const c = conversation('c'); try { await c.run('a'); } catch {} return [await c.run('b'), await c.run('c')]"
    assert await run(body, Host(turn=turn)) == [1, 2]


async def test_overlapping_turns_throw_synchronously() -> None:
    body = (
        "const c = conversation('c'); const first = c.run('a');"
        "try { c.run('b'); } catch (e) { await first; return [e.code, e.message]; }"
    )
    assert await run(body) == ["RESUME_INCOMPATIBLE", "Conversation turns cannot overlap"]


async def test_conversation_occurrences_count_per_raw_name() -> None:
    host = Host()
    body = "for (const n of ['a', 'b', 'a', 'a ']) await conversation(n).run(n)"
    await run(body, host)
    assert [(c.conversation, c.placement.occurrence) for c in host.of("turn")] == [
        ("a", 1),
        ("b", 1),
        ("a", 2),
        ("a", 1),
    ]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("conversation('  ')", "conversation requires a non-empty name"),
        ("conversation('c', [])", "conversation options must be a JSON object"),
        ("conversation('c').run(5)", "conversation.run prompt must be a string"),
        ("conversation('c').run('x', {model: 'm'})", "conversation.run options only support timeoutMs and retries"),
        ("conversation('c').run('x', [])", "conversation.run options only support timeoutMs and retries"),
    ],
)
async def test_conversation_validation(code: str, message: str) -> None:
    assert await run(f"try {{ {code}; }} catch (e) {{ return [e.code, e.message]; }}") == ["INVALID_METADATA", message]


async def test_conversation_result_refuses_interpolation() -> None:
    body = "const p = conversation('c').run('x'); try { `${p}`; } catch (e) { await p; return e.message; }"
    assert await run(body) == "Workflow conversation result is a Promise; await it before interpolation"


async def test_indirect_conversation_is_a_trap() -> None:
    error = await failure("const c = conversation; c('x')")
    assert (
        error.message
        == "conversation calls must use a direct conversation(...) call; aliases and indirect calls are unsupported"
    )


# -- checkpoint, phase, log (A.9, A.11) -------------------------------------------------------------------


async def test_checkpoint_labels_count_per_raw_name() -> None:
    host = Host()
    body = """
    const ask = (name) => checkpoint({name, prompt: "ok?", context: {n: 1}});
    return [await ask("ship"), await ask("ship"), await ask(" ship"), await ask("ship")];
    """
    assert await run(body, host) == ["approved"] * 4
    assert [call.label for call in host.of("checkpoint")] == ["ship", "ship#2", " ship", "ship#3"]
    assert host.of("checkpoint")[0].value == {"name": "ship", "prompt": "ok?", "context": {"n": 1}}


async def test_checkpoints_the_host_rejects_get_no_label() -> None:
    host = Host()
    body = """
    const results = [];
    for (const input of [
      {name: "ship", prompt: "p"},
      {name: "ship", prompt: "p", context: null, extra: 1},
      {name: "ship", prompt: "x".repeat(1025), context: null},
      {name: "ship", prompt: "p", context: {big: "x".repeat(4096)}},
      {name: "ship", prompt: "p", context: null},
    ]) results.push(await checkpoint(input));
    await checkpoint();
    return results.length;
    """
    assert await run(body, host) == 5
    assert [call.label for call in host.of("checkpoint")] == [None, None, None, None, "ship", None]
    assert host.of("checkpoint")[-1].value is None


async def test_checkpoint_resolves_to_the_host_answer() -> None:
    assert (
        await run(
            "return checkpoint({name: 'n', prompt: 'p', context: null})", Host(checkpoint=lambda call: "rejected")
        )
        == "rejected"
    )


async def test_phase_and_log_send_what_the_script_passed() -> None:
    host = Host()
    assert await run("return [await phase('plan'), await log({not: 'a string'})]", host) == [None, None]
    assert host.calls == [PhaseCall(id=1, name="plan"), LogCall(id=2, message={"not": "a string"})]


async def test_call_ids_follow_script_call_order() -> None:
    host = Host()
    await run("phase('a'); log('b'); agent('c'); await Promise.all([phase('d'), agent('e')])", host)
    assert [call.id for call in host.calls] == [1, 2, 3, 4, 5]


# -- extension functions and variables (A.12) -------------------------------------------------------------


async def test_extension_function_call() -> None:
    host = Host()
    assert await run("return await lookup({q: 1, f: () => 2})", host, functions=["lookup"]) == {
        "function": "lookup",
        "input": {"q": 1},
    }
    [call] = host.calls
    assert call == FunctionCall(id=1, name="lookup", input={"q": 1}, placement=Placement(path=(), occurrence=1))


@pytest.mark.parametrize("arguments", ["", "1", "null", "[]", "{}, {}"])
async def test_extension_function_requires_one_object(arguments: str) -> None:
    body = f"try {{ lookup({arguments}); }} catch (e) {{ return [e.code, e.message]; }}"
    assert await run(body, functions=["lookup"]) == [
        "RESULT_INVALID",
        "lookup requires exactly one JSON object argument",
    ]


async def test_extension_function_result_refuses_serialization() -> None:
    body = "const p = lookup({}); try { JSON.stringify(p); } catch (e) { await p; return e.message; }"
    assert (
        await run(body, functions=["lookup"]) == "Workflow function result is a Promise; await it before serialization"
    )


async def test_extension_function_occurrences_count_per_path_and_name() -> None:
    host = Host()
    body = (
        "await lookup({}); await parallel('batch', {a: async () => { await lookup({}); await lookup({}); }});"
        "await lookup({})"
    )
    await run(body, host, functions=["lookup"])
    assert [(c.placement.path, c.placement.occurrence) for c in host.calls] == [
        ((), 1),
        (("batch", "a"), 1),
        (("batch", "a"), 2),
        ((), 2),
    ]


async def test_extension_globals_are_read_only() -> None:
    body = """
    let assigned = "no";
    try { lookup = 1; assigned = "yes"; } catch (e) { assigned = e.name; }
    let deleted = "no";
    try { deleted = delete globalThis.lookup; } catch (e) { deleted = e.name; }
    let pushed = "no";
    try { settings.list.push(4); pushed = "yes"; } catch (e) { pushed = e.name; }
    return [typeof lookup, assigned, deleted, pushed, Object.isFrozen(settings.nested), settings];
    """
    variables = {"settings": {"list": [1], "nested": {"k": "v"}}}
    # Strict mode (spec A.1): writing or deleting a read-only global throws instead of doing nothing.
    assert await run(body, functions=["lookup"], variables=variables) == [
        "function",
        "TypeError",
        "TypeError",
        "TypeError",
        True,
        variables["settings"],
    ]
