"""Short documentation of the workflow primitives and thinking levels, shown by hover and completion.

One table, so the hover text of `agent` and the documentation of its completion snippet never
disagree. The wording follows spec A (what a script author needs; not the host's internals).
Option keys are documented beside the engine's key lists, in `piflow.analysis.option_keys`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from piflow.config.agent_definitions import AgentDefinition


@dataclass(frozen=True)
class Primitive:
    name: str
    signature: str
    summary: str
    snippet: str
    """An LSP snippet (`$1`, `${2:placeholder}`) inserted by completion."""


PRIMITIVES: Final[dict[str, Primitive]] = {
    item.name: item
    for item in (
        Primitive(
            "agent",
            "agent(prompt: string, options?: AgentOptions): Promise<string | any>",
            "Runs one agent and resolves to its final answer (the `outputSchema` value when one is given). "
            "A completed agent is journaled: on resume it returns its recorded value without running again.",
            'await agent("${1:prompt}", { label: "${2:label}" })',
        ),
        Primitive(
            "conversation",
            "conversation(name: string, options?: AgentOptions): { run(prompt, { timeoutMs?, retries? }?) }",
            "A named agent session that keeps its transcript across `run()` turns; each turn is journaled.",
            'const ${1:chat} = conversation("${2:name}", { model: "${3}" });',
        ),
        Primitive(
            "parallel",
            "parallel(name: string, tasks: Record<string, () => Promise<any>>): Promise<Record<string, any>>",
            "Starts every task at once and resolves to their values by task name; the first failure in "
            "record order is rethrown after all have settled.",
            'await parallel("${1:name}", {\n\t${2:task}: () => agent("${3:prompt}"),\n})',
        ),
        Primitive(
            "pipeline",
            "pipeline(name: string, items: Record<string, any>, stages: Record<string, (value) => Promise<any>>)",
            "Runs every item through the stages in order (items concurrently) and resolves to each item's "
            "final value.",
            'await pipeline("${1:name}", { ${2:item}: ${3:value} }, {\n'
            "\t${4:stage}: (value) => agent(`${5:prompt} ${value}`),\n})",
        ),
        Primitive(
            "checkpoint",
            'checkpoint({ name: string, prompt: string, context: any }): Promise<"approved" | "rejected">',
            "Waits for a person to approve or reject (from the editor, `piflow approve`, or any client). "
            "The answer is journaled; a resumed run does not ask again.",
            'await checkpoint({ name: "${1:name}", prompt: "${2:Proceed?}", context: ${3:null} })',
        ),
        Primitive(
            "phase",
            "phase(name: string): Promise<void>",
            "Names the stage the run is in (shown in progress views); waits while the run is paused.",
            'await phase("${1:name}");',
        ),
        Primitive(
            "withWorktree",
            "withWorktree(name?: string, callback: () => Promise<any>): Promise<any>",
            "Runs the agents of the callback in a git worktree of their own (created when the first agent "
            "starts); the same name shares one worktree.",
            'await withWorktree("${1:name}", async () => {\n\t$0\n})',
        ),
        Primitive(
            "log",
            "log(message: string): Promise<void>",
            "Adds a line to the run's log (shown by editors and `piflow show`; never sent to a model).",
            'log("${1:message}");',
        ),
        Primitive(
            "prompt",
            "prompt(template: string, values: object): string",
            "Fills `{name}` placeholders from `values` (strings raw, anything else as JSON); every "
            "placeholder must have a value and every value must be used. `{{` and `}}` are literal braces.",
            'prompt("${1:template {value\\}}", { ${2:value} })',
        ),
    )
}

THINKING_DOCS: Final[dict[str, str]] = {
    "off": "No extended reasoning.",
    "minimal": "The least reasoning the model supports.",
    "low": "Light reasoning.",
    "medium": "Moderate reasoning.",
    "high": "Deep reasoning.",
    "xhigh": "Very deep reasoning, where the model supports it.",
    "max": "The most reasoning the model supports.",
}


def primitive_markdown(primitive: Primitive) -> str:
    return f"```ts\n{primitive.signature}\n```\n\n{primitive.summary}"



# -- pi-subagents (SUBAGENTS_SPEC A.4–A.9) ----------------------------------------------------------


@dataclass(frozen=True)
class Global:
    """A `runs.*` method, `state.get/set` or `emit`: what hover shows and completion inserts."""

    name: str
    signature: str
    summary: str
    snippet: str
    since: str | None = None
    """The pi-subagents version that added it, where the spec names one."""


SUBAGENT_GLOBALS: Final[dict[str, Global]] = {
    item.name: item
    for item in (
        Global(
            "runs.run",
            "runs.run(key: string, params: ChildParams): Promise<ChildResult>",
            "Runs one child agent under a workflow key and resolves to its ChildResult; a failed child rejects "
            "with `Run '<key>' failed: …`. The key is the child's identity: a resumed run returns a completed "
            "child's journaled result without running it again.",
            'await runs.run("${1:key}", { agent: "${2:worker}", task: "${3:task}" })',
        ),
        Global(
            "runs.all",
            "runs.all(items: Array<{ key: string } & ChildParams>): Promise<ChildResult[]>",
            "Validates every item, then launches them together (all or nothing) and resolves to an ordered "
            "array; failed children are collected as `ok: false` entries instead of rejecting the batch.",
            'await runs.all([\n\t{ key: "${1:key}", agent: "${2:worker}", task: "${3:task}" },\n])',
        ),
        Global(
            "runs.lanes",
            "runs.lanes(lanes: Array<{ key: string, stages: Stage[] }>): Promise<LaneBoard>",
            "Bounded parallel chains: the first stage of every lane starts in one batch, then each lane runs "
            "its stages in order (child keys `<lane>.<stage>`). A failed stage or a `verdict: \"blocked\"` "
            "blocks its lane and skips the rest of it. At most 32 lanes, 16 stages each, 64 in total.",
            'await runs.lanes([\n\t{ key: "${1:lane}", stages: [\n\t\t{ key: "${2:stage}", agent: "${3:worker}", '
            'task: "${4:task}" },\n\t] },\n])',
            "0.59",
        ),
        Global(
            "runs.host",
            "runs.host(key: string, params: { kind: \"command\", command: string, timeoutMs: number, "
            "output?, role?, provider? }): Promise<HostResult>",
            "Runs a shell command in the workflow's cwd (no `cwd` of its own); resolves to its exit code and "
            "4 KiB previews of stdout/stderr, rejects with `Host command '<key>' failed: …`. At most 32 per "
            "run; a completed step is journaled and not run again on resume.",
            'await runs.host("${1:key}", { kind: "command", command: "${2:npm test}", timeoutMs: ${3:600000} })',
            "0.59",
        ),
        Global(
            "runs.steer",
            "runs.steer(key: string, message: string, options?: { mode?, index?, ackTimeoutMs? }): "
            "Promise<SteerReceipt>",
            "Sends a message to the running child launched under `key` (never a raw run id); the receipt says "
            "`queued`, `delivered`, `missed` or `failed`. Delivered means the child got it, not that it acted.",
            'await runs.steer("${1:key}", "${2:message}")',
            "0.51",
        ),
        Global(
            "runs.status",
            "runs.status(keyOrRunId: string): Promise<ChildResult>",
            "The result of a child of this workflow by key or run id (`state: \"running\"` while it runs); "
            "rejects with `Status '<x>' failed: …` for an unknown one.",
            'await runs.status("${1:key}")',
        ),
        Global(
            "runs.ref",
            "runs.ref(result: ChildResult): string",
            "Formats a result as `[run <key>; id=<8 chars>]`, for prompts and logs.",
            "runs.ref(${1:result})",
        ),
        Global(
            "runs.refs",
            "runs.refs(results: ChildResult[]): string",
            "`runs.ref` of each result, one per line.",
            "runs.refs(${1:results})",
        ),
        Global(
            "state.get",
            "state.get(key: string): Promise<any>",
            "Reads the mission's state (only in workflows with a mission; without one it fails with "
            "`Workflow state is unavailable without a mission.`).",
            'await state.get("${1:key}")',
        ),
        Global(
            "state.set",
            "state.set(key: string, value: JSON): Promise<void>",
            "Stores a JSON value in the mission's state (256 KiB in total), kept in the run store and replayed "
            "on resume.",
            'await state.set("${1:key}", ${2:value});',
        ),
        Global(
            "emit",
            "emit(value: JSON): void",
            "Records a JSON value in the workflow's emits (shown by `piflow show` and the editor); NaN, "
            "±Infinity and `undefined` are rejected.",
            "emit(${1:value});",
        ),
    )
}


@dataclass(frozen=True)
class Param:
    """One key of a pi-subagents params object: its type, what it does, the version that added it
    and, for enumerated strings, the values it takes."""

    name: str
    type: str
    summary: str
    since: str | None = None
    values: tuple[str, ...] = ()


_CHILD_PARAMS: Final = (
    Param("agent", "string", "The agent definition that runs the child (its prompt, tools, model, thinking). "
          "Required unless `resume` is given."),
    Param("task", "string", "What the child is asked to do; must be non-empty with `resume`."),
    Param("model", "string", "`provider/id[:thinking]`, overriding the agent's model; a `:level` suffix sets "
          "the thinking level."),
    Param("context", "string", "How the child starts: a fresh session, a fork of the parent's, or the "
          "profile's.", values=("fresh", "fork", "profile")),
    Param("cwd", "string", "The child's working directory, relative to the workflow's cwd."),
    Param("output", "string", "Where the child's output is saved (relative: under the managed artifacts)."),
    Param("outputMode", "string", "`inline` returns the output in the result; `file-only` only saves it.",
          values=("inline", "file-only")),
    Param("outputSchema", "JSONSchema", "The child answers with a JSON value matching this schema, returned as "
          "`structuredOutput`."),
    Param("gate", "string", "A host command that must pass after the child; not with `acceptance` or `resume`."),
    Param("acceptance", "object", "Acceptance checks passed through to the child (`acceptance.verify`)."),
    Param("resume", "string | { workflowRunId, key, latest: true }", "Continues a finished child: its run id "
          "(returns a new run id) or a keyed receipt (0.53+). Not with `agent`; needs a `task`."),
    Param("worktree", "boolean", "`true`: the child works in a git worktree of its own."),
    Param("toolBudget", "{ soft?, hard, block? }", "Limits the child's tool calls."),
    Param("toolTimeoutMs", "number", "Timeout of each of the child's tool calls, in milliseconds."),
    Param("timeoutMs", "number", "The child's own timeout, in milliseconds."),
    Param("label", "string", "Display only: how progress views name the child."),
    Param("phase", "string", "Display only: the phase progress views show for the child."),
    Param("skill", "string | string[]", "Skills passed through to the child."),
    Param("reads", "string[]", "Files the child should read first, passed through."),
    Param("progress", "boolean", "Passed through to the child: whether it reports progress."),
    Param("async", "boolean", "`true` returns a receipt at once (`state: \"running\"`, `ok: false`) instead of "
          "waiting for the child."),
    Param("agentContract", "object", "Passed through to the child."),
    Param("intercomBridge", "object", "Passed through to the child."),
    Param("fast", "boolean", "Passed through to the child: prefer a fast mode where the model has one.", "0.56"),
    Param("extensionBindings", "object", "Extension bindings for the child; not with `resume`.", "0.56"),
    Param("lane", "{ version: 1, key, mode?, sourceRef?, claims?, outputPaths? }", "Display only: the child's "
          "lane card; `key` must equal the workflow key, `mode` is mutation, review, scout or gate.", "0.59"),
)
_KEY = Param("key", "string", "The workflow key: 1–128 characters of `[A-Za-z0-9._-]`, starting alphanumeric. "
             "The same key with the same params is the same invocation.")


@dataclass(frozen=True)
class ParamObject:
    """A params object of a `runs.*` call: how hover names its keys and the keys it takes."""

    title: str
    keys: dict[str, Param]


def _params(*params: Param) -> dict[str, Param]:
    return {param.name: param for param in params}


CHILD_PARAMS: Final = ParamObject("runs.run param", _params(*_CHILD_PARAMS))
ALL_ITEM: Final = ParamObject("runs.all item", _params(_KEY, *_CHILD_PARAMS))
LANE: Final = ParamObject("runs.lanes lane", _params(
    Param("key", "string", "The lane key; its stages' child keys are `<lane>.<stage>`."),
    Param("stages", "Stage[]", "The lane's children, run in order; at most 16."),
))
STAGE: Final = ParamObject("runs.lanes stage", _params(
    _KEY,
    *(param for param in _CHILD_PARAMS if param.name != "resume"),
    Param("resume", '"previous"', "Continues the previous stage's child (the only resume form in lanes).",
          values=("previous",)),
))
HOST_PARAMS: Final = ParamObject("runs.host param", _params(
    Param("kind", '"command"', "The only kind of host step.", values=("command",)),
    Param("command", "string", "A shell command (at most 16 KiB, no NUL), run in the workflow's cwd."),
    Param("timeoutMs", "number", "Required: an integer from 1 to 86400000."),
    Param("output", "string", "A relative path (no traversal) where the full log is written (up to 1 MiB)."),
    Param("role", '"ci" | "gate"', "What the step is for, shown with its result.", values=("ci", "gate")),
    Param("provider", "string", "Who runs the command, shown with its result."),
))
STEER_OPTIONS: Final = ParamObject("runs.steer option", _params(
    Param("mode", '"steer" | "follow_up" | "auto"', "`steer` interrupts the child's current turn, `follow_up` "
          "queues the message after it, `auto` lets the host choose.", values=("steer", "follow_up", "auto")),
    Param("index", "number", "Which launch of the key to steer: an integer from 0 to 1000000."),
    Param("ackTimeoutMs", "number", "How long to wait for the child to accept the message (a positive integer)."),
))


def since_text(since: str | None) -> str:
    return f" *(pi-subagents {since}+)*" if since else ""


def global_markdown(item: Global) -> str:
    return f"```ts\n{item.signature}\n```\n\n{item.summary}{since_text(item.since)}"


def param_markdown(owner: ParamObject, name: str) -> str:
    param = owner.keys[name]
    values = ", ".join(f"`{value}`" for value in param.values)
    extra = f"\n\nValues: {values}" if values else ""
    return f"**{owner.title} `{name}`**: `{param.type}`{since_text(param.since)}\n\n{param.summary}{extra}"


def agent_markdown(agent: AgentDefinition) -> str:
    """An agent definition as hover and completion show it: what it is, its model, tools and file."""
    lines = [f"**agent `{agent.name}`**" + (f" — {agent.description}" if agent.description else "")]
    model = agent.model or "inherit"
    thinking = f" (thinking {agent.thinking})" if agent.thinking else ""
    tools = ", ".join(f"`{tool}`" for tool in agent.tools) if agent.tools is not None else "the default tools"
    lines.append(f"model: `{model}`{thinking} · tools: {tools}")
    where = f"{agent.source} agent"
    if agent.path is not None:
        where += f" · [{agent.path.name}]({agent.path.as_uri()})"
    lines.append(where)
    return "\n\n".join(lines)


def _check_documented() -> None:
    """The host fields and steer options documented here are the ones the analysis checks."""
    from piflow.analysis.dialects.subagents import HOST_FIELDS, STEER_FIELDS

    for owner, keys in ((HOST_PARAMS, HOST_FIELDS), (STEER_OPTIONS, STEER_FIELDS)):
        if tuple(owner.keys) != tuple(keys):
            raise RuntimeError(f"{owner.title} docs {sorted(owner.keys)} do not match the analysis's {sorted(keys)}")


_check_documented()
