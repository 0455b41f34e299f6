"""The tools an agent on a non-pi backend may call: their JSON schemas, and one call's execution.

`BUILTIN_TOOLS` are pi's seven built-ins with pi's parameters, so a prompt written for pi works
unchanged. A `ToolRuntime` holds exactly the tools one attempt is allowed (its `tools`, already
filtered by options, role and policy), confined to the attempt's working directory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

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
