"""The tool runtime of non-pi backends: pi's built-in tools, confined to the agent's working directory."""

from piflow.engine.tools.confinement import ToolError, Workspace
from piflow.engine.tools.registry import (
    BUILTIN_TOOL_NAMES,
    BUILTIN_TOOLS,
    Tool,
    ToolCallContext,
    ToolResult,
    ToolRuntime,
)

__all__ = [
    "BUILTIN_TOOLS",
    "BUILTIN_TOOL_NAMES",
    "Tool",
    "ToolCallContext",
    "ToolError",
    "ToolResult",
    "ToolRuntime",
    "Workspace",
]
