"""Extension code while a run executes (spec L.3, L.4): the context functions get, journaled.

Every step a function takes through its context is an operation of the run: agents get the
structural path `agent/…/callsite:function:<function path>/…`, nested `invoke`s are journaled at
`function/nested/<parent path>/…` and checkpoints at their label, so a resume after a crash returns
completed steps from the journal and re-runs none of them. Host-side `parallel`, `pipeline` and
`with_worktree` scope what runs inside them through context variables (the reference's
AsyncLocalStorage): an agent keeps the branch and the worktree of the code that started it.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import anyio

from piflow.engine.extensions import (
    ExtensionRegistry,
    call_extension,
    check_input,
    check_replay,
    resolve_variables,
    run_function,
)
from piflow.engine.journal import OperationKind, agent_path, function_path, structural_path
from piflow.engine.lifecycle import CheckpointState
from piflow.engine.worker.protocol import FunctionCall, Placement
from piflow.errors import WorkflowError
from piflow.jsvalues import is_plain_json, js_trim

if TYPE_CHECKING:
    from piflow.engine.calls import CallServer
    from piflow.engine.extension_parts import WorkflowFunction
    from piflow.engine.runs import ActiveRun

_SCOPE: ContextVar[tuple[str, ...]] = ContextVar("piflow_function_scope", default=())
"""The structural path (parallel/pipeline names) the running extension code sits in."""
_OWNER: ContextVar[str | None] = ContextVar("piflow_function_worktree", default=None)
"""The `with_worktree` scope the running extension code sits in (None: the launch cwd)."""
_PLACEHOLDER: Final = re.compile(r"\{\{|\}\}|\{([A-Za-z_$][\w$]*)\}")


class AbortSignal:
    """Tells extension code that its run stopped (or its launch failed): poll `aborted` or `await wait()`.

    Code that starts work of its own (a subprocess, a thread, a request) stops it when the signal
    fires; the run does not wait for it.
    """

    def __init__(self) -> None:
        self._event = anyio.Event()
        self.reason: WorkflowError | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self, reason: WorkflowError) -> None:
        if not self.aborted:
            self.reason = reason
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()

    def raise_if_aborted(self) -> None:
        if self.reason is not None:
            raise self.reason


def run_facts(cwd: str, run_id: str, workflow: str, args: Any, signal: AbortSignal) -> Mapping[str, Any]:
    """`context.run` of functions and what variable resolvers get (read-only, spec L.3; `args` a copy)."""
    return MappingProxyType({"cwd": cwd, "runId": run_id, "workflow": workflow, "args": copy.deepcopy(args),
                             "signal": signal})


async def launch_variables(
    extensions: ExtensionRegistry, cwd: str, run_id: str, workflow: str, args: Any
) -> dict[str, Any]:
    """The variables of an execution about to start, resolved before anything of it is written."""
    signal = AbortSignal()
    return await resolve_variables(extensions, run_facts(cwd, run_id, workflow, args, signal), signal)


@dataclass(frozen=True, slots=True)
class FunctionSite:
    """Where one function call runs: its journal path, its scope, and its callers for agent records."""

    path: str
    structural_path: tuple[str, ...]
    worktree_owner: str | None
    breadcrumb: str


@contextlib.contextmanager
def _scoped(path: tuple[str, ...], owner: str | None) -> Iterator[None]:
    scope, worktree = _SCOPE.set(path), _OWNER.set(owner)
    try:
        yield
    finally:
        _OWNER.reset(worktree)
        _SCOPE.reset(scope)


def _next(counters: dict[Any, int], key: Any) -> int:
    counters[key] = counters.get(key, 0) + 1
    return counters[key]


class FunctionCalls:
    """The extension function calls of one execution of a run: occurrence counters reset with it."""

    def __init__(self, run: ActiveRun, server: CallServer, extensions: ExtensionRegistry) -> None:
        self.run = run
        self.server = server
        self.extensions = extensions
        self.signal = AbortSignal()
        self.facts = run_facts(run.cwd, run.id, run.workflow_name, run.snapshot.get("args"), self.signal)
        self.occurrences: dict[Any, int] = {}

    def lookup(self, name: str) -> WorkflowFunction:
        function = self.extensions.functions.get(name)
        if function is None:
            raise WorkflowError("MISSING_WORKFLOW", f"Workflow function is unavailable: {name}")
        return function

    async def call(self, call: FunctionCall) -> Any:
        """A function the script called: an outcome failure names the function (`failedAt`, A.12)."""
        function = self.lookup(call.name)
        check_input(function, call.input)
        placement = call.placement
        site = FunctionSite(function_path(placement.path, function.name, placement.occurrence), placement.path,
                            placement.worktree_owner, function.name)
        try:
            return await self.run_at(function, call.input, site)
        except WorkflowError as exc:
            if exc.code in ("AGENT_TIMEOUT", "AGENT_FAILED", "RESULT_INVALID"):
                raise WorkflowError(exc.code, exc.message, failed_at=function.name) from None
            raise

    async def run_at(self, function: WorkflowFunction, value: Any, site: FunctionSite) -> Any:
        """The journaled value at `site.path` (validated again), else run the function and journal its output."""
        recorded = self.run.operations.check(OperationKind.FUNCTION, site.path)
        if recorded is not None:
            return check_replay(function, recorded.value)
        with _scoped(site.structural_path, site.worktree_owner):
            output = await run_function(function, value, FunctionContext(self, site))
        with self.run.batch():
            self.run.operations.record(OperationKind.FUNCTION, site.path, output)
        return output


class FunctionContext:
    """What an extension function's `run(input, context)` may use (spec L.3), bound to its call."""

    def __init__(self, calls: FunctionCalls, site: FunctionSite) -> None:
        self._calls = calls
        self._site = site
        self.run = calls.facts

    async def invoke(self, name: str, value: Any) -> Any:
        """Call another extension function; its result is journaled on its own, so a retried or
        resumed caller gets it back without running it again."""
        calls, site = self._calls, self._site
        function = calls.lookup(name)
        check_input(function, value)
        inherited, owner = _SCOPE.get(), _OWNER.get()
        n = _next(calls.occurrences, ("invoke", site.path, inherited, name))
        path = structural_path("function", "nested", site.path, *inherited, name, f"occurrence:{n}")
        return await calls.run_at(function, value, FunctionSite(path, inherited, owner, f"{site.breadcrumb} > {name}"))

    async def agent(self, prompt: Any, options: Any = None) -> Any:
        """An agent in the caller's scope: its parallel branch, its worktree, recorded under the function."""
        calls, site = self._calls, self._site
        if not isinstance(prompt, str):
            raise WorkflowError("AGENT_FAILED", "No agent bridge is available")
        options = {} if options is None else options
        if not isinstance(options, dict) or not is_plain_json(options):
            raise WorkflowError("INVALID_METADATA", "agent options must be a JSON object")
        inherited, owner = _SCOPE.get(), _OWNER.get()
        n = _next(calls.occurrences, ("agent", site.path, inherited))
        path = agent_path(inherited, f"function:{site.path}", n)
        return await calls.server.run_agent(prompt, options, OperationKind.AGENT, path, Placement(inherited, n, owner),
                                            None, breadcrumb=site.breadcrumb)

    def prompt(self, template: Any, values: Any) -> str:
        """The script's `prompt()` (A.10) for JSON values: every placeholder filled, every value used."""
        if not isinstance(template, str):
            raise WorkflowError("INVALID_METADATA", "prompt() template must be a string")
        if not isinstance(values, dict) or not is_plain_json(values):
            raise WorkflowError("INVALID_METADATA", "prompt() values must be a plain JSON-compatible object")
        used = [m.group(1) for m in _PLACEHOLDER.finditer(template) if m.group(1) is not None]
        missing = next((key for key in used if key not in values), None)
        if missing is not None:
            raise WorkflowError("INVALID_METADATA", f'Missing prompt value "{missing}"')
        unused = next((key for key in values if key not in used), None)
        if unused is not None:
            raise WorkflowError("INVALID_METADATA", f'Unused prompt value "{unused}"')
        from piflow.config.settings import js_json_dumps

        def render(match: re.Match[str]) -> str:
            key = match.group(1)
            if key is None:
                return match.group()[0]
            value = values[key]
            return value if isinstance(value, str) else js_json_dumps(value, indent=2)

        return _PLACEHOLDER.sub(render, template)

    async def parallel(self, name: Any, tasks: Any) -> dict[str, Any]:
        """Every task at once in scope `[…, name, task]`; the first failure in record order is raised."""
        if not isinstance(name, str) or not js_trim(name):
            raise WorkflowError("INVALID_METADATA", "parallel requires a stable explicit name")
        if not isinstance(tasks, Mapping):
            raise WorkflowError("INVALID_METADATA", "parallel tasks must be a record")
        for key, task in tasks.items():
            if not isinstance(key, str) or not js_trim(key):
                raise WorkflowError("INVALID_METADATA", "parallel task requires a stable explicit name")
            if not callable(task):
                raise WorkflowError("INVALID_METADATA", "parallel task values must be run functions")
        inherited = _SCOPE.get()

        async def branch(key: str) -> Any:
            _SCOPE.set((*inherited, name, key))
            return await call_extension(tasks[key])

        return await _settle({key: branch for key in tasks})

    async def pipeline(self, name: Any, items: Any, stages: Any) -> dict[str, Any]:
        """Items at once; each item's stages in order on the previous value, in scope `[…, name, item, stage]`."""
        problem = _pipeline_problem(name, items, stages)
        if problem is not None:
            raise WorkflowError("INVALID_METADATA", problem)
        inherited = _SCOPE.get()

        async def branch(item: str) -> Any:
            value = items[item]
            for stage, run in stages.items():
                _SCOPE.set((*inherited, name, item, stage))
                value = await call_extension(run, value)
            return value

        return await _settle({item: branch for item in items})

    async def with_worktree(self, *args: Any) -> Any:
        """Run `callback` with every agent it starts in one git worktree (A.8): named ones are shared."""
        if len(args) not in (1, 2):
            raise WorkflowError("INVALID_METADATA", "withWorktree requires a callback or a name and callback")
        callback = args[-1]
        if not callable(callback):
            raise WorkflowError("INVALID_METADATA", "withWorktree callback must be a function")
        inherited = _SCOPE.get()
        if len(args) == 2:
            if not isinstance(args[0], str) or not js_trim(args[0]):
                raise WorkflowError("INVALID_METADATA", "withWorktree name must be a non-empty string")
            owner = structural_path("worktree", "named", js_trim(args[0]))
        else:
            n = _next(self._calls.occurrences, ("worktree", self._site.path, inherited))
            owner = structural_path("worktree", "unnamed", *inherited, f"callsite:function:{self._site.path}",
                                    f"occurrence:{n}")
        with _scoped(inherited, owner):
            return await call_extension(callback)

    withWorktree = with_worktree  # the reference's name, for code ported from it

    async def checkpoint(self, value: Any) -> bool:
        """Wait for a person's answer (`{name, prompt, context}`, A.9); True when approved.

        Labels count per name over the functions of one execution (`ship`, `ship#2`); they share
        the run's checkpoint names with the script, so give a function's checkpoints names of their own.
        """
        from piflow.analysis.checkpoint import validate_checkpoint

        name = validate_checkpoint(value)["name"]
        n = _next(self._calls.occurrences, ("checkpoint", name))
        state = await self._calls.run.checkpoint(value, name if n == 1 else f"{name}#{n}")
        return state == CheckpointState.APPROVED

    async def phase(self, name: Any) -> None:
        await self._calls.server.phase(name)

    async def log(self, message: Any) -> None:
        await self._calls.server.log(message)


def _pipeline_problem(name: Any, items: Any, stages: Any) -> str | None:
    """The first A.7 validation message that applies, in the reference's order."""
    if not isinstance(name, str) or not js_trim(name):
        return "pipeline requires a stable explicit name"
    if not isinstance(items, Mapping):
        return "pipeline items must be a record"
    if not isinstance(stages, Mapping):
        return "pipeline stages must be a record"
    if not stages:
        return "pipeline requires at least one stage"
    if any(not isinstance(key, str) or not js_trim(key) for key in items):
        return "pipeline item requires a stable explicit name"
    if any(not isinstance(key, str) or not js_trim(key) for key in stages):
        return "pipeline stage requires a stable explicit name"
    if any(not callable(run) for run in stages.values()):
        return "pipeline stage values must be run functions"
    return None


async def _settle(branches: Mapping[str, Callable[[str], Awaitable[Any]]]) -> dict[str, Any]:
    """Run every branch to its end; `CANCELLED` stops them all at once, else the first failure in
    record order is raised (no `failedAt`: host-side branches report as the reference's do)."""
    values: dict[str, Any] = {}
    failures: dict[str, Exception] = {}
    cancelled: list[WorkflowError] = []

    async with anyio.create_task_group() as group:
        async def one(key: str) -> None:
            try:
                values[key] = await branches[key](key)
            except WorkflowError as exc:
                if exc.code == "CANCELLED":
                    cancelled.append(exc)
                    group.cancel_scope.cancel()
                failures[key] = exc
            except Exception as exc:  # extension code's own error: reported like the reference's
                failures[key] = exc

        for key in branches:
            group.start_soon(one, key)
    if cancelled:
        raise cancelled[0]
    for key in branches:
        if key in failures:
            raise failures[key]
    return {key: values[key] for key in branches}
