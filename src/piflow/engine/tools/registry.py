"""The tools an agent on a non-pi backend may call: their JSON schemas, and one call's execution.

`BUILTIN_TOOLS` are pi's seven built-ins with pi's parameters, so a prompt written for pi works
unchanged. A `ToolRuntime` holds exactly the tools one attempt is allowed (its `tools`, already
filtered by options, role and policy), confined to the attempt's working directory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio

from piflow.engine.tools import bash as bash_tool
from piflow.engine.tools import files
from piflow.engine.tools.arguments import Arguments
from piflow.engine.tools.confinement import ToolError, Workspace
from piflow.engine.tools.output import MAX_BYTES, MAX_LINES

ToolRun = Callable[["ToolCallContext", Arguments], Awaitable[str]]


@dataclass(frozen=True)
class ToolCallContext:
    """What one call may use: the confined workspace and the per-call time limit."""

    workspace: Workspace
    timeout_ms: int | None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    summary: Callable[[Arguments], str]
    """The activity line shown while the call runs (`read src/x.py`, `bash: pytest -q`)."""

    def definition(self) -> dict[str, Any]:
        """The chat-completions `tools[]` entry the model sees."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool


def _schema(required: Sequence[str], **properties: tuple[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind, "description": text} for name, (kind, text) in properties.items()},
        "required": list(required),
    }


def _on_thread(function: Callable[[Workspace, Arguments], str]) -> ToolRun:
    async def run(context: ToolCallContext, args: Arguments) -> str:
        return await anyio.to_thread.run_sync(function, context.workspace, args, abandon_on_cancel=True)

    return run


async def _bash(context: ToolCallContext, args: Arguments) -> str:
    return await bash_tool.bash(context.workspace, args, context.timeout_ms)


def _about(args: Arguments, *names: str) -> str:
    parts = [value for name in names if isinstance(value := args.values.get(name), str) and value]
    return " ".join(parts)


def _line(prefix: str, text: str) -> str:
    text = " ".join(text.split())
    return f"{prefix}{text[:77]}..." if len(text) > 80 else f"{prefix}{text}"


_CAPS: Final = f"{MAX_LINES} lines or {MAX_BYTES // 1024}KB (whichever is hit first)"
_EDITS: Final = {
    "type": "array",
    "description": "One or more targeted replacements, each matched against the original file.",
    "items": {
        "type": "object",
        "properties": {
            "oldText": {"type": "string", "description": "Exact text to replace; must be unique in the file."},
            "newText": {"type": "string", "description": "Replacement text."},
        },
        "required": ["oldText", "newText"],
    },
}

BUILTIN_TOOLS: Final[Mapping[str, Tool]] = {
    tool.name: tool
    for tool in (
        Tool(
            "read",
            f"Read a text file, with line numbers. Output is truncated to {_CAPS}; use offset/limit for "
            "large files and continue with offset until complete.",
            _schema(["path"], path=("string", "Path to the file (relative to the working directory)"),
                    offset=("integer", "Line number to start reading from (1-indexed)"),
                    limit=("integer", "Maximum number of lines to read")),
            _on_thread(files.read),
            lambda args: _line("read ", _about(args, "path")),
        ),
        Tool(
            "bash",
            f"Execute a bash command in the working directory. Returns stdout and stderr; output is truncated "
            f"to the last {_CAPS}. Optionally provide a timeout in seconds.",
            _schema(["command"], command=("string", "Bash command to execute"),
                    timeout=("integer", "Timeout in seconds (optional)")),
            _bash,
            lambda args: _line("bash: ", _about(args, "command")),
        ),
        Tool(
            "edit",
            "Edit a file by exact text replacement. Every edits[].oldText must match a unique, non-overlapping "
            "region of the original file, including all whitespace and newlines.",
            {"type": "object",
             "properties": {"path": {"type": "string", "description": "Path to the file to edit"}, "edits": _EDITS},
             "required": ["path", "edits"]},
            _on_thread(files.edit),
            lambda args: _line("edit ", _about(args, "path")),
        ),
        Tool(
            "write",
            "Write content to a file. Creates the file if it doesn't exist, overwrites it if it does, and "
            "creates parent directories.",
            _schema(["path", "content"], path=("string", "Path to the file to write"),
                    content=("string", "Content to write to the file")),
            _on_thread(files.write),
            lambda args: _line("write ", _about(args, "path")),
        ),
        Tool(
            "grep",
            "Search file contents for a pattern. Returns matching lines with file paths and line numbers. "
            f"Respects .gitignore. Output is truncated to {files.GREP_LIMIT} matches or {MAX_BYTES // 1024}KB.",
            _schema(["pattern"], pattern=("string", "Search pattern (regex or literal string)"),
                    path=("string", "Directory or file to search (default: the working directory)"),
                    glob=("string", "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"),
                    ignoreCase=("boolean", "Case-insensitive search (default: false)"),
                    literal=("boolean", "Treat pattern as a literal string instead of a regex (default: false)"),
                    context=("integer", "Lines to show before and after each match (default: 0)"),
                    limit=("integer", f"Maximum number of matches to return (default: {files.GREP_LIMIT})")),
            _on_thread(files.grep),
            lambda args: _line("grep ", _about(args, "pattern", "path")),
        ),
        Tool(
            "find",
            "Search for files by glob pattern. Returns paths relative to the search directory. Respects "
            f".gitignore. Output is truncated to {files.FIND_LIMIT} results or {MAX_BYTES // 1024}KB.",
            _schema(["pattern"], pattern=("string", "Glob pattern, e.g. '*.ts', '**/*.json' or 'src/**/*.spec.ts'"),
                    path=("string", "Directory to search in (default: the working directory)"),
                    limit=("integer", f"Maximum number of results (default: {files.FIND_LIMIT})")),
            _on_thread(files.find),
            lambda args: _line("find ", _about(args, "pattern", "path")),
        ),
        Tool(
            "ls",
            "List directory contents, sorted alphabetically, with '/' after directories; includes dotfiles. "
            f"Output is truncated to {files.LS_LIMIT} entries or {MAX_BYTES // 1024}KB.",
            _schema([], path=("string", "Directory to list (default: the working directory)"),
                    limit=("integer", f"Maximum number of entries to return (default: {files.LS_LIMIT})")),
            _on_thread(files.ls),
            lambda args: _line("ls ", _about(args, "path") or "."),
        ),
    )
}

BUILTIN_TOOL_NAMES: Final = tuple(BUILTIN_TOOLS)


class ChildAgents(Protocol):
    """What the engine offers an attempt whose tools include `agent` (spec J.5).

    Failures are WorkflowErrors: `child_agent_tools` answers them to the model as tool errors,
    except BUDGET_EXHAUSTED, which ends the attempt.
    """

    async def spawn(self, params: Any) -> str:
        """Start a direct child from the `agent` tool's parameters; its id."""

    async def result(self, child_id: Any) -> dict[str, Any]:
        """Wait for a direct child; `{id, ok, value|error}`."""

    async def steer(self, child_id: Any, message: Any) -> None:
        """Deliver `message` to a direct child that is still running."""


CHILD_AGENT_TOOL: Final = "agent"
CHILD_TOOL_NAMES: Final = (CHILD_AGENT_TOOL, "get_subagent_result", "steer_subagent")
_CHILD_PARAMETERS: Final = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "The child's task"},
        "label": {"type": "string", "description": "A short, unique name for the child"},
        "tools": {"type": "array", "items": {"type": "string"},
                  "description": "The child's tools (a subset of yours; default: yours)"},
        "model": {"type": "string", "description": "Model id or alias (default: the launching model)"},
        "thinking": {"type": "string", "description": "Thinking level"},
        "role": {"type": "string", "description": "A workflow role (not with model, thinking or tools)"},
        "outputSchema": {"type": "object", "description": "JSON Schema the child's result must match"},
        "retries": {"type": "integer", "description": "Extra attempts after a failure (default 0)"},
        "timeoutMs": {"type": "integer", "description": "Time limit of each attempt in milliseconds"},
    },
    "required": ["prompt", "label"],
}


def child_agent_tools(children: ChildAgents) -> dict[str, Tool]:
    """The three child-agent tools of spec J.5, served by the engine's `children`."""
    from piflow.errors import WorkflowError, format_workflow_failure

    async def answer(call: Awaitable[str]) -> str:
        try:
            return await call
        except WorkflowError as error:
            if error.code == "BUDGET_EXHAUSTED":
                raise
            raise ToolError(format_workflow_failure(error)) from None

    async def spawn(_context: ToolCallContext, args: Arguments) -> str:
        async def run() -> str:
            return json.dumps({"id": await children.spawn(dict(args.values))})
        return await answer(run())

    async def result(_context: ToolCallContext, args: Arguments) -> str:
        async def run() -> str:
            return json.dumps(await children.result(args.values.get("id")))
        return await answer(run())

    async def steer(_context: ToolCallContext, args: Arguments) -> str:
        async def run() -> str:
            await children.steer(args.values.get("id"), args.values.get("message"))
            return "Steering delivered."
        return await answer(run())

    return {
        tool.name: tool
        for tool in (
            Tool(CHILD_AGENT_TOOL, "Start a child agent on a sub-task; returns its id. Collect its result with "
                 "get_subagent_result before you answer.", _CHILD_PARAMETERS, spawn,
                 lambda args: _line("agent ", _about(args, "label"))),
            Tool("get_subagent_result", "Wait for one of your child agents and return {id, ok, value|error}.",
                 _schema(["id"], id=("string", "The id the agent tool returned")), result,
                 lambda args: _line("waiting for ", _about(args, "id"))),
            Tool("steer_subagent", "Send a message to one of your running child agents.",
                 _schema(["id", "message"], id=("string", "The child's id"),
                         message=("string", "What to tell the child")), steer,
                 lambda args: _line("steer ", _about(args, "id"))),
        )
    }


class ToolRuntime:
    """The tools of one attempt, confined to its working directory."""

    def __init__(self, tools: Sequence[Tool], cwd: str, timeout_ms: int | None) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self._cwd = cwd
        self._timeout_ms = timeout_ms

    @classmethod
    def for_names(
        cls, names: Sequence[str], cwd: str, timeout_ms: int | None, extra: Mapping[str, Tool] | None = None
    ) -> ToolRuntime:
        """The runtime offering `names` (in that order, once each); names no runtime serves are left out."""
        known = {**BUILTIN_TOOLS, **(extra or {})}
        chosen = [known[name] for name in dict.fromkeys(names) if name in known]
        return cls(chosen, cwd, timeout_ms)

    def definitions(self) -> list[dict[str, Any]]:
        return [tool.definition() for tool in self.tools.values()]

    def summary(self, name: str, arguments: str) -> str:
        """The activity line of a call (the bare tool name when its arguments do not parse)."""
        tool = self.tools.get(name)
        if tool is None:
            return name
        try:
            return tool.summary(Arguments.parse(name, arguments)) or name
        except ToolError:
            return name

    async def call(self, name: str, arguments: str) -> ToolResult:
        """Run one call; every failure is a tool error the model reads, never an exception."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"Tool {name} not found", True)
        try:
            args = Arguments.parse(name, arguments)
            workspace = Workspace.at(self._cwd)
            return ToolResult(await tool.run(ToolCallContext(workspace, self._timeout_ms), args), False)
        except ToolError as error:
            return ToolResult(str(error), True)
