"""Workflow extensions: functions, variables and named workflows registered from Python (spec L).

Extensions are Python packages exposing an object in the entry-point group `piflow.extensions`:
a mapping in the reference's `registerWorkflowExtension` shape, or a callable returning one.
Registration is atomic and happens once per process, before the first run (then it is frozen).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Final

import anyio

from piflow.analysis.launch import RegisteredWorkflow
from piflow.analysis.schemas import validate_schema
from piflow.engine.setup_hooks import AgentSetupHook, parse_hook
from piflow.errors import WorkflowError
from piflow.jsvalues import is_plain_json

if TYPE_CHECKING:
    from piflow.engine.functions import AbortSignal, FunctionContext

ENTRY_POINT_GROUP: Final = "piflow.extensions"
RESERVED_GLOBALS: Final = frozenset(
    {
        "agent", "conversation", "prompt", "checkpoint", "parallel", "pipeline", "phase", "withWorktree", "log",
        "args", "Promise", "JSON", "Math", "Date", "eval", "Function", "WebAssembly", "process", "require", "module",
        "exports", "console", "fetch", "XMLHttpRequest", "WebSocket", "performance", "crypto", "setTimeout",
        "setInterval", "setImmediate", "queueMicrotask", "Intl", "SharedArrayBuffer", "Atomics", "globalThis",
        "global", "undefined", "NaN", "Infinity", "extensions", "workflow_catalog",
    }
)
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_$][\w$]*$")
_SEMVER: Final = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_EXTENSION_KEYS: Final = frozenset({"version", "headline", "description", "functions", "variables", "workflows",
                                    "agentSetupHooks"})

Runner = Callable[[Any, "FunctionContext"], Any]
Resolver = Callable[[Mapping[str, Any]], Any]
"""A variable's `resolve(run)`: the run's facts (`cwd`, `runId`, `workflow`, `args`, `signal`)."""


@dataclass(frozen=True)
class WorkflowFunction:
    name: str
    description: str
    input: dict[str, Any]
    output: dict[str, Any]
    run: Runner
    extension: str


@dataclass(frozen=True)
class WorkflowVariable:
    name: str
    description: str
    schema: dict[str, Any]
    resolve: Resolver
    extension: str


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def _metadata(message: str) -> WorkflowError:
    return WorkflowError("INVALID_METADATA", message)


@dataclass
class ExtensionRegistry:
    """All registered extensions; frozen once the first run starts (REGISTRY_FROZEN after)."""

    functions: dict[str, WorkflowFunction] = field(default_factory=dict)
    variables: dict[str, WorkflowVariable] = field(default_factory=dict)
    workflows: dict[str, RegisteredWorkflow] = field(default_factory=dict)
    setup_hooks: dict[str, AgentSetupHook] = field(default_factory=dict)
    headlines: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    frozen: bool = False

    def register(self, ext: Mapping[str, Any], source: str = "extension") -> None:
        """Validate everything first, then store it all (spec L.1): nothing is kept on failure."""
        if self.frozen:
            raise WorkflowError("REGISTRY_FROZEN", "Workflow extension registration is closed after session_start")
        if not isinstance(ext, Mapping) or set(ext) - _EXTENSION_KEYS or not _SEMVER.match(str(ext.get("version"))) \
                or _blank(ext.get("headline")) or _blank(ext.get("description")):
            raise _metadata("Workflow extensions require a semantic version, headline, and description")
        groups = {key: ext.get(key) or {} for key in ("functions", "variables", "workflows", "agentSetupHooks")}
        if any(not isinstance(group, Mapping) for group in groups.values()) or not any(groups.values()):
            raise _metadata("Workflow extensions require functions, variables, workflows, or agent setup hooks")
        functions = {name: self._function(name, spec, source) for name, spec in groups["functions"].items()}
        variables = {name: self._variable(name, spec, source) for name, spec in groups["variables"].items()}
        names = list(functions) + list(variables)
        if len(set(names)) != len(names):
            raise WorkflowError("GLOBAL_COLLISION", "Global name collision inside extension")
        for name in names:
            if not _IDENTIFIER.match(name) or name.startswith("__pi_extensible_workflows_"):
                raise _metadata(f"Invalid global name: {name}")
            if name in RESERVED_GLOBALS:
                raise WorkflowError("GLOBAL_COLLISION", f"Global name is reserved: {name}")
            if name in self.functions or name in self.variables:
                raise WorkflowError("GLOBAL_COLLISION", f"Global name is already registered: {name}")
        workflows = {name: self._workflow(name, spec) for name, spec in groups["workflows"].items()}
        hooks = {name: self._hook(name, spec) for name, spec in groups["agentSetupHooks"].items()}
        self.functions.update(functions)
        self.setup_hooks.update(hooks)
        self.variables.update(variables)
        self.workflows.update(workflows)
        self.headlines[source] = (str(ext["version"]), str(ext["headline"]), str(ext["description"]))

    def _function(self, name: str, spec: Any, source: str) -> WorkflowFunction:
        if not isinstance(spec, Mapping) or set(spec) - {"description", "input", "output", "run"} \
                or _blank(spec.get("description")) or not callable(spec.get("run")):
            raise _metadata(f"Invalid workflow function: {name}")
        schema_in = validate_schema(spec.get("input"), f"{name} input")
        schema_out = validate_schema(spec.get("output"), f"{name} output")
        if schema_in.get("type") != "object":
            raise WorkflowError("INVALID_SCHEMA", f"{name} input must describe one object")
        return WorkflowFunction(name, spec["description"], schema_in, schema_out, spec["run"], source)

    def _variable(self, name: str, spec: Any, source: str) -> WorkflowVariable:
        if not isinstance(spec, Mapping) or set(spec) - {"description", "schema", "resolve"} \
                or _blank(spec.get("description")) or not callable(spec.get("resolve")):
            raise _metadata(f"Invalid workflow variable: {name}")
        return WorkflowVariable(name, spec["description"], validate_schema(spec.get("schema"), f"{name} schema"),
                                spec["resolve"], source)

    def _hook(self, name: str, spec: Any) -> AgentSetupHook:
        if not _IDENTIFIER.match(name):
            raise _metadata(f"Invalid agent setup hook: {name}")
        hook = parse_hook(name, spec)
        if name in self.setup_hooks:
            raise WorkflowError("DUPLICATE_NAME", f"Agent setup hook already registered: {name}")
        return hook

    def _workflow(self, name: str, spec: Any) -> RegisteredWorkflow:
        if not _IDENTIFIER.match(name) or not isinstance(spec, Mapping) or _blank(spec.get("description")) \
                or _blank(spec.get("script")):
            raise _metadata(f"Invalid workflow script: {name}")
        if name in self.workflows:
            raise WorkflowError("DUPLICATE_NAME", f"Reusable workflow already registered: {name}")
        from piflow.analysis.inspect import inspect_script

        inspect_script(spec["script"])  # raises the script's INVALID_SYNTAX
        return RegisteredWorkflow(description=spec["description"], script=spec["script"])

    def catalog(self) -> dict[str, Any]:
        """What scripts may call (spec L.6): never implementations, scripts or variable values."""
        def about(extension: str) -> dict[str, str]:
            version, headline, description = self.headlines[extension]
            return {"version": version, "headline": headline, "extensionDescription": description}

        return {
            "functions": [{"name": f.name, **about(f.extension), "description": f.description, "input": f.input,
                           "output": f.output} for f in sorted(self.functions.values(), key=lambda f: f.name)],
            "variables": [{"name": v.name, **about(v.extension), "description": v.description, "schema": v.schema}
                          for v in sorted(self.variables.values(), key=lambda v: v.name)],
            "workflows": [{"name": name, "description": w.description}
                          for name, w in sorted(self.workflows.items())],
        }


def load_extensions() -> ExtensionRegistry:
    """Every extension installed in this Python environment, registered in entry-point name order."""
    registry = ExtensionRegistry()
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            loaded = point.load()
        except Exception as exc:  # a broken extension is reported, never imported half-way
            raise WorkflowError("CONFIG_ERROR", f"Cannot load workflow extension {point.name}: {exc}") from None
        registry.register(loaded() if callable(loaded) else loaded, point.name)
    return registry


def _check_value(value: Any, schema: dict[str, Any]) -> bool:
    from piflow.engine.agents import schema_accepts

    return is_plain_json(value) and schema_accepts(schema, value)


async def call_extension(function: Callable[..., Any], *args: Any) -> Any:
    """Call extension code that may be plain or async."""
    result = function(*args)
    return await result if inspect.isawaitable(result) else result


async def run_function(function: WorkflowFunction, value: Any, context: FunctionContext) -> Any:
    """Run an extension function with a copy of its input; its output must match its schema."""
    try:
        output = await call_extension(function.run, json.loads(json.dumps(value)), context)
    except WorkflowError:
        raise
    except Exception as exc:  # an extension bug fails the call with its message
        raise WorkflowError("INTERNAL_ERROR", str(exc) or type(exc).__name__) from None
    if not _check_value(output, function.output):
        raise WorkflowError("RESULT_INVALID", f"Invalid output from {function.name}")
    return output


def check_input(function: WorkflowFunction, value: Any) -> None:
    if not isinstance(value, dict) or not _check_value(value, function.input):
        raise WorkflowError("RESULT_INVALID", f"Invalid input for {function.name}")


def check_replay(function: WorkflowFunction, value: Any) -> Any:
    if not _check_value(value, function.output):
        raise WorkflowError("RESULT_INVALID", f"Invalid replay for {function.name}")
    return value


async def resolve_variables(
    registry: ExtensionRegistry, run: Mapping[str, Any], signal: AbortSignal
) -> dict[str, Any]:
    """Resolve every variable at once for one execution (spec L.4).

    The first failure aborts `signal` (the others stop) and is raised naming its variable.
    """
    values: dict[str, Any] = {}
    failures: list[WorkflowError] = []

    async def resolve(variable: WorkflowVariable) -> None:
        try:
            value = await call_extension(variable.resolve, run)
            if not _check_value(value, variable.schema):
                raise WorkflowError("RESULT_INVALID", f"Invalid output from {variable.name}")
        except WorkflowError as exc:
            failure = WorkflowError(exc.code, f"{variable.name}: {exc.message}")
        except Exception as exc:  # an extension bug, reported with its own message
            failure = WorkflowError("INTERNAL_ERROR", f"{variable.name}: {str(exc) or type(exc).__name__}")
        else:
            values[variable.name] = json.loads(json.dumps(value))
            return
        if not failures:
            failures.append(failure)
            signal.abort(failure)
            group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        for variable in registry.variables.values():
            group.start_soon(resolve, variable)
    if failures:
        raise failures[0]
    return {name: values[name] for name in registry.variables}
