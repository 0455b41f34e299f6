"""Runs of a Temporal-backed project (`executor = "temporal"`) as the editor sees them.

The project has no run store here: its runs are listed from Temporal's visibility, read through
each run workflow's `snapshot` query, answered and controlled through its updates and signal
(`engine/temporal/client.py`, as `piflow runs/show/approve/pause/resume/budget` do). A task on the
server's loop follows the project: every `FOLLOW_SECONDS` it lists the open runs and queries them,
and turns what changed between two snapshots into the events the store feed delivers (run started,
resumed, its state and phase, agent, checkpoint and budget events), so progress, lenses, checkpoint
questions and budget approvals treat a Temporal run as they treat an embedded one. showRun, showAgent,
run inlay hints and failed-agent diagnostics read the same typed views, with outputs and attempts from
the workflow's `details` query. Temporal's client is async, and what is not (the SDK's import, a
launch's validation) runs on a thread: nothing here blocks the loop, and typing's analysis threads
never wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from piflow.engine import events
from piflow.engine.lifecycle import ENDED, IRREVERSIBLE, AgentState, RunState
from piflow.errors import WorkflowError
from piflow.server.runs import Host, script_uri
from piflow.view_wire import agent_detail_json, agent_json, outcome_json, run_json, summary_json

if TYPE_CHECKING:
    from piflow.engine.temporal.client import TemporalRuns
    from piflow.engine.temporal.settings import TemporalSettings
    from piflow.engine.temporal.wire import RunSnapshot, RunStart
    from piflow.engine.views import AgentView, RunView
    from piflow.server.projects import Project

log = logging.getLogger(__name__)

FOLLOW_SECONDS: Final = 1.0
"""How often the project's runs are listed and its live runs queried (a query costs the cluster a
worker's attention: a modest rate, well under what the CLI's `--follow` asks)."""
QUERY_SECONDS: Final = 10.0
"""How long a query may wait for a worker to answer it (no worker serves the queue: the run is not
followed until one does)."""

Deliver = Callable[[int, str, str, dict[str, Any], frozenset[str]], None]
"""What the follower hands the features: `(seq, run_id, type, payload, agents)`, as the store feed."""


@dataclass(eq=False)
class TemporalHost(Host):
    """One Temporal-backed project: no store (`open_reader` is None, so the store reads find no run
    here), its runs on the cluster its `[temporal]` settings name."""

    settings: TemporalSettings | None = None
    snapshots: dict[str, RunSnapshot] = field(default_factory=dict)
    """The last snapshot of each live run this host follows."""
    final: dict[str, RunSnapshot] = field(default_factory=dict)
    """The snapshots of runs seen completed, failed or stopped: they never change again, and asking
    a closed workflow costs a worker a replay (inlay hints and diagnostics read them often)."""
    ended: set[str] = field(default_factory=set)
    """Runs seen completed, failed or stopped: not queried again by the follower."""
    seq: int = 0
    _runs: TemporalRuns | None = None
    _connecting: asyncio.Lock = field(default_factory=asyncio.Lock)

    def open_reader(self) -> None:
        return None

    def poll(self) -> list[Any]:
        return []

    async def runs(self) -> TemporalRuns:
        """The connected client of the project's cluster (connected on first use; the Temporal SDK is
        imported on a thread, not on the loop that answers typing)."""
        async with self._connecting:
            if self._runs is None:
                assert self.settings is not None
                await asyncio.to_thread(importlib.import_module, "piflow.engine.temporal.client")
                from piflow.engine.temporal.client import TemporalRuns

                self._runs = await TemporalRuns(self.settings, str(self.root)).__aenter__()
            return self._runs

    # -- following ------------------------------------------------------------------------------
    async def follow(self, deliver: Deliver) -> None:
        """Follow the project's runs until cancelled; an unreachable cluster is looked at again later."""
        first = True
        while True:
            try:
                await self._look(deliver, first)
                first = False
                self.failure = None
            except Exception as error:
                message = error.message if isinstance(error, WorkflowError) else repr(error)
                if message != self.failure:
                    log.warning("cannot follow the runs of %s on Temporal: %s", self.root, message)
                self.failure = message
            await asyncio.sleep(FOLLOW_SECONDS)

    async def _look(self, deliver: Deliver, first: bool) -> None:
        """Query the project's open runs, and those followed or launched here that closed since."""
        runs = await self.runs()
        listed = {s.run_id for s in await runs.summaries(open_only=True)}
        followed = sorted(listed | set(self.snapshots) | (self.own - self.ended))
        found = await asyncio.gather(*(runs.snapshot(run_id, timeout=QUERY_SECONDS) for run_id in followed),
                                     return_exceptions=True)
        for run_id, snapshot in zip(followed, found, strict=True):
            if isinstance(snapshot, BaseException):
                log.info("cannot query run %s: %s", run_id, snapshot)
                continue
            before = self.snapshots.get(run_id)
            # an editor opened on an exhausted run is not told it ended (as for a store's runs)
            if before is not None or not first or snapshot.state not in ENDED or run_id in self.own:
                for kind, payload, agents in changes(before, snapshot):
                    self.seq += 1
                    deliver(self.seq, run_id, kind, payload, agents)
            if snapshot.state in IRREVERSIBLE:  # a budget-exhausted run may go on: it stays followed
                self.ended.add(run_id)
                self.snapshots.pop(run_id, None)
                self.final[run_id] = snapshot
            else:
                self.snapshots[run_id] = snapshot

    # -- reads ----------------------------------------------------------------------------------
    async def summaries(self, path: str | None, states: frozenset[str] | None) -> list[dict[str, Any]]:
        """The project's runs (of one script when `path`), as the store's summaries are shown."""
        from piflow.engine.temporal.client import run_view_of

        if self._runs is None and self.failure is not None:
            return []  # the cluster could not be reached: the follower says why, and looks again
        found = []
        for listed in await (await self.runs()).summaries():
            known = self.snapshots.get(listed.run_id)  # a followed run: its counts, phase and usage too
            summary = listed if known is None else run_view_of(known).summary
            if (path is None or summary.script_path == path) and (states is None or summary.state in states):
                shown = summary_json(summary)
                shown["uri"] = script_uri(summary.script_path)
                found.append(shown)
        return found

    async def resolve(self, run_id: str) -> str | None:
        """The full id of one of the project's runs (a prefix of 8+ characters), None when not one."""
        try:
            return await (await self.runs()).resolve(run_id)
        except WorkflowError:
            return None

    async def view(self, run_id: str, details: bool = False) -> RunView:
        """The run's view; with `details`, its agents' outputs and attempts (the workflow's `details` query)."""
        from piflow.engine.temporal.client import run_view_of

        snapshot = await self._snapshot(run_id)
        if not details:
            return run_view_of(snapshot)
        return run_view_of(snapshot, await (await self.runs()).details(run_id, None, timeout=QUERY_SECONDS))

    async def agent(self, run_id: str, agent_id: str) -> dict[str, Any]:
        """`piflow.showAgent`'s answer: one agent with its whole output and its attempts."""
        return agent_detail_json(await (await self.runs()).agent(run_id, agent_id, timeout=QUERY_SECONDS))

    async def _snapshot(self, run_id: str) -> RunSnapshot:
        known = self.snapshots.get(run_id) or self.final.get(run_id)
        if known is not None:
            return known
        snapshot = await (await self.runs()).snapshot(run_id, timeout=QUERY_SECONDS)
        if snapshot.state in IRREVERSIBLE:
            self.final[run_id] = snapshot
        return snapshot

    # -- how a script's latest run went (inlay hints, failed-agent diagnostics: `server/outcomes.py`)
    async def latest(self, path: str, with_agents: bool) -> str | None:
        """The newest run of the script at `path` (`with_agents`: the newest that started agents);
        None when there is none, or the cluster cannot tell now (the follower says why)."""
        if self._runs is None and self.failure is not None:
            return None
        try:
            listed = [s for s in await (await self.runs()).summaries() if s.script_path == path]
            for summary in sorted(listed, key=lambda s: s.created_at, reverse=True):
                snapshot = await self._snapshot(summary.run_id)
                if snapshot.agents or not with_agents:
                    return summary.run_id
        except Exception as error:  # an unreachable cluster, no worker to answer: no outcome to show
            log.info("cannot read the latest run of %s on Temporal: %r", path, error)
        return None

    async def agents_of(self, run_id: str, failed_only: bool) -> tuple[RunState, list[AgentView]]:
        """A run's state and its agents (only the failed ones when `failed_only`), as `Runs.agents_of`."""
        with self._asking(run_id):
            view = await self.view(run_id)
        return view.state, [a for a in view.agents if not failed_only or a.state == AgentState.FAILED]

    async def launched_script(self, run_id: str) -> str:
        """The text the run launched (from its workflow's launch snapshot)."""
        with self._asking(run_id):
            return (await (await self.runs()).details(run_id, [], timeout=QUERY_SECONDS)).script

    @contextlib.contextmanager
    def _asking(self, run_id: str) -> Iterator[None]:
        """A query the cluster could not answer (unreachable, no worker) as the WorkflowError the
        editor features expect of an unreadable run."""
        try:
            yield
        except WorkflowError:
            raise
        except Exception as error:
            address = self.settings.address if self.settings is not None else "?"
            raise WorkflowError("CONFIG_ERROR", f"Cannot ask run {run_id} on the Temporal cluster at {address}: "
                                                f"{error}") from error

    async def shown(self, run_id: str, details: bool) -> dict[str, Any]:
        """`Runs.view`'s answer (`piflow.showRun`'s with `details`)."""
        shown = run_json(await self.view(run_id, details))
        shown["uri"] = script_uri(shown.get("scriptPath"))
        return shown

    async def progress(self, run_id: str) -> dict[str, Any]:
        """What a progress notification needs (`Runs.progress`'s shape), from the latest snapshot."""
        view = await self.view(run_id)
        summary = view.summary
        return {
            "runId": run_id, "scriptPath": summary.script_path, "workflowName": summary.workflow_name,
            "state": summary.state, "phase": summary.phase,
            "agentCounts": {"total": summary.agents_total, "settled": summary.agents_settled},
            "agents": [agent_json(agent) for agent in view.agents],
            "budget": {"limits": view.budget.limits, "usage": view.budget.usage, "events": view.budget.events},
            "checkpoints": [{"name": c.name, "prompt": c.prompt, "context": c.context} for c in view.checkpoints],
            "result": view.result, "error": view.error, "uri": script_uri(summary.script_path),
        }

    # -- requests -------------------------------------------------------------------------------
    async def launch(self, path: str, script: str, cwd: str, options: dict[str, Any]) -> str:
        """Start a run of the editor's text on the cluster (`Runs.launch`'s options). Validating the
        launch and building its snapshot (imports, settings, preflight) run on a thread, never on
        the loop that answers typing; starting the workflow is the client's async call."""
        runs = await self.runs()
        start = await asyncio.to_thread(_prepared, runs, path, script, cwd, options)
        run_id = await runs.start(start)
        self.own.add(run_id)
        return run_id

    async def respond(self, run_id: str, *, name: str | None, proposal_id: str | None,
                      approved: bool) -> dict[str, Any]:
        """Answer a checkpoint (the first answer wins) or a budget proposal (approved: the run goes on)."""
        from piflow.engine.control import ControlOutcome

        runs = await self.runs()
        if proposal_id is not None:
            decided = await runs.decide(run_id, proposal_id, approved)
            return {key: value for key, value in outcome_json(decided).items()
                    if key in ("state", "approved", "reason")}
        if not name:
            raise WorkflowError("INVALID_METADATA", "workflow_respond requires name or proposalId")
        accepted = await runs.respond(run_id, name, approved)
        return outcome_json(ControlOutcome("checkpoint_answered" if accepted else "not_pending", accepted=accepted,
                                           approved=approved, reason="checkpoint"))

    async def resume(self, run_id: str, budget: Any) -> dict[str, Any]:
        """↻ Resume: a paused run, or an exhausted one with a budget patch (maybe a proposal to approve).
        What the client computes here (budget merges, the proposal's message) imports the engine: done
        on a thread first, so the loop never waits for those imports."""
        await asyncio.to_thread(importlib.import_module, "piflow.engine.engine")
        reply = outcome_json(await (await self.runs()).resume(run_id, budget))
        return {key: value for key, value in reply.items() if key in ("runId", "state", "proposalId", "message")}

    async def control(self, run_id: str, action: str) -> dict[str, Any]:
        """pause or stop, answered as the embedded runs answer them."""
        runs = await self.runs()
        if action == "stop":
            return outcome_json(await runs.stop(run_id))
        return {"runId": run_id, "state": await runs.pause(run_id)}

def _prepared(runs: TemporalRuns, path: str, script: str, cwd: str, options: dict[str, Any]) -> RunStart:
    """Worker thread: the launch an editor's ▶ Run asks for, validated and turned into its workflow's
    input (a relative fixture file is the project's, as in piflow.toml)."""
    from piflow.engine.engine import LaunchRequest

    fixtures = options.get("fixtures")
    return runs.prepare(LaunchRequest(script=script, cwd=cwd, script_path=path, args=options.get("args"),
                                      budget=options.get("budget"), concurrency=options.get("concurrency"),
                                      backend=options.get("backend"),
                                      fixtures=str(Path(cwd, fixtures).resolve()) if fixtures else None))


def changes(
    before: RunSnapshot | None, now: RunSnapshot
) -> list[tuple[str, dict[str, Any], frozenset[str]]]:
    """The store feed's events for what changed between two snapshots of a run (`before` None: the
    run is new to this editor), agent state changes folded one per state as the feed folds them."""
    base = {"runId": now.run_id, "workflowName": now.workflow_name}
    found: list[tuple[str, dict[str, Any], frozenset[str]]] = []
    if before is None:
        found.append((events.RUN_STARTED, dict(base), frozenset()))
    if before is not None and before.phase != now.phase and now.phase is not None:
        found.append((events.PHASE_CHANGED, {**base, "phase": now.phase}, frozenset()))
    was = {a["path"]: a.get("state") for a in before.agents} if before is not None else {}
    by_state: dict[str, set[str]] = {}
    for n, agent in enumerate(now.agents, start=1):
        if was.get(agent["path"]) != agent.get("state"):
            by_state.setdefault(str(agent.get("state")), set()).add(f"{now.run_id}:{n}")
    for state, ids in by_state.items():
        found.append((events.AGENT_STATE_CHANGED, {**base, "agentId": max(ids), "state": state}, frozenset(ids)))
    waiting = {c.label for c in before.checkpoints} if before is not None else set()
    for checkpoint in now.checkpoints:
        if checkpoint.label not in waiting:
            found.append((events.CHECKPOINT_STATE_CHANGED, {**base, "name": checkpoint.label, "state": "awaiting",
                                                            "prompt": checkpoint.prompt, "context": checkpoint.context},
                          frozenset()))
    for event in now.budget_events[len(before.budget_events) if before is not None else 0:]:
        found.append((events.BUDGET_EVENT, {**base, **event}, frozenset()))
    if before is not None and before.state in ENDED and now.state not in ENDED:
        found.append((events.RUN_RESUMED, dict(base), frozenset()))
    if (before is not None and before.state != now.state) or (before is None and now.state != RunState.RUNNING):
        found.append((events.RUN_STATE_CHANGED, {**base, "state": now.state}, frozenset()))
    return found


def temporal_host(project: Project) -> TemporalHost | None:
    """The host of a project whose runs execute on Temporal; None for an embedded project."""
    settings = project.config.project if project.config is not None else None
    if settings is None or settings.executor != "temporal":
        return None
    from piflow.engine.temporal.settings import TemporalSettings

    return TemporalHost(project.root, project.store or project.root, settings=TemporalSettings(**settings.temporal))
