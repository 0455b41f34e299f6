"""Spec A.3 / A.8 / G.2 identity: call sites, occurrences, structural paths, worktree owners, async context."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from test_worker_host import Host, failure, reject, run

from piflow.engine.worker.instrument import instrument
from piflow.engine.worker.protocol import AgentCall, Placement
from piflow.errors import WorkflowError


def body_of(source: str) -> str:
    """The instrumented body without the wrapping strict-mode arrow function."""
    wrapped = instrument(source)
    return wrapped[wrapped.index('=> {"use strict";') + 17 : -2]


def path(*names: str) -> str:
    """`P(...)`: encodeURIComponent of each name, joined by `/`."""
    return "/".join(quote(name, safe="-_.!~*'()") for name in names)


def site(source: str, call: str, nth: int = 0) -> str:
    """The call site of the `nth` occurrence of `call` in `source`: UTF-16 `start:end` (spec A.3)."""
    index = -1
    for _ in range(nth + 1):
        index = source.index(call, index + 1)

    def units(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    start = units(source[:index])
    return f"{start}:{start + units(call)}"


def identities(host: Host, op: str = "agent") -> dict[str, AgentCall]:
    """Each call of `op` by its prompt."""
    return {call.prompt: call for call in host.of(op)}


def paths(host: Host) -> dict[str, list[str]]:
    return {prompt: list(call.placement.path) for prompt, call in identities(host).items()}


# -- instrumentation -------------------------------------------------------------------------------


def test_direct_calls_get_the_internal_name_and_call_site() -> None:
    assert body_of('agent("x", {a: 1})') == '__pi_extensible_workflows_agent("x", {a: 1}, "0:18")'


def test_call_without_arguments_gets_no_comma() -> None:
    assert body_of("agent()") == '__pi_extensible_workflows_agent("0:7")'


def test_trailing_comma_gets_no_extra_comma() -> None:
    assert body_of('agent("x",)') == '__pi_extensible_workflows_agent("x","0:11")'


def test_conversation_and_with_worktree_are_instrumented_too() -> None:
    assert body_of('withWorktree(() => conversation("n"))') == (
        '__pi_extensible_workflows_withWorktree(() => __pi_extensible_workflows_conversation("n", "19:36"), "0:37")'
    )


def test_parenthesised_callee_is_a_direct_call() -> None:
    assert body_of('(agent)("x")') == '(__pi_extensible_workflows_agent)("x", "0:12")'


def test_awaited_parenthesised_callee_is_a_direct_call_that_resumes_its_context() -> None:
    """tree-sitter reads `await (agent)(...)` as a call of `await`; acorn and the runtime see
    `await ((agent)(...))`, whose call begins at `(agent)`."""
    assert body_of('await (agent)("x")') == (
        "__pi_extensible_workflows_resume(__pi_extensible_workflows_context(), "
        'await (__pi_extensible_workflows_agent)("x", "6:18"))'
    )


def test_escaped_callee_names_the_primitive() -> None:
    assert body_of('\\u0061gent("x")') == '__pi_extensible_workflows_agent("x", "0:15")'


@pytest.mark.parametrize(
    "source", ['obj.agent("x")', "agent`x`", 'new agent("x")', 'const a = agent; a("x")', '(0, agent)("x")']
)
def test_other_uses_are_left_alone(source: str) -> None:
    assert body_of(source) == source


def test_call_sites_are_utf16_offsets() -> None:
    source = 'const s = "é😀"; agent(`${agent("ü")}`)'
    assert body_of(source) == (
        'const s = "é😀"; __pi_extensible_workflows_agent(`${__pi_extensible_workflows_agent("ü", "26:36")}`, "17:39")'
    )


def test_awaits_restore_the_context_they_suspended_in() -> None:
    assert body_of("await x") == "__pi_extensible_workflows_resume(__pi_extensible_workflows_context(), await x)"


def test_try_statements_restore_the_context_in_catch_and_finally() -> None:
    assert body_of("try { a } catch (e) { b } finally { c }") == (
        "{const __pi_extensible_workflows_try = __pi_extensible_workflows_context(); try { a } catch (e) "
        "{__pi_extensible_workflows_resume(__pi_extensible_workflows_try);  b } finally "
        "{__pi_extensible_workflows_resume(__pi_extensible_workflows_try);  c }}"
    )


def test_labelled_for_await_is_wrapped_whole() -> None:
    assert body_of("l: for await (const x of y) continue l;") == (
        "{const __pi_extensible_workflows_loop = __pi_extensible_workflows_context(); l: for await (const x of y) "
        "{__pi_extensible_workflows_resume(__pi_extensible_workflows_loop); continue l;} "
        "__pi_extensible_workflows_resume(__pi_extensible_workflows_loop); }"
    )


def test_awaited_iterable_is_not_a_for_await() -> None:
    assert body_of("for (const x of await y) {}") == (
        "for (const x of __pi_extensible_workflows_resume(__pi_extensible_workflows_context(), await y)) {}"
    )


@pytest.mark.parametrize(
    ("source", "noun"),
    [
        ("x.__pi_extensible_workflows_conversation", "conversation"),
        ("const o = {__pi_extensible_workflows_withWorktree: 1}", "withWorktree"),
        ("__pi_extensible_workflows_withWorktree; __pi_extensible_workflows_agent", "agent"),
    ],
)
def test_reserved_identifiers_are_rejected_in_spec_order(source: str, noun: str) -> None:
    with pytest.raises(WorkflowError) as caught:
        instrument(source)
    name = f"__pi_extensible_workflows_{noun}"
    assert (caught.value.code, caught.value.message) == (
        "INVALID_METADATA",
        f"{name} is reserved for workflow {noun} instrumentation",
    )


def test_unparseable_body_is_invalid_syntax() -> None:
    with pytest.raises(WorkflowError) as caught:
        instrument("const x = ;")
    assert caught.value.code == "INVALID_SYNTAX"


# -- identities in a running worker -------------------------------------------------------------------


async def test_agent_identity() -> None:
    host = Host()
    body = 'const s = "é😀"; await agent(s, {label: "l", fn: () => 1})'
    await run(body, host)
    [call] = host.calls
    assert call == AgentCall(
        id=1,
        prompt="é😀",
        options={"label": "l"},
        call_site=site(body, 'agent(s, {label: "l", fn: () => 1})'),
        placement=Placement(path=(), occurrence=1, worktree_owner=None),
    )


async def test_awaited_parenthesised_agent_runs_with_its_call_site() -> None:
    host = Host()
    body = 'const r = await (agent)("x"); await agent("y")'
    await run(body, host)
    sites = [call.call_site for call in host.of("agent")]
    assert sites == [site(body, '(agent)("x")'), site(body, 'agent("y")')]


async def test_agent_prompt_and_options_pass_through_for_the_host_to_validate() -> None:
    host = Host()
    await run("await agent(); await agent(5, [1]); await agent('x', undefined)", host)
    assert [(call.prompt, call.options) for call in host.of("agent")] == [(None, {}), (5, [1]), ("x", {})]


async def test_occurrences_count_per_call_site_in_call_order() -> None:
    host = Host()
    body = "for (const p of ['a', 'b', 'c']) await agent(p); await agent('d')"
    await run(body, host)
    loop, last = site(body, "agent(p)"), site(body, "agent('d')")
    assert [(i.call_site, i.placement.occurrence) for i in identities(host).values()] == [
        (loop, 1),
        (loop, 2),
        (loop, 3),
        (last, 1),
    ]


async def test_occurrences_count_per_structural_path() -> None:
    host = Host()
    await run("const ask = (p) => agent(p); await parallel('batch', {a: () => ask('a'), b: () => ask('b')})", host)
    assert {p: (list(i.placement.path), i.placement.occurrence) for p, i in identities(host).items()} == {
        "a": (["batch", "a"], 1),
        "b": (["batch", "b"], 1),
    }


async def test_parallel_and_pipeline_extend_the_path() -> None:
    host = Host()
    body = """
    await parallel("batch", {one: () => agent("one")});
    await pipeline("pipe", {item: 1}, {first: (v) => agent("first"), second: (v) => agent("second")});
    await agent("root");
    """
    await run(body, host)
    assert paths(host) == {
        "one": ["batch", "one"],
        "first": ["pipe", "item", "first"],
        "second": ["pipe", "item", "second"],
        "root": [],
    }


async def test_nested_parallel_in_pipeline() -> None:
    host = Host()
    body = """
    await pipeline("pipe", {item: 1}, {stage: async () => {
      await phase("inside");
      return parallel("inner", {t: async () => { await null; return agent("deep"); }});
    }});
    """
    await run(body, host)
    assert paths(host) == {"deep": ["pipe", "item", "stage", "inner", "t"]}


async def test_helpers_called_after_awaits_inside_tasks_keep_the_task_path() -> None:
    host = Host()
    body = """
    async function helper(p) { await phase("helper"); return agent(p); }
    await parallel("batch", {
      a: async () => { await phase("a1"); await phase("a2"); return helper("a"); },
      b: async () => { await agent("b-first"); return helper("b"); },
    });
    """
    await run(body, host)
    assert paths(host) == {"b-first": ["batch", "b"], "a": ["batch", "a"], "b": ["batch", "b"]}


async def test_interleaved_tasks_never_see_each_others_context() -> None:
    host = Host()
    body = """
    const task = (name) => async () => {
      for (let i = 0; i < 3; i++) { await phase(name + i); await agent(name + i); }
    };
    await parallel("batch", {a: task("a"), b: task("b"), c: task("c")});
    """
    await run(body, host)
    assert paths(host) == {f"{t}{i}": ["batch", t] for t in "abc" for i in range(3)}


async def test_promise_all_over_async_arrows() -> None:
    host = Host()
    body = """
    const each = async (n) => { await phase("p" + n); return agent("n" + n); };
    await parallel("batch", {a: () => Promise.all([1, 2].map(each))});
    """
    await run(body, host)
    assert paths(host) == {"n1": ["batch", "a"], "n2": ["batch", "a"]}


async def test_then_chains_run_in_the_registering_context() -> None:
    host = Host()
    body = """
    const helper = () => agent("helper");
    await parallel("batch", {
      a: () => agent("a").then(() => agent("then")).then(helper).catch(() => 0).finally(() => agent("finally")),
    });
    """
    await run(body, host)
    assert paths(host) == {p: ["batch", "a"] for p in ("a", "then", "helper", "finally")}


async def test_catch_after_rejected_await_restores_the_context() -> None:
    host = Host(phase=reject("AGENT_FAILED", "phase failed"))
    body = """
    await parallel("batch", {a: async () => {
      try { await phase("boom"); } catch (e) { return agent("caught"); } finally { await agent("finally"); }
    }});
    """
    await run(body, host)
    assert paths(host) == {"caught": ["batch", "a"], "finally": ["batch", "a"]}


async def test_for_await_restores_the_context() -> None:
    host = Host()
    body = """
    async function* numbers() { for (const n of [1, 2]) { await phase("gen" + n); yield n; } }
    await parallel("batch", {a: async () => {
      for await (const n of numbers()) await agent("loop" + n);
      return agent("after");
    }});
    """
    await run(body, host)
    assert paths(host) == {"loop1": ["batch", "a"], "loop2": ["batch", "a"], "after": ["batch", "a"]}


async def test_context_is_back_to_the_root_after_parallel() -> None:
    host = Host()
    await run("await parallel('batch', {a: async () => { await null; }}); await agent('root')", host)
    assert paths(host) == {"root": []}


async def test_named_worktree_owner() -> None:
    host = Host()
    value = await run(
        "return await withWorktree('  shared ', async () => { await phase('x'); return agent('in'); })", host
    )
    assert value == "echo:in"
    assert identities(host)["in"].placement.worktree_owner == "worktree/named/shared"


async def test_unnamed_worktree_owner_is_deterministic() -> None:
    host = Host()
    body = "for (const n of [1, 2]) await withWorktree(() => agent('w' + n)); await agent('outside')"
    await run(body, host)
    owners = {p: i.placement.worktree_owner for p, i in identities(host).items()}
    call_site = "callsite:" + site(body, "withWorktree(() => agent('w' + n))")
    assert owners == {
        "w1": path("worktree", "unnamed", call_site, "occurrence:1"),
        "w2": path("worktree", "unnamed", call_site, "occurrence:2"),
        "outside": None,
    }


async def test_with_worktree_inside_parallel() -> None:
    host = Host()
    body = """
    await parallel("batch", {
      a: () => withWorktree(async () => { await phase("a"); return agent("a"); }),
      b: () => withWorktree("named", async () => { await phase("b"); return agent("b"); }),
      c: async () => { await phase("c"); return agent("c"); },
    });
    """
    await run(body, host)
    owners = {p: (list(i.placement.path), i.placement.worktree_owner) for p, i in identities(host).items()}
    assert owners == {
        "a": (
            ["batch", "a"],
            path(
                "worktree",
                "unnamed",
                "batch",
                "a",
                "callsite:" + site(body, 'withWorktree(async () => { await phase("a"); return agent("a"); })'),
                "occurrence:1",
            ),
        ),
        "b": (["batch", "b"], "worktree/named/named"),
        "c": (["batch", "c"], None),
    }


async def test_nested_worktree_overrides_and_returns_the_value_unchanged() -> None:
    host = Host()
    body = (
        "return await withWorktree('outer', async () => "
        "[await withWorktree('inner', () => agent('x')), await agent('y')])"
    )
    assert await run(body, host) == ["echo:x", "echo:y"]
    assert {p: i.placement.worktree_owner for p, i in identities(host).items()} == {
        "x": "worktree/named/inner",
        "y": "worktree/named/outer",
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("withWorktree()", "withWorktree requires a callback or a name and callback"),
        ("withWorktree('a', () => 1, 2)", "withWorktree requires a callback or a name and callback"),
        ("withWorktree('a', 'cb')", "withWorktree callback must be a function"),
        ("withWorktree(5, () => 1)", "withWorktree name must be a non-empty string"),
        ("withWorktree('  ', () => 1)", "withWorktree name must be a non-empty string"),
    ],
)
async def test_with_worktree_validation(call: str, message: str) -> None:
    error = await failure(f"await {call}")
    assert (error.code, error.message) == ("INVALID_METADATA", message)


async def test_indirect_with_worktree_is_a_trap() -> None:
    error = await failure("const w = withWorktree; await w(() => 1)")
    assert (
        error.message
        == "withWorktree calls must use a direct withWorktree(...) call; aliases and indirect calls are unsupported"
    )


async def test_failed_at_of_an_agent_in_a_parallel_task_matches_the_spec_example() -> None:
    def fail_second(call: AgentCall) -> Any:
        if call.prompt != "second":
            return "ok"
        placement = call.placement
        journal = path("agent", *placement.path, f"callsite:{call.call_site}", f"occurrence:{placement.occurrence}")
        raise WorkflowError("AGENT_FAILED", "agent failed", failed_at=journal)

    error = await failure(
        'await parallel("batch", {a: () => agent("xxx"), b: () => agent("second")})', Host(agent=fail_second)
    )
    assert error.failed_at == "batch/b/agent%2Fbatch%2Fb%2Fcallsite%253A57%253A72%2Foccurrence%253A1"
