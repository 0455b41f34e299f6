"""Extension functions, variables and named workflows registered from Python (spec L).

The run-behaviour tests (`ext_runs`) hold on both executors: the conformance extension below is
installed as users install one (a module and its `piflow.extensions` entry point) on the path of
the launching process and of a `piflow worker` of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_support import EmbeddedRuns, Runs, awaiting, executor, finished, serve_workers, wait_for

from piflow.engine.agent_details import AgentDetailView
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.extensions import ExtensionRegistry, load_extensions
from piflow.engine.functions import FunctionContext
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

CONFORMANCE_EXTENSION = '''
from piflow.errors import WorkflowError


async def summarize(value, context):
    answer = await context.agent(f"Summarize {value['text']}", {"label": "summarizer"})
    return {"summary": answer, "run": context.run["workflow"]}


def late(setup, context):
    if "hooked" in setup["prompt"]:
        setup["prompt"] += f" [late:{context['attempt']}]"


async def early(setup, context):
    if "hooked" in setup["prompt"]:
        if not context["run"]["runId"] or context["signal"].aborted:
            raise RuntimeError("early got no run or an aborted signal")
        setup["prompt"] += " [early]"
        setup["sessionInput"]["tools"] = ["read", "grep"]


def broken(setup, context):
    if setup["prompt"].startswith("broken"):
        raise RuntimeError("no credentials")


async def review(value, ctx):
    reviews = await ctx.parallel("reviews", {
        "style": lambda: ctx.agent(ctx.prompt("Check the style of {file} {{ok}}", {"file": value["file"]})),
        "tests": lambda: ctx.agent("Check the tests", {"label": "tester"}),
    })
    piped = await ctx.pipeline("fix", {"one": "a"}, {
        "draft": lambda v: ctx.agent(f"draft {v}"),
        "polish": lambda v: v.upper(),
    })
    await ctx.phase("reviewing")
    await ctx.log("reviewed")
    nested = await ctx.invoke("shout", {"text": "hi"})
    return {"reviews": reviews, "piped": piped, "nested": nested}


async def shout(value, ctx):
    return {"text": await ctx.agent(value["text"])}


async def misuse(value, ctx):
    problems = {}
    attempts = {
        "parallel": lambda: ctx.parallel(" ", {}),
        "tasks": lambda: ctx.parallel("p", {"a": 1}),
        "stages": lambda: ctx.pipeline("p", {"a": 1}, {}),
        "worktree": lambda: ctx.with_worktree("", lambda: None),
        "invoke": lambda: ctx.invoke("nope", {}),
        "input": lambda: ctx.invoke("misuse", {"x": 1}),
        "agent": lambda: ctx.agent(5),
        "options": lambda: ctx.agent("x", {"thinking": "lots"}),
    }
    for key, attempt in attempts.items():
        try:
            await attempt()
        except WorkflowError as exc:
            problems[key] = [exc.code, exc.message]
    try:
        ctx.prompt("{a}", {"a": 1, "b": 2})
    except WorkflowError as exc:
        problems["prompt"] = [exc.code, exc.message]

    async def second_fails():
        raise WorkflowError("AGENT_FAILED", "second broke")

    async def third_fails():
        raise RuntimeError("third broke")

    try:
        await ctx.parallel("p", {"first": lambda: 1, "second": second_fails, "third": third_fails})
    except WorkflowError as exc:
        problems["first failure"] = [exc.code, exc.message, exc.failed_at]
    return problems


async def gate(value, ctx):
    first = await ctx.checkpoint({"name": "ship", "prompt": "Ship it?", "context": {"files": 2}})
    second = await ctx.checkpoint({"name": "ship", "prompt": "Really?", "context": None})
    return {"answers": [first, second]}


async def watch(value, ctx):
    """Waits for its run to stop; its own work (a thread here) stops when the abort signal fires."""
    import pathlib
    import threading
    import time

    signal, marker = ctx.run["signal"], pathlib.Path(value["marker"])

    def report():
        while not signal.aborted:
            time.sleep(0.02)
        marker.write_text(signal.reason.code)

    marker.write_text("waiting")
    threading.Thread(target=report, daemon=True).start()
    await signal.wait()
    return {}


def function(run, description="A function", input=None):
    return {"description": description, "input": input or {"type": "object"}, "output": {"type": "object"},
            "run": run}


EXTENSION = {
    "version": "1.0.0",
    "headline": "Text tools",
    "description": "Helpers for text",
    "functions": {
        "summarize": {
            "description": "Summarize a text with an agent",
            "input": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "output": {"type": "object", "required": ["summary"]},
            "run": summarize,
        },
        "review": function(review),
        "shout": function(shout),
        "misuse": function(misuse, input={"type": "object", "additionalProperties": False}),
        "gate": function(gate),
        "watch": function(watch),
    },
    "variables": {
        "team": {"description": "The team", "schema": {"type": "array"}, "resolve": lambda run: ["ada", "lin"]},
    },
    "workflows": {"hello": {"description": "Say hello", "script": "return `hello ${args}`"}},
    "agentSetupHooks": {"late": {"setup": late}, "early": {"priority": 1, "setup": early},
                        "broken": {"setup": broken}},
}
'''
_DEFINED: dict[str, Any] = {}
exec(CONFORMANCE_EXTENSION, _DEFINED)  # the very source the conformance tests install
EXTENSION: dict[str, Any] = _DEFINED["EXTENSION"]


def registry() -> ExtensionRegistry:
    reg = ExtensionRegistry()
    reg.register(EXTENSION, "text-tools")
    return reg


@pytest.fixture(scope="session")
def conformance_extension(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The directory the conformance extension is installed in."""
    return _install_extension(tmp_path_factory.mktemp("conformance") / "site", "conformance_ext",
                              CONFORMANCE_EXTENSION)


@pytest.fixture(scope="session")
def extension_settings(temporal_server: Any, conformance_extension: str,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A `piflow worker` with the conformance extension installed, on a task queue of its own."""
    yield from serve_workers(temporal_server, tmp_path_factory.mktemp("extension-workers"), 1,
                             (conformance_extension,))


@pytest.fixture(params=["embedded", "temporal"])
async def ext_runs(request: pytest.FixtureRequest, project: Path, monkeypatch: pytest.MonkeyPatch,
                   conformance_extension: str) -> AsyncIterator[Runs]:
    """`Runs` where the conformance extension is installed: in this process (the embedded engine's
    owner, and the client that launches a Temporal run) and on the executor's workers."""
    monkeypatch.syspath_prepend(conformance_extension)
    async with executor(request, project, "extension_settings") as chosen:
        yield chosen


async def test_functions_variables_and_replay(ext_runs: Runs) -> None:
    outcome = await ext_runs.run('const s = await summarize({text: "the diff"}); return {s, team}', name="ext")
    assert outcome.state == "completed", outcome.error
    assert outcome.result == {"s": {"summary": "[scripted] Summarize the diff", "run": "ext"}, "team": ["ada", "lin"]}
    assert [(a.label, a.state, a.attempts) for a in outcome.agents] == [("summarizer", "completed", 1)], \
        "the function's agent ran once, however often the function was replayed"


async def test_bad_input_and_unknown_function(ext_runs: Runs) -> None:
    outcome = await ext_runs.run('try { await summarize({text: 5}) } catch (e) { return [e.code, e.message] }')
    assert outcome.result == ["RESULT_INVALID", "Invalid input for summarize"]
    outcome = await ext_runs.run('try { await summarise({text: "x"}) } catch (e) { return e.name }')
    assert outcome.result == "ReferenceError"


def test_registration_rules() -> None:
    reg = registry()
    with pytest.raises(WorkflowError, match="Global name is already registered: summarize"):
        reg.register({**EXTENSION, "variables": {}, "workflows": {}, "agentSetupHooks": {}}, "again")
    with pytest.raises(WorkflowError, match="Global name is reserved: agent"):
        ExtensionRegistry().register({**EXTENSION, "functions": {"agent": EXTENSION["functions"]["summarize"]}})
    with pytest.raises(WorkflowError, match="semantic version, headline, and description"):
        ExtensionRegistry().register({**EXTENSION, "version": "one"})
    with pytest.raises(WorkflowError, match="summarize input must describe one object"):
        bad = {**EXTENSION["functions"]["summarize"], "input": {"type": "string"}}
        ExtensionRegistry().register({**EXTENSION, "functions": {"summarize": bad}})
    with pytest.raises(WorkflowError, match="Invalid agent setup hook: audit"):
        ExtensionRegistry().register({**EXTENSION, "agentSetupHooks": {"audit": {"setup": 5}}})
    with pytest.raises(WorkflowError, match="Agent setup hook already registered: audit"):
        hooked = ExtensionRegistry()
        hooked.register({**EXTENSION, "agentSetupHooks": {"audit": {"setup": lambda s, c: None}}})
        hooked.register({"version": "1.0.0", "headline": "h", "description": "d",
                         "agentSetupHooks": {"audit": {"setup": lambda s, c: None}}})
    reg.frozen = True
    with pytest.raises(WorkflowError) as err:
        reg.register(EXTENSION)
    assert err.value.code == "REGISTRY_FROZEN"
    catalog = reg.catalog()
    assert [f["name"] for f in catalog["functions"]] == ["gate", "misuse", "review", "shout", "summarize",
                                                         "watch"]
    assert catalog["variables"][0]["headline"] == "Text tools"


def test_entry_point_extensions_are_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "demo_ext.py").write_text(
        "EXTENSION = {'version': '0.1.0', 'headline': 'Demo', 'description': 'A demo',\n"
        "  'workflows': {'greet': {'description': 'Greets', 'script': 'return 1'}}}\n"
    )
    dist = tmp_path / "demo_ext-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-ext\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[piflow.extensions]\ndemo = demo_ext:EXTENSION\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("demo_ext", None)
    assert "greet" in load_extensions().workflows


async def test_setup_hooks_adjust_every_attempt_in_priority_order(ext_runs: Runs) -> None:
    run_id = await ext_runs.launch('return await agent("hooked task")')
    outcome = await ext_runs.finish(run_id)
    assert outcome.result == "[scripted] hooked task [early] [late:1]", outcome.error
    [agent] = (await ext_runs.view(run_id, details=True)).agent_list
    assert isinstance(agent, AgentDetailView) and agent.state == "completed"
    [attempt] = agent.attempt_list
    assert attempt.setup is not None
    assert (attempt.setup.hook_names, attempt.setup.tools) == (("early", "broken", "late"), ("read", "grep"))


async def test_each_attempt_records_the_setup_it_ran_with(runs: Runs, project: Path) -> None:
    run_id = await runs.launch('return await agent("task", {tools: ["ls"]})')
    assert (await runs.finish(run_id)).state == "completed"
    [agent] = (await runs.view(run_id, details=True)).agent_list
    assert isinstance(agent, AgentDetailView)
    [attempt] = agent.attempt_list
    assert attempt.setup is not None
    assert (attempt.setup.hook_names, attempt.setup.tools, attempt.setup.cwd) == ((), ("ls",), str(project))


async def test_a_throwing_setup_hook_fails_the_agent_without_retry(ext_runs: Runs) -> None:
    script = 'try { await agent("broken task", {retries: 3}) } catch (e) { return [e.code, e.message] }'
    outcome = await ext_runs.run(script)
    assert outcome.result == ["AGENT_FAILED", "no credentials"]
    [agent] = outcome.agents
    assert (agent.state, agent.attempts) == ("failed", 1)
    assert agent.error == {"code": "AGENT_FAILED", "message": "no credentials"}


async def test_registered_workflows_run_by_name(ext_runs: Runs) -> None:
    outcome = await ext_runs.run("", workflow="hello", args="team")
    assert (outcome.view.summary.workflow_name, outcome.result) == ("hello", "hello team")
    with pytest.raises(WorkflowError, match="Workflow is unavailable: nope"):
        await ext_runs.launch("", workflow="nope")


def extension(**groups: Any) -> ExtensionRegistry:
    reg = ExtensionRegistry()
    reg.register({"version": "1.0.0", "headline": "Test", "description": "Test extension", **groups}, "test")
    return reg


def function(run: Any, output: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": "A function", "input": {"type": "object"}, "output": output or {"type": "object"},
            "run": run}


async def test_function_context_orchestrates_agents_in_the_callers_scope(ext_runs: Runs) -> None:
    script = 'const r = await parallel("outer", {x: () => review({file: "a.py"})}); return r.x'
    run_id = await ext_runs.launch(script)
    outcome = await ext_runs.finish(run_id)
    assert outcome.state == "completed", outcome.error
    assert outcome.result == {
        "reviews": {"style": "[scripted] Check the style of a.py {ok}", "tests": "[scripted] Check the tests"},
        "piped": {"one": "[SCRIPTED] DRAFT A"},
        "nested": {"text": "[scripted] hi"},
    }
    assert outcome.view.summary.phase == "reviewing"
    agents = {tuple(a.structural_path): a for a in outcome.agents}
    assert set(agents) == {("outer", "x", "reviews", "style"), ("outer", "x", "reviews", "tests"),
                           ("outer", "x", "fix", "one", "draft"), ("outer", "x")}
    assert agents[("outer", "x", "reviews", "tests")].label == "tester"
    assert all("callsite%3Afunction%3Afunction%2Fouter%2Fx%2Freview%2F1" in (a.journal_path or "")
               for path, a in agents.items() if path != ("outer", "x"))
    if isinstance(ext_runs, EmbeddedRuns):  # what only the embedded store shows: the journal, breadcrumbs, logs
        store = ext_runs.store
        crumbs = {tuple(a.structural_path): a.parent_breadcrumb for a in store.agents(run_id)}
        assert crumbs[("outer", "x", "reviews", "style")] == "review"
        assert crumbs[("outer", "x")] == "review > shout"
        journal = store.journal(run_id)
        assert journal["function/outer/x/review/1"] == outcome.result
        nested = [path for path in journal if path.startswith("function/nested/")]
        assert nested == ["function/nested/function%2Fouter%2Fx%2Freview%2F1/outer/x/shout/occurrence%3A1"]
        assert [e.payload["message"] for e in store.events(run_id) if e.type == "piflow:log"] == ["reviewed"]
        payloads = [e.payload for e in store.events(run_id) if "agentId" in e.payload]
        assert {p.get("parentBreadcrumb") for p in payloads} == {"review", "review > shout"}


async def test_host_side_orchestration_errors_read_like_the_scripts(ext_runs: Runs) -> None:
    outcome = await ext_runs.run("return await misuse({})")
    assert outcome.result == {
        "parallel": ["INVALID_METADATA", "parallel requires a stable explicit name"],
        "tasks": ["INVALID_METADATA", "parallel task values must be run functions"],
        "stages": ["INVALID_METADATA", "pipeline requires at least one stage"],
        "worktree": ["INVALID_METADATA", "withWorktree name must be a non-empty string"],
        "invoke": ["MISSING_WORKFLOW", "Workflow function is unavailable: nope"],
        "input": ["RESULT_INVALID", "Invalid input for misuse"],
        "agent": ["AGENT_FAILED", "No agent bridge is available"],
        "options": ["INVALID_METADATA", "agent thinking must be off, minimal, low, medium, high, xhigh, or max"],
        "prompt": ["INVALID_METADATA", 'Unused prompt value "b"'],
        "first failure": ["AGENT_FAILED", "second broke", None],
    }, outcome.error


async def test_a_functions_checkpoint_waits_for_an_answer_and_returns_a_boolean(ext_runs: Runs) -> None:
    run_id = await ext_runs.launch("return await gate({})")
    for label, approved in (("ship", True), ("ship#2", False)):
        view = await ext_runs.until(run_id, lambda v, label=label: awaiting(v) == [label])
        assert view.state == "awaiting_input"
        assert await ext_runs.respond(run_id, label, approved)
    outcome = await ext_runs.finish(run_id)
    assert outcome.state == "completed", outcome.error
    assert outcome.result == {"answers": [True, False]}


async def test_stopping_a_run_aborts_the_signal_extension_code_holds(ext_runs: Runs, project: Path) -> None:
    """A function awaiting only its abort signal keeps its run busy; a stop still lands within seconds
    (on Temporal it cancels the step running the script) and fires the signal."""
    marker = project / "watch.txt"
    run_id = await ext_runs.launch(f"return await watch({{marker: {json.dumps(str(marker))}}})")
    await wait_for(marker.exists, timeout=30)
    began = time.monotonic()
    assert (await ext_runs.stop(run_id)).stopped
    outcome = await ext_runs.finish(run_id, timeout=30)
    assert (outcome.state, outcome.error) == ("stopped", None)
    assert time.monotonic() - began < 10
    await wait_for(lambda: marker.read_text() == "CANCELLED", timeout=5)


async def test_a_run_busy_in_a_function_answers_and_pauses_within_seconds(ext_runs: Runs, project: Path) -> None:
    """`piflow show` and `pause` do not wait for the script to block (on Temporal the workflow answers
    while its step runs the script)."""
    marker = project / "watch.txt"
    run_id = await ext_runs.launch(f"return await watch({{marker: {json.dumps(str(marker))}}})")
    await wait_for(marker.exists, timeout=30)
    began = time.monotonic()
    assert (await ext_runs.view(run_id)).state == "running"
    assert time.monotonic() - began < 5
    began = time.monotonic()
    assert await ext_runs.pause(run_id) in ("pausing", "paused")
    await ext_runs.until(run_id, lambda view: view.state == "paused", timeout=10)
    assert time.monotonic() - began < 5
    await ext_runs.stop(run_id)
    assert (await ext_runs.finish(run_id, timeout=30)).state == "stopped"


@pytest.mark.parametrize(("resolve", "message"), [
    (lambda run: (_ for _ in ()).throw(RuntimeError("vault is sealed")), "token: vault is sealed"),
    (lambda run: {"not": "a string"}, "token: Invalid output from token"),
])
async def test_a_failing_variable_fails_the_launch_and_saves_no_run(
    project: Path, store: RunStore, resolve: Any, message: str
) -> None:
    seen: list[Any] = []

    async def patient(run: Any) -> str:
        seen.append(run)
        await run["signal"].wait()  # only the first failure's abort ends this
        return "never"

    reg = extension(variables={
        "token": {"description": "A token", "schema": {"type": "string"}, "resolve": resolve},
        "slow": {"description": "Waits", "schema": {"type": "string"}, "resolve": patient},
    })
    async with Engine(store, extensions=reg) as engine:
        with pytest.raises(WorkflowError) as failure:
            await engine.launch(LaunchRequest(script="return token", cwd=str(project), name="vars"))
    assert failure.value.message == message
    assert store.list_runs() == []
    assert seen[0]["workflow"] == "vars" and seen[0]["signal"].aborted


CRASH_EXTENSION = '''
def _note(path, text):
    with open(path, "a", encoding="utf-8") as log:
        log.write(text + "\\n")


async def outer(value, ctx):
    _note(value["log"], "outer")
    first = await ctx.invoke("step", {"log": value["log"], "name": "first"})
    approved = await ctx.checkpoint({"name": "go", "prompt": "Go on?", "context": first})
    second = await ctx.invoke("step", {"log": value["log"], "name": "second"})
    return {"first": first, "approved": approved, "second": second}


async def step(value, ctx):
    _note(value["log"], value["name"])
    return {"said": await ctx.agent("say " + value["name"])}


OBJECT = {"type": "object"}
EXTENSION = {
    "version": "1.0.0", "headline": "Crash", "description": "Nested functions with side effects",
    "functions": {
        "outer": {"description": "Runs two steps around a checkpoint", "input": OBJECT, "output": OBJECT,
                  "run": outer},
        "step": {"description": "One step with an agent", "input": OBJECT, "output": OBJECT, "run": step},
    },
}
'''


def _install_extension(root: Path, module: str, source: str) -> str:
    """An extension installed the way users do: a module and its entry point in `piflow.extensions`."""
    root.mkdir()
    (root / f"{module}.py").write_text(source)
    dist = root / f"{module}-1.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0.0\n")
    (dist / "entry_points.txt").write_text(f"[piflow.extensions]\n{module} = {module}:EXTENSION\n")
    return str(root)


def _await_checkpoint(store: RunStore, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = store.list_runs()
        if runs and store.awaiting_checkpoints(runs[0].id):
            return runs[0].id
        if process.poll() is not None:
            pytest.fail(f"piflow exited {process.returncode} early: {process.communicate()[1]}")
        time.sleep(0.02)
    process.kill()
    pytest.fail("the run never reached its checkpoint")


def test_kill_and_resume_reruns_no_completed_nested_function(project: Path, tmp_path: Path) -> None:
    from piflow.engine.environment import store_path

    side_effects = project / "side-effects.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [_install_extension(tmp_path / "ext", "crash_ext", CRASH_EXTENSION), os.environ.get("PYTHONPATH", "")])}
    (project / "flow.workflow.js").write_text("return await outer({log: args.log})")

    def piflow(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "piflow", *args], cwd=project, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    with RunStore.open(store_path(str(project))) as store:
        first = piflow("run", "flow.workflow.js", "--args", json.dumps({"log": str(side_effects)}), "--json")
        run_id = _await_checkpoint(store, first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert side_effects.read_text().split() == ["outer", "first"]
        resumed = piflow("resume", run_id[:8], "--json")
        assert _await_checkpoint(store, resumed) == run_id
        assert Engine(store).respond(run_id, name="go", approved=True).accepted
        _out, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err
        record = store.get_run(run_id)
        assert record is not None and record.state == "completed", record
        assert record.result == {"first": {"said": "[scripted] say first"}, "approved": True,
                                 "second": {"said": "[scripted] say second"}}
        # The parent runs again from its top; its completed child and that child's agent do not.
        assert side_effects.read_text().split() == ["outer", "first", "outer", "second"]
        agents = [a for a in store.agents(run_id) if a.state == "completed"]
        assert sorted(a.parent_breadcrumb or "" for a in agents) == ["outer > step", "outer > step"]
        assert len({a.journal_path for a in agents}) == 2


async def test_variables_resolve_again_on_resume_and_a_failure_leaves_the_run_as_it_was(
    project: Path, store: RunStore
) -> None:
    sealed: list[bool] = []

    def token(run: Any) -> str:
        if sealed:
            raise WorkflowError("CONFIG_ERROR", "the vault is sealed")
        return "t-1"

    reg = extension(variables={"token": {"description": "A token", "schema": {"type": "string"}, "resolve": token}})
    script = 'await checkpoint({name: "go", prompt: "Go?", context: null}); return token'
    async with Engine(store, extensions=reg) as first:
        run_id = await first.launch(LaunchRequest(script=script, cwd=str(project)))
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
    sealed.append(True)
    async with Engine(store, extensions=reg) as second:
        with pytest.raises(WorkflowError) as failure:
            await second.resume(run_id)
        assert (failure.value.code, failure.value.message) == ("CONFIG_ERROR", "token: the vault is sealed")
        record = store.get_run(run_id)
        assert record is not None and record.state == "interrupted"
        sealed.clear()
        await second.resume(run_id)
        await wait_for(lambda: store.awaiting_checkpoints(run_id))
        second.respond(run_id, name="go", approved=True)
        assert (await finished(second, run_id)).result == "t-1"


async def test_function_agents_run_in_the_worktree_of_their_call_site(project: Path, store: RunStore) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, text=True).stdout

    git("init", "-q", "-b", "main")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init")

    async def fixer(value: dict[str, Any], ctx: FunctionContext) -> dict[str, Any]:
        inherited = await ctx.agent("in the script's worktree", {"label": "inherited"})
        own = await ctx.with_worktree("own", lambda: ctx.agent("in my worktree", {"label": "own"}))
        unnamed = await ctx.withWorktree(lambda: ctx.agent("in a fresh worktree", {"label": "fresh"}))
        return {"values": [inherited, own, unnamed]}

    reg = extension(functions={"fixer": function(fixer)})
    async with Engine(store, extensions=reg) as engine:
        run_id = await engine.launch(LaunchRequest(script='return await withWorktree("w", () => fixer({}))',
                                                   cwd=str(project)))
        record = await finished(engine, run_id)
    assert record.state == "completed", record.error
    owners = {a.label: a.worktree_owner for a in store.agents(run_id)}
    assert owners["inherited"] == "worktree/named/w"
    assert owners["own"] == "worktree/named/own"
    assert (owners["fresh"] or "").startswith("worktree/unnamed/callsite%3Afunction%3Afunction%2Ffixer%2F1/")
    cwds = {a.label: store.attempts(a.id)[0].setup.cwd for a in store.agents(run_id)}  # type: ignore[union-attr]
    assert len(set(cwds.values())) == 3 and str(project) not in cwds.values()
    assert {w.owner for w in store.worktrees(run_id)} == set(owners.values())
