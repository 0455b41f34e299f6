"""What travels between the run workflow and its activities: JSON-shaped dataclasses only.

The workflow sandbox imports this module, so it imports nothing but the standard library.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

WORKFLOW_NAME = "PiflowRun"
STEP_ACTIVITY = "piflow.step"
ATTEMPT_ACTIVITY = "piflow.attempt"
SNAPSHOT_QUERY = "snapshot"
DETAILS_QUERY = "details"
DETAILS_CHARACTERS = 1_000_000
"""Output text one `details` answer carries at most, all agents together (Temporal refuses a payload
over 2 MiB): beyond it an output comes as its first characters (a preview), and `piflow.showAgent`
fetches it alone, whole up to this size."""
PREVIEW_CHARACTERS = 1_000
"""Output text an agent keeps in a `details` answer whose budget is spent: enough for its preview."""
RESPOND_UPDATE = "respond"
CONTROL_SIGNAL = "control"
BUDGET_UPDATE = "budget"
PROJECT_ATTRIBUTE = "PiflowProject"
SCRIPT_ATTRIBUTE = "PiflowScript"
STATE_ATTRIBUTE = "PiflowState"
HISTORY_LIMIT = 4_000
"""History events after which a run's workflow continues as new, carrying its state (`RunStart.history_limit`).
A worker taking over a run replays its whole history within one workflow task (10 s timeout) at about
1 ms an event on a loaded machine (a 3,200-event history took 2.6-3.6 s), so histories stay well short."""
HISTORY_BYTES = 10 * 1024 * 1024
"""History size after which a run's workflow continues as new (`RunStart.history_bytes`): where Temporal
starts warning, a fifth of the 50 MB at which it terminates a workflow. Big agent outputs fill a
history long before 4,000 events do."""
HISTORY_CEILING = 45_000
"""History events at which a run whose state is too big to continue as new fails with piflow's error
(`RunStart.history_ceiling`), short of the 51,200 at which Temporal terminates its workflow."""
HISTORY_CEILING_BYTES = 45 * 1024 * 1024
"""The same in history size, short of Temporal's 50 MB."""
STEP_LIMIT = 300.0
"""Seconds a step may run the script without it waiting on anything (`RunStart.step_limit`): a runaway
script then fails the run (WORKER_UNRESPONSIVE) instead of holding the workflow's step for good."""
STEP_WAIT_SECONDS = 1.5
"""How long one step activity waits for the script to block before it answers `busy`: the script goes
on in its worker, and the workflow lets its workflow task go (a timer) before it waits again, so a
busy step never holds up a stop, a pause or a query for longer. A local activity holds its workflow
task; back to back they hold it until Temporal's workflow task heartbeat, ~8 s."""
STEP_ORPHAN_SECONDS = 30.0
"""A step no step activity waited on for this long is abandoned (its workflow ended, or moved to
another worker, which runs the step again): it stops, killing its script's worker."""
PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Temporal's default blob size limit (`limit.blobSize.error`): the server refuses a bigger payload
(an argument, a result, the state a run carries when it continues as new)."""
VALUE_LIMIT = PAYLOAD_LIMIT // 2
"""The most one agent's prompt or output may take compressed: its attempt's input or result must fit in
a payload, and the run's journal, carried whole when the run continues as new, must still fit beside it."""
COMPRESS_FROM = 1024
"""Payloads under this many bytes travel uncompressed (`codec.py`): readable in Temporal's UI and CLI."""


def wire_size(value: Any) -> int:
    """The bytes `value` (JSON data or one of these dataclasses) takes in a Temporal payload, compressed
    as `codec.ZlibCodec` sends it. Deterministic, so the workflow may measure what it is about to send."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    raw = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()  # as Temporal's JSON converter
    return len(raw) if len(raw) < COMPRESS_FROM else min(len(raw), len(zlib.compress(raw, 6)))


def megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.2f} MiB"


@dataclass
class JournalEntry:
    """One completed operation: its structural path, kind and value (spec G.2)."""

    path: str
    kind: str | None
    value: Any
    attempt: int | None = None
    """In a step's result: the value is that of this attempt's outcome, which the workflow holds (so an
    agent's output travels once, in its attempt's result, not again in the step's)."""


@dataclass
class AttemptOutcome:
    """How one agent attempt ended: a value or a spec error, and its usage."""

    path: str
    attempt: int
    value: Any = None
    error: dict[str, Any] | None = None
    tokens_input: int = 0
    tokens_output: int = 0
    cost_usd: float = 0.0
    conversation_head: dict[str, Any] | None = None
    """The conversation state the backend saved in this attempt (journaled with the turn when it succeeds)."""
    system_prompt: str | None = None
    transcript_path: str | None = None
    session_id: str | None = None
    rate_limited: str | None = None
    """The provider's rate-limit message: the workflow pauses the run and runs this attempt again on resume."""
    setup: dict[str, Any] | None = None
    """What the attempt started with (the store's `attempts.setup` JSON without the system prompt, which
    is `system_prompt`), learnt from the first step that replays the attempt (`StepResult.setups`)."""


@dataclass
class PendingAttempt:
    """An attempt the script waits for, fully resolved by the step (`request` is an AttemptRequest)."""

    path: str
    attempt: int
    request: dict[str, Any]
    timeout_ms: int | None
    label: str
    role: str | None
    model: str | None
    worktree_owner: str | None = None
    """The `withWorktree` scope: the worker runs the attempt in that scope's branch (`attempt.py`)."""
    conversation_state: dict[str, Any] | None = None
    """The head of the attempt's conversation from earlier turns (the run's journaled state)."""
    fixture_rule: int | None = None
    """The scripted fixture rule the step chose for the attempt (-1: none matched; None: not scripted),
    from the run's counts (`StepInput.fixture_uses`): `times` counts per run, whichever worker runs it."""


@dataclass
class ConversationHead:
    """The state a conversation's backend saved after `turn` (AttemptControl.save_conversation_state)."""

    conversation: str
    turn: int
    state: dict[str, Any]


@dataclass
class PendingCheckpoint:
    label: str
    path: str
    prompt: Any
    context: Any


@dataclass
class AnsweredCheckpoint:
    """A checkpoint the `respond` update answered (shown with its prompt, as the store keeps them)."""

    checkpoint: PendingCheckpoint
    approved: bool


@dataclass
class Carried:
    """What a run's workflow hands the next run of itself when it continues as new (long runs)."""

    journal: list[JournalEntry]
    outcomes: list[AttemptOutcome]
    conversations: list[ConversationHead]
    queue: list[PendingAttempt]
    checkpoints: list[PendingCheckpoint]
    agents: list[dict[str, Any]]
    usage: dict[str, Any]
    budget_events: list[dict[str, Any]]
    state: str
    phase: str | None
    paused: bool
    updated_at: float
    answered: list[AnsweredCheckpoint] = field(default_factory=list)
    fixture_uses: dict[str, int] = field(default_factory=dict)


@dataclass
class RunStart:
    """What a launch hands the workflow: the run's identity and its launch snapshot (spec G.1)."""

    run_id: str
    workflow_name: str
    cwd: str
    script_path: str | None
    snapshot: dict[str, Any]
    budget: dict[str, Any] | None
    concurrency: int
    created_at: float
    history_limit: int = field(default_factory=lambda: HISTORY_LIMIT)
    history_bytes: int = field(default_factory=lambda: HISTORY_BYTES)
    history_ceiling: int = field(default_factory=lambda: HISTORY_CEILING)
    step_limit: float = field(default_factory=lambda: STEP_LIMIT)
    carried: Carried | None = None
    """The run's state so far when its workflow continued as new; None at launch."""
    budget_version: int = 1
    """Raised with the limits (`budget` above) by each budget change after an exhaustion (spec H)."""


@dataclass
class StepInput:
    """`usage`: of the attempts of journaled agents (a step replays the others' usage itself);
    `budget_events`: those of earlier steps (spec H: each is recorded once per version)."""

    start: RunStart
    journal: list[JournalEntry]
    outcomes: list[AttemptOutcome]
    usage: dict[str, Any]
    budget_events: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    """`path@attempt` of the attempts the workflow already runs or queued: the step leaves them out of
    its result, so a step's result stays small while a big fan-out runs (Temporal's payload limits)."""
    conversations: list[ConversationHead] = field(default_factory=list)
    """The journaled conversation heads (each conversation's latest), for the turns still to run."""
    fixture_uses: dict[str, int] = field(default_factory=dict)
    """How many scheduled attempts each scripted fixture rule (by index) answers (`PendingAttempt.fixture_rule`)."""
    step: str = ""
    """The step's key: the step activities that wait for one step share it (`step.wait_step`)."""
    stop: bool = False
    """End the step instead of waiting for it: the run stopped."""


@dataclass
class StepResult:
    """Where one re-execution of the script stopped: finished, or waiting for these operations."""

    finished: bool
    value: Any = None
    error: dict[str, Any] | None = None
    journal: list[JournalEntry] = field(default_factory=list)
    attempts: list[PendingAttempt] = field(default_factory=list)
    checkpoints: list[PendingCheckpoint] = field(default_factory=list)
    phase: str | None = None
    agents: list[dict[str, Any]] = field(default_factory=list)
    """The step's view of the agents it started or replayed attempts of (not journaled ones)."""
    usage: dict[str, Any] = field(default_factory=dict)
    budget_events: list[dict[str, Any]] = field(default_factory=list)
    conversations: list[ConversationHead] = field(default_factory=list)
    """Conversation heads saved with the turns this step journaled."""
    setups: list[RecordedSetup] = field(default_factory=list)
    """The set-ups of replayed attempts whose outcome has none yet (`AttemptOutcome.setup`)."""
    busy: bool = False
    """The script neither blocked nor ended within STEP_WAIT_SECONDS: wait for the step again."""


@dataclass
class RecordedSetup:
    path: str
    attempt: int
    setup: dict[str, Any]


@dataclass
class AttemptInput:
    pending: PendingAttempt
    backend: str
    fixtures: str | None
    budget: dict[str, Any] | None
    usage: dict[str, Any]


@dataclass
class RunSnapshot:
    """The run as its workflow knows it: the `snapshot` query's answer and the workflow's result.

    Agents stay JSON objects (spec I agent fields); the client turns all of it into the engine's
    typed `RunView` (`client.run_view_of`), so no view wire shape is built here.
    """

    run_id: str
    workflow_name: str
    cwd: str
    script_path: str | None
    state: str
    phase: str | None
    created_at: float
    updated_at: float
    budget: dict[str, Any] | None
    usage: dict[str, Any]
    budget_events: list[dict[str, Any]]
    error: dict[str, Any] | None
    result: Any
    agents: list[dict[str, Any]]
    checkpoints: list[PendingCheckpoint]
    budget_version: int = 1
    proposals: list[dict[str, Any]] = field(default_factory=list)
    """Budget adjustments waiting for `piflow budget approve|reject` (spec H proposal fields)."""
    answered: list[AnsweredCheckpoint] = field(default_factory=list)
    """The checkpoints answered so far, in the order of their answers."""


@dataclass
class AgentDetails:
    """One agent's output and attempts: the `details` query's answer, turned into the engine's
    `AgentDetailView` by the client (`client.run_view_of`)."""

    path: str
    output: str | None
    """The journaled output's compact JSON text, or only its first characters when shorter than `output_size`."""
    output_size: int
    attempts: list[AttemptOutcome]
    """The ended attempts (without their values: the output is the agent's)."""
    running: list[int]
    """The numbers of its attempts in flight."""


@dataclass
class RunDetails:
    """The `details` query's answer: the text the run launched and the asked agents' details."""

    script: str
    agents: list[AgentDetails]
