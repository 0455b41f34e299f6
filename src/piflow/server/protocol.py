"""The `piflow/*` LSP extension, written once: every command and notification as a pydantic model.

Editors (the VS Code extension, the Neovim plugin, anyone's client) program against these
shapes, so they are defined here and nowhere else: the server validates command arguments with
them and serialises every notification through them; `schemas/protocol/*.json` and the reference
half of `docs/protocol.md` are generated from them (`python -m piflow.server.protocol`), and a
test fails when either drifts (rust-analyzer keeps `lsp-extensions.md` the same way).

Wire conventions: camelCase keys; a field documented as optional is absent, not null, when it
does not apply (models are dumped with `exclude_unset`), while a required nullable field (such as
`phase`) is always present.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# -- base models ------------------------------------------------------------------------------


class Message(BaseModel):
    """Something the server sends: extra keys are ignored so a newer engine cannot break a client."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", use_attribute_docstrings=True
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON object sent on the wire (optional fields that were never set are left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Arguments(BaseModel):
    """Something a client sends: unknown keys are rejected, so a typo is an error, not a no-op."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", use_attribute_docstrings=True
    )


# -- shared shapes ----------------------------------------------------------------------------


class ErrorInfo(Message):
    """A workflow error: one of the spec's codes (`UNKNOWN_MODEL`, `CANCELLED`, ...) and its message."""

    code: str
    message: str
    authored: bool = False
    """True when the script's author wrote `message` (`throw new Error("…")`): show it as written,
    without the code; absent otherwise."""


class BudgetLimit(Message):
    """Limits of one budget dimension; either may be absent."""

    soft: int | float | None = None
    hard: int | float | None = None


class BudgetUsage(Message):
    """What a run has consumed so far, per budget dimension (spec H)."""

    tokens: int | float = 0
    cost_usd: int | float = 0
    duration_ms: int | float = 0
    agent_launches: int | float = 0


class BudgetEvent(Message):
    """A budget event (`soft_crossed`, `hard_overrun`, `hard_exhausted`, `adjustment_*`)."""

    model_config = ConfigDict(extra="allow")

    type: str
    budget_version: int
    dimensions: list[str] = Field(default_factory=list)


class Budget(Message):
    """A run's budget gauge: limits by dimension (`tokens`, `costUsd`, `durationMs`, `agentLaunches`)."""

    limits: dict[str, BudgetLimit]
    usage: BudgetUsage
    events: list[BudgetEvent]


class AgentProgress(Message):
    """One agent of a run as the progress view shows it."""

    id: str
    label: str
    role: str | None
    model: str | None
    state: str
    attempts: int
    tokens: int
    cost_usd: float
    activity: str | None
    parent_id: str | None = None
    """The agent that started this one as its child (spec J.5); null for a script's agent."""


class AwaitingCheckpoint(Message):
    """A `checkpoint()` the run is waiting on; answer it with `piflow.respond {runId, name}`."""

    name: str
    prompt: str
    context: Any


class AgentCounts(Message):
    """How many agents a run has, and how many have settled (completed, failed or cancelled)."""

    total: int
    settled: int


# -- notifications (server → client, only after opting in) ------------------------------------


class RunStarted(Message):
    """A run of a script started (from this editor, another editor or a terminal)."""

    run_id: str
    uri: str | None
    workflow_name: str


class RunProgress(Message):
    """What changed in a run: its small fields whole, its agents only when they changed (coalesced
    within ~100 ms per run). `piflow.showRun` fetches the full snapshot on demand."""

    run_id: str
    uri: str | None
    workflow_name: str
    state: str
    phase: str | None
    agent_counts: AgentCounts
    """How many agents the whole run has, and how many have settled."""
    agents: list[AgentProgress]
    """The agents whose progress changed since the previous `piflow/runProgress` of this run to this
    client; every agent of the run when `reset` is true."""
    reset: bool = True
    """True: `agents` is every agent of the run (replace the run's list: the first progress of a run
    a client gets, or a resync). False: a delta (upsert by agent `id`). Missing means true."""
    budget: Budget
    checkpoints: list[AwaitingCheckpoint]
    lanes: list[LaneBoard] = []
    """A pi-subagents run's lane boards (one per `runs.lanes` call, each as it last changed), whole,
    in every progress once one exists; absent for other runs. `piflow.showRun` has them too."""


class CheckpointRequest(Message):
    """A run waits for an answer to `checkpoint({name, prompt, context})`."""

    run_id: str
    uri: str | None
    name: str
    prompt: str
    context: Any


class BudgetApproval(Message):
    """A raised budget waits for approval; answer with `piflow.respond {runId, proposalId, approved}`."""

    run_id: str
    proposal_id: str
    consumed: BudgetUsage
    previous: dict[str, BudgetLimit]
    proposed: dict[str, BudgetLimit]


class RunFinished(Message):
    """A run reached a final state; `result` is present when it completed, `error` when it failed."""

    run_id: str
    uri: str | None
    state: str
    result: Any = None
    error: ErrorInfo | None = None


class RunLog(Message):
    """A `log(message)` line of a script, or a notice from the engine about a run."""

    run_id: str
    message: str


# -- commands (client → server, `workspace/executeCommand` with one JSON object argument) -------


class RunArguments(Arguments):
    """Launch the script open at `uri` (its unsaved text is what runs)."""

    uri: str
    args: Any = None
    budget: dict[str, Any] | None = None
    concurrency: int | None = None
    backend: str | None = None
    fixtures: str | None = None


class RunResult(Message):
    run_id: str


class UriArguments(Arguments):
    uri: str


class Asked(Message):
    """The question went to the user; what follows depends on the answer (a run starts, or nothing)."""

    asked: bool


class ProblemSummary(Message):
    code: str
    message: str
    line: int


class Problems(Message):
    """The error findings that keep a script from running (also shown with `window/showMessage`)."""

    errors: list[ProblemSummary]


class ResumeArguments(Arguments):
    """Resume a paused, interrupted or budget-exhausted run, optionally with a budget patch."""

    run_id: str
    budget: dict[str, Any] | None = None


class ResumeResult(Message):
    """`proposalId` and `message` are present when a raised budget first needs approval."""

    run_id: str
    state: str
    proposal_id: str | None = None
    message: str | None = None


class RunIdArguments(Arguments):
    run_id: str


class PauseResult(Message):
    run_id: str
    state: str


class StopResult(Message):
    """`reason` says why nothing was stopped (`unknown_run`, `already_terminal`)."""

    run_id: str
    state: str
    stopped: bool
    reason: str | None = None


class RespondArguments(Arguments):
    """Answer a checkpoint by its label (`ship`, `ship#2`) or a budget proposal by its id."""

    run_id: str
    name: str | None = None
    proposal_id: str | None = None
    approved: bool


class RespondResult(Message):
    """`accepted` is present for checkpoints; `reason` is `checkpoint`, `approved`, `rejected` or why not."""

    state: str
    approved: bool
    reason: str
    accepted: bool | None = None


class ListRunsArguments(Arguments):
    """Runs of one script (`uri`), or of every project open in the editor."""

    uri: str | None = None


class RunSummary(Message):
    run_id: str
    uri: str | None
    workflow_name: str
    state: str
    phase: str | None
    agents: AgentCounts
    cost_usd: int | float
    tokens: int | float
    created_at: float
    updated_at: float


class ListRunsResult(Message):
    """Runs ordered by attention: awaiting input first, completed last."""

    runs: list[RunSummary]


class DisabledResources(Message):
    """`disabledAgentResources` an attempt ran under: skill names and extension paths (spec D)."""

    skills: list[str]
    extensions: list[str]


class AttemptSetup(Message):
    """What an attempt ran with, for audit (spec J.3 `setup`)."""

    hook_names: list[str]
    """The extension setup hooks that ran before it, in order."""
    model: str | None
    thinking: str | None
    tools: list[str]
    cwd: str | None
    system_prompt: str | None = None
    """The effective system prompt: the backend's own part, the role body and hook appends."""
    system_prompt_sha256: str | None = None
    disabled_agent_resources: DisabledResources | None = None
    """The resource policy applied, when one was (settings and the role's)."""


class AttemptDetail(Message):
    """One attempt of an agent; `state` is `running`, `completed`, `failed` or `cancelled`."""

    number: int
    state: str
    tokens: int
    cost_usd: float
    error: ErrorInfo | None = None
    """Why the attempt failed, when it did."""
    transcript_path: str | None = None
    """The attempt's transcript file, when its backend keeps one (the pi backend does)."""
    setup: AttemptSetup | None = None
    """What the attempt ran with; absent for attempts recorded before piflow kept it."""


class AgentDetail(Message):
    """One agent of a run with what it answered or why it failed."""

    model_config = ConfigDict(extra="allow")

    id: str
    label: str
    role: str | None
    model: str | None
    state: str
    attempts: int
    tokens: int
    cost_usd: float
    activity: str | None
    journal_path: str | None = None
    parent_id: str | None = None
    """The agent that started this one as its child (spec J.5); null for a script's agent."""
    error: ErrorInfo | None = None
    output_preview: str | None
    """One line of at most 200 characters (a string output itself, anything else as JSON), ending in
    `…` when cut; null while the agent has no output."""
    output: Any = None
    """The full output: present when its JSON is at most 64 KiB (always, from `piflow.showAgent`)."""
    output_truncated: bool
    """True when `output` was left out for size: ask `piflow.showAgent` for it."""
    transcript_path: str | None
    """The latest attempt's transcript file, if any."""
    attempt_list: list[AttemptDetail]


class AgentIdArguments(Arguments):
    """One agent of a run: `agentId` is an `AgentDetail.id` (a run id prefix of 8+ characters will do)."""

    run_id: str
    agent_id: str


class CheckpointDetail(Message):
    name: str
    prompt: str
    context: Any
    state: str


class BudgetDetail(Budget):
    version: int


class ChildDetail(Message):
    """A child of a pi-subagents run: `runId` is the child's own run id (what `runs.ref` shows);
    `outputReference` is the file its output was saved to, once it completed."""

    key: str
    agent: str
    state: str
    run_id: str | None
    model: str | None
    tokens: int
    cost_usd: float
    output_reference: str | None
    error: str | None


class HostStepDetail(Message):
    """A `runs.host` step: running, passed, failed, timed-out, stopped or interrupted; `outputPath` is its log."""

    key: str
    command: str | None
    state: str
    exit_code: int | None
    duration_ms: int | None
    output_path: str | None
    error: str | None


class LaneStageDetail(Message):
    """pending, running, completed, blocked, failed, stopped, detached or skipped."""

    key: str
    state: str
    verdict: str | None
    error: str | None
    run_id: str | None


class LaneDetail(Message):
    key: str
    state: str
    """running, complete or blocked."""
    failed_stage: str | None
    stages: list[LaneStageDetail]


class LaneBoard(Message):
    """The board of the script's `call`-th `runs.lanes`, as it last changed."""

    call: int
    lanes: list[LaneDetail]


class ConsoleLine(Message):
    level: str
    message: str


class SubagentsDetail(Message):
    """What a pi-subagents run did besides its agents: children, host steps, lane boards, emits, console."""

    children: list[ChildDetail]
    host_steps: list[HostStepDetail]
    lanes: list[LaneBoard]
    emits: list[Any]
    console: list[ConsoleLine]


class RunSnapshot(Message):
    """Everything about one run; engine fields not listed here are passed through unchanged."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    uri: str | None
    workflow_name: str
    state: str
    phase: str | None
    agents: AgentCounts
    agent_list: list[AgentDetail]
    budget: BudgetDetail
    checkpoints: list[CheckpointDetail]
    cost_usd: int | float
    tokens: int | float
    error: ErrorInfo | None = None
    result: Any = None
    subagents: SubagentsDetail | None = None
    """Present for a pi-subagents run with children, host steps, lanes, emits or console lines."""


# -- initialization ---------------------------------------------------------------------------


class ClientOptions(Arguments):
    """What a client asks of piflow in `initializationOptions.piflow`."""

    model_config = ConfigDict(extra="ignore")

    custom_notifications: bool = False
    """Send the `piflow/*` notifications (a plugin shows them); otherwise standard LSP messages only."""
    debounce_ms: int = Field(default=0, ge=0, le=5000)
    """Wait this long after the last edit before checking a script (0: check at once, coalescing bursts)."""


class InitializationOptions(Arguments):
    model_config = ConfigDict(extra="ignore")

    piflow: ClientOptions = Field(default_factory=ClientOptions)


# -- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A `workspace/executeCommand` command: its one argument object and its result."""

    name: str
    arguments: type[Arguments]
    result: type[Message]
    summary: str


@dataclass(frozen=True)
class Notification:
    """A server → client notification."""

    method: str
    params: type[Message]
    summary: str


COMMANDS: Final[tuple[Command, ...]] = (
    Command("piflow.run", RunArguments, RunResult, "Launch a script; progress follows as notifications."),
    Command(
        "piflow.runWithArgs",
        UriArguments,
        Asked,
        "The `▶ Run with args…` lens. Plugins handle it themselves (prompt for JSON, then `piflow.run`); "
        "sent to the server, it offers the args of `<script>.args.json` and of recent runs with "
        "`window/showMessageRequest`.",
    ),
    Command(
        "piflow.showErrors",
        UriArguments,
        Problems,
        "The disabled `▶ Run (fix N errors first)` lens: lists the errors that block the run.",
    ),
    Command("piflow.resume", ResumeArguments, ResumeResult, "Resume a paused, interrupted or budget-exhausted run."),
    Command("piflow.pause", RunIdArguments, PauseResult, "Pause a running run (running agents finish first)."),
    Command("piflow.stop", RunIdArguments, StopResult, "Stop a run for good."),
    Command("piflow.respond", RespondArguments, RespondResult, "Approve or reject a checkpoint or budget proposal."),
    Command("piflow.listRuns", ListRunsArguments, ListRunsResult, "List runs of a script or of the workspace."),
    Command(
        "piflow.showRun",
        RunIdArguments,
        RunSnapshot,
        "Everything about one run, each agent with its output (up to 64 KiB), attempts and transcript.",
    ),
    Command("piflow.showAgent", AgentIdArguments, AgentDetail, "One agent of a run with its full output."),
)

NOTIFICATIONS: Final[tuple[Notification, ...]] = (
    Notification("piflow/runStarted", RunStarted, "A run started."),
    Notification("piflow/runProgress", RunProgress, "What changed in a run (coalesced ~100 ms per run)."),
    Notification("piflow/checkpoint", CheckpointRequest, "A run waits for a checkpoint answer."),
    Notification("piflow/budgetApproval", BudgetApproval, "A budget raise waits for approval."),
    Notification("piflow/runFinished", RunFinished, "A run reached a final state."),
    Notification("piflow/log", RunLog, "A script's `log()` line or an engine notice."),
)

COMMAND_ERROR_CODE: Final = -32803
"""LSP `RequestFailed`: a command failed with a workflow error; `data` is an `ErrorInfo`."""


# -- generation -------------------------------------------------------------------------------


def _without_field_titles(node: Any) -> Any:
    """Drop pydantic's generated field titles (`"Runid"`): the keys say it better."""
    if isinstance(node, dict):
        properties = node.get("properties")
        cleaned = {key: _without_field_titles(value) for key, value in node.items()}
        if isinstance(properties, dict):
            cleaned["properties"] = {
                key: {k: v for k, v in _without_field_titles(value).items() if k != "title"}
                for key, value in properties.items()
            }
        return cleaned
    if isinstance(node, list):
        return [_without_field_titles(item) for item in node]
    return node


def _schema(model: type[BaseModel], title: str) -> dict[str, Any]:
    schema: dict[str, Any] = _without_field_titles(model.model_json_schema(by_alias=True, mode="serialization"))
    schema["title"] = title
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def schema_files() -> dict[str, str]:
    """Every file of `schemas/protocol/`, by name, as it must read."""
    files: dict[str, dict[str, Any]] = {
        "initializationOptions.json": _schema(InitializationOptions, "initializationOptions"),
    }
    for command in COMMANDS:
        files[f"command.{command.name}.arguments.json"] = _schema(command.arguments, f"{command.name} arguments")
        files[f"command.{command.name}.result.json"] = _schema(command.result, f"{command.name} result")
    for notification in NOTIFICATIONS:
        files[f"notification.{notification.method.replace('/', '.')}.json"] = _schema(
            notification.params, notification.method
        )
    return {name: json.dumps(schema, indent=2, sort_keys=True) + "\n" for name, schema in files.items()}


def _fields_table(model: type[BaseModel]) -> list[str]:
    schema = model.model_json_schema(by_alias=True, mode="serialization")
    required = set(schema.get("required", ()))
    rows = ["| field | type | | |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        prop = schema.get("properties", {}).get(key, {})
        presence = "required" if key in required else "optional"
        about = (field.description or "").replace("\n", " ")
        rows.append(f"| `{key}` | {_type_text(prop)} | {presence} | {about} |")
    return rows


def _type_text(prop: dict[str, Any] | bool) -> str:
    if not isinstance(prop, dict):
        return "any JSON"
    if "$ref" in prop:
        return f"`{prop['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in prop:
        return " or ".join(_type_text(option) for option in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"array of {_type_text(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        return f"object of {_type_text(prop['additionalProperties'])}"
    return f"`{kind}`" if kind else "any JSON"


REFERENCE_BEGIN: Final = "<!-- BEGIN GENERATED REFERENCE (python -m piflow.server.protocol) -->"
REFERENCE_END: Final = "<!-- END GENERATED REFERENCE -->"


def reference_markdown() -> str:
    """The generated reference half of `docs/protocol.md`: every command and notification."""
    lines = [REFERENCE_BEGIN, "", "### Commands", ""]
    for command in COMMANDS:
        lines += [
            f"#### `{command.name}`",
            "",
            command.summary,
            "",
            f"Argument (`{command.arguments.__name__}`, "
            f"schema `schemas/protocol/command.{command.name}.arguments.json`):",
            "",
            *_fields_table(command.arguments),
            "",
            f"Result (`{command.result.__name__}`, schema `schemas/protocol/command.{command.name}.result.json`):",
            "",
            *_fields_table(command.result),
            "",
        ]
    lines += ["### Notifications", ""]
    for notification in NOTIFICATIONS:
        schema_name = notification.method.replace("/", ".")
        lines += [
            f"#### `{notification.method}`",
            "",
            notification.summary,
            "",
            f"Params (`{notification.params.__name__}`, schema `schemas/protocol/notification.{schema_name}.json`):",
            "",
            *_fields_table(notification.params),
            "",
        ]
    lines += ["### Shared shapes", ""]
    for model in (ErrorInfo, AgentProgress, AgentCounts, AwaitingCheckpoint, Budget, BudgetLimit, BudgetUsage,
                  BudgetEvent, RunSummary, AgentDetail, AttemptDetail, AttemptSetup, DisabledResources,
                  CheckpointDetail, BudgetDetail, ClientOptions):
        lines += [f"#### `{model.__name__}`", "", (model.__doc__ or "").strip(), "", *_fields_table(model), ""]
    lines.append(REFERENCE_END)
    return "\n".join(lines) + "\n"


def render_document(current: str) -> str:
    """`docs/protocol.md` with its generated reference replaced (the prose around it is kept)."""
    begin = current.find(REFERENCE_BEGIN)
    end = current.find(REFERENCE_END)
    if begin < 0 or end < begin:
        return current.rstrip("\n") + "\n\n" + reference_markdown()
    return current[:begin] + reference_markdown() + current[end + len(REFERENCE_END) + 1 :]


def write(root: Path) -> None:
    """Regenerate `schemas/protocol/` and the reference of `docs/protocol.md` under `root`."""
    schema_dir = root / "schemas" / "protocol"
    schema_dir.mkdir(parents=True, exist_ok=True)
    wanted = schema_files()
    for stale in schema_dir.glob("*.json"):
        if stale.name not in wanted:
            stale.unlink()
    for name, text in wanted.items():
        (schema_dir / name).write_text(text, encoding="utf-8")
    doc = root / "docs" / "protocol.md"
    doc.write_text(render_document(doc.read_text(encoding="utf-8") if doc.exists() else ""), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
