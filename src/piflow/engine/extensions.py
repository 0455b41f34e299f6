"""Workflow extensions: functions, variables, named workflows and agent tools registered from Python (spec L).

Extensions are Python packages exposing an object in the entry-point group `piflow.extensions`:
a mapping in the reference's `registerWorkflowExtension` shape, or a callable returning one. piflow
adds one key, `tools`: Python functions agents on non-pi backends may call like `read` or `bash`.
Registration is atomic and happens once per process, before the first run (then it is frozen);
what is registered is held as `extension_parts`' classes, loaded only when an extension registers.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from piflow.analysis.schemas import validate_schema
from piflow.errors import WorkflowError
from piflow.jsvalues import is_plain_json

if TYPE_CHECKING:
    from piflow.analysis.launch import RegisteredWorkflow
    from piflow.engine.extension_parts import ExtensionTool, WorkflowFunction, WorkflowVariable
    from piflow.engine.functions import AbortSignal, FunctionContext
    from piflow.engine.setup_hooks import AgentSetupHook
    from piflow.engine.tools.registry import Tool

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
                                    "agentSetupHooks", "tools"})
_TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What chat-completions APIs accept as a function name."""

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
    tools: dict[str, ExtensionTool] = field(default_factory=dict)
    headlines: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    frozen: bool = False

    def register(self, ext: Mapping[str, Any], source: str = "extension") -> None:
        """Validate everything first, then store it all (spec L.1): nothing is kept on failure."""
        if self.frozen:
            raise WorkflowError("REGISTRY_FROZEN", "Workflow extension registration is closed after session_start")
        if not isinstance(ext, Mapping) or set(ext) - _EXTENSION_KEYS or not _SEMVER.match(str(ext.get("version"))) \
                or _blank(ext.get("headline")) or _blank(ext.get("description")):
            raise _metadata("Workflow extensions require a semantic version, headline, and description")
        groups = {key: ext.get(key) or {}
                  for key in ("functions", "variables", "workflows", "agentSetupHooks", "tools")}
        if any(not isinstance(group, Mapping) for group in groups.values()) or not any(groups.values()):
            raise _metadata("Workflow extensions require functions, variables, workflows, agent setup hooks, "
                            "or tools")
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
        tools = {name: self._tool(name, spec, source) for name, spec in groups["tools"].items()}
        self.functions.update(functions)
        self.tools.update(tools)
        self.setup_hooks.update(hooks)
        self.variables.update(variables)
        self.workflows.update(workflows)
        self.headlines[source] = (str(ext["version"]), str(ext["headline"]), str(ext["description"]))

    def _function(self, name: str, spec: Any, source: str) -> WorkflowFunction:
        from piflow.engine.extension_parts import WorkflowFunction

        if not isinstance(spec, Mapping) or set(spec) - {"description", "input", "output", "run"} \
                or _blank(spec.get("description")) or not callable(spec.get("run")):
            raise _metadata(f"Invalid workflow function: {name}")
        schema_in = validate_schema(spec.get("input"), f"{name} input")
        schema_out = validate_schema(spec.get("output"), f"{name} output")
        if schema_in.get("type") != "object":
            raise WorkflowError("INVALID_SCHEMA", f"{name} input must describe one object")
        return WorkflowFunction(name, spec["description"], schema_in, schema_out, spec["run"], source)

    def _variable(self, name: str, spec: Any, source: str) -> WorkflowVariable:
        from piflow.engine.extension_parts import WorkflowVariable

        if not isinstance(spec, Mapping) or set(spec) - {"description", "schema", "resolve"} \
                or _blank(spec.get("description")) or not callable(spec.get("resolve")):
            raise _metadata(f"Invalid workflow variable: {name}")
        return WorkflowVariable(name, spec["description"], validate_schema(spec.get("schema"), f"{name} schema"),
                                spec["resolve"], source)

    def _hook(self, name: str, spec: Any) -> AgentSetupHook:
        from piflow.engine.setup_hooks import parse_hook

        if not _IDENTIFIER.match(name):
            raise _metadata(f"Invalid agent setup hook: {name}")
        hook = parse_hook(name, spec)
        if name in self.setup_hooks:
            raise WorkflowError("DUPLICATE_NAME", f"Agent setup hook already registered: {name}")
        return hook

    def _tool(self, name: str, spec: Any, source: str) -> ExtensionTool:
        from piflow.engine.extension_parts import ExtensionTool
        from piflow.engine.tools.registry import BUILTIN_TOOL_NAMES, CHILD_TOOL_NAMES

        if not isinstance(name, str) or not _TOOL_NAME.match(name) or not isinstance(spec, Mapping) \
                or set(spec) - {"description", "input", "run"} or _blank(spec.get("description")) \
                or not callable(spec.get("run")):
            raise _metadata(f"Invalid agent tool: {name}")
        if name in BUILTIN_TOOL_NAMES or name in CHILD_TOOL_NAMES or name == "workflow_result":  # spec J.4's
            raise WorkflowError("DUPLICATE_NAME", f"Agent tool name is reserved: {name}")
        if name in self.tools:
            raise WorkflowError("DUPLICATE_NAME", f"Agent tool already registered: {name}")
        schema = validate_schema(spec.get("input"), f"{name} input")
        if schema.get("type") != "object":
            raise WorkflowError("INVALID_SCHEMA", f"{name} input must describe one object")
        return ExtensionTool(name, spec["description"], schema, spec["run"], source)

    def agent_tools(self) -> dict[str, Tool]:
        """The registered tools, as the tool runtime serves them."""
        return {name: tool.agent_tool() for name, tool in self.tools.items()}

    def _workflow(self, name: str, spec: Any) -> RegisteredWorkflow:
        if not _IDENTIFIER.match(name) or not isinstance(spec, Mapping) or _blank(spec.get("description")) \
                or _blank(spec.get("script")):
            raise _metadata(f"Invalid workflow script: {name}")
        if name in self.workflows:
            raise WorkflowError("DUPLICATE_NAME", f"Reusable workflow already registered: {name}")
        from piflow.analysis.inspect import inspect_script
        from piflow.analysis.launch import RegisteredWorkflow

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


def _may_declare_extensions() -> bool:
    """Whether any distribution on `sys.path` may declare a `piflow.extensions` entry point.

    Importing `importlib.metadata` costs ~40 ms (it pulls in `email`, `zipfile`, `csv`) on every
    launch and resume, while scanning the few entry-point files of an environment costs ~2 ms; the
    metadata machinery is loaded only when one of them names the group. A path entry this cannot
    read as a directory (a zip, an egg) is left to `importlib.metadata`.
    """
    header = f"[{ENTRY_POINT_GROUP}]"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except NotADirectoryError:
            return True
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(entry, name, "entry_points.txt"), encoding="utf-8") as declared:
                        if header in declared.read():
                            return True
                except (OSError, UnicodeDecodeError):
                    continue
    return False


def load_extensions() -> ExtensionRegistry:
    """Every extension installed in this Python environment, registered in entry-point name order."""
    registry = ExtensionRegistry()
    if not _may_declare_extensions():
        return registry
    from importlib.metadata import entry_points

    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            loaded = point.load()
        except Exception as exc:  # a broken extension is reported, never imported half-way
            raise WorkflowError("CONFIG_ERROR", f"Cannot load workflow extension {point.name}: {exc}") from None
        registry.register(loaded() if callable(loaded) else loaded, point.name)
    return registry


def installed_tool_names() -> frozenset[str]:
    """The agent tools installed extensions register: what `piflow check` and the editor add to the
    root tools, as a launch does (a broken extension raises its CONFIG_ERROR, as at launch)."""
    return frozenset(load_extensions().tools)


def check_value(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` is plain JSON matching `schema` (what an extension takes and gives back)."""
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
    if not check_value(output, function.output):
        raise WorkflowError("RESULT_INVALID", f"Invalid output from {function.name}")
    return output


def check_input(function: WorkflowFunction, value: Any) -> None:
    if not isinstance(value, dict) or not check_value(value, function.input):
        raise WorkflowError("RESULT_INVALID", f"Invalid input for {function.name}")


def check_replay(function: WorkflowFunction, value: Any) -> Any:
    if not check_value(value, function.output):
        raise WorkflowError("RESULT_INVALID", f"Invalid replay for {function.name}")
    return value


async def resolve_variables(
    registry: ExtensionRegistry, run: Mapping[str, Any], signal: AbortSignal
) -> dict[str, Any]:
    """Resolve every variable at once for one execution (spec L.4).

    The first failure aborts `signal` (the others stop) and is raised naming its variable.
    """
    import anyio  # here, not at the top: `piflow check` reads the registered tools without it
    values: dict[str, Any] = {}
    failures: list[WorkflowError] = []

    async def resolve(variable: WorkflowVariable) -> None:
        try:
            value = await call_extension(variable.resolve, run)
            if not check_value(value, variable.schema):
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
