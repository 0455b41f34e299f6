"""What an installed extension registers, as piflow holds it: workflow functions and variables for
scripts (spec L.3, L.4) and tools for agents.

Apart from the registry (`extensions.py`), which every launch and resume loads, because only an
installed extension makes these: without one a process never defines them (issue 15).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from piflow.engine.extensions import check_value
from piflow.jsvalues import is_plain_json

if TYPE_CHECKING:
    from piflow.engine.functions import FunctionContext
    from piflow.engine.tools.arguments import Arguments
    from piflow.engine.tools.registry import Tool, ToolCallContext

Runner = Callable[[Any, "FunctionContext"], Any]
Resolver = Callable[[Mapping[str, Any]], Any]
"""A variable's `resolve(run)`: the run's facts (`cwd`, `runId`, `workflow`, `args`, `signal`)."""


@dataclass(frozen=True)
class WorkflowFunction:
    """A function an extension registered for scripts to call (spec L.3): its schemas and runner."""

    name: str
    description: str
    input: dict[str, Any]
    output: dict[str, Any]
    run: Runner
    extension: str


@dataclass(frozen=True)
class ToolContext:
    """What an extension tool's `run(input, context)` gets besides its input.

    `cwd` is the calling agent's working directory (its worktree when it has one): the process's
    own directory is shared by every agent, so a tool resolves its paths against `cwd`.
    """

    cwd: str
    timeout_ms: int | None


ToolRunner = Callable[[dict[str, Any], ToolContext], Any]


@dataclass(frozen=True)
class ExtensionTool:
    """A tool an extension gives agents: the model sees `description` and `input`, piflow runs `run`.

    A call happens inside an agent attempt, so it is recorded in the attempt's transcript (like
    `bash`), not in the run journal: a completed attempt is never re-run, and an interrupted one
    starts over, tool calls included.
    """

    name: str
    description: str
    input: dict[str, Any]
    run: ToolRunner
    extension: str

    def agent_tool(self) -> Tool:
        """This tool for the tool runtime of non-pi backends."""
        from piflow.engine.tools.registry import Tool

        return Tool(self.name, self.description, self.input, self._call, lambda _args: self.name)

    async def _call(self, context: ToolCallContext, args: Arguments) -> str:
        """One call: input checked against the schema, a time limit, every failure a tool error."""
        import anyio

        from piflow.engine.tools.confinement import ToolError

        if not check_value(args.values, self.input):
            raise ToolError(f"Invalid input for {self.name}: it must match the tool's input schema")
        value, limit = json.loads(json.dumps(args.values)), context.timeout_ms
        tool_context = ToolContext(str(context.workspace.root), limit)
        try:
            with anyio.fail_after(None if limit is None else limit / 1000):
                if inspect.iscoroutinefunction(self.run):
                    output = await self.run(value, tool_context)
                else:  # plain code runs on a thread: a slow tool never stalls the run's other agents
                    output = await anyio.to_thread.run_sync(self.run, value, tool_context, abandon_on_cancel=True)
                    output = await output if inspect.isawaitable(output) else output
        except TimeoutError:
            raise ToolError(f"Tool '{self.name}' exceeded its timeout of {limit}ms.") from None
        except ToolError:
            raise
        except Exception as exc:  # an extension bug is the model's tool error, with the extension's message
            raise ToolError(f"{self.name} failed: {str(exc) or type(exc).__name__}") from None
        return _tool_text(self.name, output)


def _tool_text(name: str, output: Any) -> str:
    """A tool's reply as the model reads it: text as is, JSON values serialized, capped as pi caps."""
    from piflow.engine.tools.confinement import ToolError
    from piflow.engine.tools.output import MAX_BYTES, MAX_LINES, head, size

    if isinstance(output, str):
        text = output
    elif is_plain_json(output):
        text = json.dumps(output, ensure_ascii=False)
    else:
        raise ToolError(f"{name} returned a value that is not JSON")
    capped = head(text.split("\n"))
    if not capped.truncated:
        return text
    cap = f"{size(MAX_BYTES)} limit" if capped.by_bytes else f"{MAX_LINES} lines limit"
    return "\n".join(capped.lines) + f"\n\n[Showing {len(capped.lines)} of {capped.total} lines ({cap}).]"


@dataclass(frozen=True)
class WorkflowVariable:
    """A variable an extension registered, resolved for each execution of a script (spec L.4)."""

    name: str
    description: str
    schema: dict[str, Any]
    resolve: Resolver
    extension: str
