"""Runs as the editor sees them: the run stores of the open projects, followed through their change feeds.

The server owns no run. ▶ Run and ↻ Resume start the same owner process `piflow run --detach`
starts (handing it the editor's text, unsaved changes included); pause, stop and answers are
requests written to the store, which the owner carries out — exactly as for a run a terminal
owns. So a run outlives the editor that launched it, and the next server shows it live again.

Each project has one run store (the one `piflow run` uses). One follower thread checks every
store's `ChangeFeed` (a cheap "anything committed?" check every few milliseconds, events read only
then), reduces what it read — a big run commits thousands of agent state changes a second, which
reach the features as one event per run and state standing for all the agents it names — and
hands the loop only that. Nothing of the engine runs on the server's loop: reads and control
requests run on the runs' own thread (never in the analysis threads typing waits for), owners in
their own processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

from pygls.uris import from_fs_path, to_fs_path

from piflow.engine import control, events
from piflow.engine.agent_details import agent_detail
from piflow.engine.environment import project_root
from piflow.engine.feed import BATCH, FEED_INTERVAL, ChangeFeed
from piflow.engine.lifecycle import AGENT_SETTLED, ENDED, AgentState, RunState
from piflow.engine.owner import EDITOR_RUN_NICENESS, start_owner
from piflow.engine.store import EventRecord, RunRecord, RunStore
from piflow.engine.views import (
    AgentView,
    agent_view,
    attention_key,
    observed_run,
    run_view,
    summary_of,
)
from piflow.errors import WorkflowError
from piflow.server.base import LanguageFeature, PiflowServer
from piflow.view_wire import agent_detail_json, agent_json, outcome_json, run_json, summary_json

if TYPE_CHECKING:
    from piflow.server.projects import Project
    from piflow.server.temporal_runs import TemporalHost

log = logging.getLogger(__name__)
R = TypeVar("R")
P = ParamSpec("P")

DELIVERY_SLICE: Final = 100
"""Events handed to the features between two turns of the loop (a big run commits thousands a second)."""
STORE_LOOK_SECONDS: Final = 0.5
"""How often a project without a run store yet is checked for one."""
LIVENESS_SECONDS: Final = 1.0
"""How often the owners of the live runs are checked to be alive."""


@dataclass(frozen=True)
class RunEvent:
    """One run event as the features receive it; `own` when this server launched or resumed the run.

    An agent state change stands for every change of the run to the same state read with it
    (`agents`: the ids of all the agents whose state changed since the previous event of the run
    that is not an agent state change); it is the last of them.
    """

    seq: int
    run_id: str
    type: str
    payload: dict[str, Any]
    own: bool
    host: Host
    agents: frozenset[str] = frozenset()


def script_uri(script_path: str | None) -> str | None:
    return from_fs_path(script_path) if script_path else None


def canonical_path(uri: str) -> str | None:
    """The script path a run records for a document (resolved, as `piflow run` stores it)."""
    path = to_fs_path(uri)
    return str(Path(path).resolve()) if path else None


@dataclass(eq=False)
class Host:
    """One project's run store: a connection for reads and requests, and the feed that follows it."""

    root: Path
    store_path: Path
    reader: RunStore | None = None
    feed: ChangeFeed | None = None
    own: set[str] = field(default_factory=set)
    starting: int = 0
    """Owner processes being started: their first events wait until the run is known as ours."""
    born_watched: bool = False
    """The store did not exist when the server began following it: all its events are news."""
    looked: float = 0.0
    live: set[str] = field(default_factory=set)
    """Runs seen starting and not yet seen ending: their owners' lives are checked."""
    checked: float = 0.0
    failure: str | None = None
    """Why the store could not be read the last time (logged once, until it can be read again)."""
    _opening: threading.Lock = field(default_factory=threading.Lock)

    def open_reader(self) -> RunStore | None:
        """Worker thread: open the store once it exists (a project without runs has none)."""
        with self._opening:
            if self.reader is None and self.store_path.exists():
                if self.feed is None:
                    self.feed = ChangeFeed(self.store_path, after_seq=0 if self.born_watched else None)
                self.reader = RunStore.open(self.store_path)
        return self.reader

    def poll(self) -> list[Folded]:
        """Follower thread: the store's new events, agent state changes folded (`fold_agent_changes`);
        none while the store cannot be read.

        An unreadable store (one another process is still creating, a damaged file) is looked at
        again later: it must never stop the following of this or any other store.
        """
        found: list[EventRecord] = []
        try:
            if self.feed is None:
                if time.monotonic() - self.looked < STORE_LOOK_SECONDS:
                    return []
                self.looked = time.monotonic()
                self.open_reader()
            feed = self.feed
            if feed is None:
                return []
            if feed.changed():
                found += self._track(feed.read())
            if self.live and time.monotonic() - self.checked > LIVENESS_SECONDS:
                self.checked = time.monotonic()
                found += self._ended_owners(feed)
            self.failure = None
        except Exception as error:  # what was read before the failure still goes out
            message = error.message if isinstance(error, WorkflowError) else repr(error)
            if message != self.failure:
                log.warning("cannot read the run store %s: %s", self.store_path, message)
            self.failure = message
        return fold_agent_changes(found)

    def _track(self, found: list[EventRecord]) -> list[EventRecord]:
        """Keep `live` up to date with `found`; return it."""
        for event in found:
            if event.type in (events.RUN_STARTED, events.RUN_RESUMED):
                self.live.add(event.run_id)
            elif event.type == events.RUN_STATE_CHANGED and isinstance(event.payload, dict) \
                    and event.payload.get("state") in ENDED:
                self.live.discard(event.run_id)
        return found

    def _ended_owners(self, feed: ChangeFeed) -> list[EventRecord]:
        """The events the owners of live runs recorded before they went, and for a run whose owner
        died without recording its end (SIGKILL, a crash), that end as the editor must see it: the
        run is interrupted (resumable). Nothing is written: the next owner records it."""
        dead = []
        for run_id in list(self.live):
            try:
                if feed.store.lease_owner(run_id) is None:
                    dead.append(run_id)
            except WorkflowError:  # the run is gone from the store
                self.live.discard(run_id)
        if not dead:
            return []
        found = self._track(feed.read())  # read after the check: an owner that ended its run recorded it first
        if len(found) == BATCH:
            return found  # more to read first: the end of a run may be among them
        for run_id in dead:
            if run_id in self.live:
                self.live.discard(run_id)
                payload = {"runId": run_id, "state": RunState.INTERRUPTED, "reason": "owner_gone"}
                found.append(EventRecord(feed.after_seq, run_id, events.RUN_STATE_CHANGED, payload, time.time()))
        return found


Folded = tuple[EventRecord, frozenset[str]]
"""An event and, for an agent state change, the agents it stands for."""


def fold_agent_changes(found: list[EventRecord]) -> list[Folded]:
    """Events in order, with each run's agent state changes between two other events of the run
    folded into one per state (the last, standing for all their agents): no feature needs each of
    the thousands a second a big run commits, and none may cost the loop time per agent."""
    reduced: list[Folded] = []
    pending: dict[str, dict[Any, tuple[EventRecord, set[str]]]] = {}

    def flush(run_id: str) -> None:
        reduced.extend((last, frozenset(ids)) for last, ids in pending.pop(run_id, {}).values())

    for event in found:
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type == events.AGENT_STATE_CHANGED and "agentId" in payload:
            states = pending.setdefault(event.run_id, {})
            _, ids = states.pop(payload.get("state"), (event, set()))
            ids.add(str(payload["agentId"]))
            states[payload.get("state")] = (event, ids)
            continue
        flush(event.run_id)
        reduced.append((event, frozenset()))
    for run_id in list(pending):
        flush(run_id)
    return sorted(reduced, key=lambda item: item[0].seq)


class Runs(LanguageFeature):
    """The run stores of the open projects: followed, read and controlled; never executed here."""

    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._hosts: dict[Path, Host] = {}
        self._follower: threading.Thread | None = None
        self._stopping = threading.Event()
        self._arrivals: asyncio.Queue[tuple[Host, list[Folded]]] = asyncio.Queue()
        self._folders: asyncio.Task[None] | None = None
        # One thread for store reads and progress building: while a big run is followed, typing's
        # analysis never queues behind them in the server's CPU threads.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piflow-runs")

    async def in_thread(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the work of following runs (store reads, progress payloads) on the runs' own thread."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, lambda: function(*args, **kwargs))

    def initialized(self) -> None:
        self._folders = self.server.spawn(self._open_folders())

    async def _open_folders(self) -> None:
        """Follow the run stores of the workspace folders from the start (runs of unopened scripts)."""
        from piflow.server.projects import Projects

        projects = self.server.get_feature(Projects)
        for folder in self.server.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                await self.host_for(projects.root_for(str(Path(path) / "_")))

    async def _all_hosts(self) -> list[Host]:
        """Every host, once those of the workspace folders exist."""
        if self._folders is not None:
            await asyncio.shield(self._folders)
        return self.hosts()

    # -- hosts --------------------------------------------------------------------------------
    async def host_for(self, root: Path) -> Host:
        """The host of a project (created on first use; its store path comes from the config)."""
        from piflow.server.projects import Projects

        project = await self.server.get_feature(Projects).get(root)
        if (temporal := self._temporal_host(project)) is not None:
            return temporal
        store_path = project.store
        if store_path is None:
            raise WorkflowError("CONFIG_ERROR", f"No run store for the project at {root}")
        host = self._hosts.get(store_path)
        if host is None:
            host = self._hosts[store_path] = Host(root, store_path, born_watched=not store_path.exists())
            if not host.born_watched:  # runs that went on while no editor was open are shown live again
                for run_id, kind, payload in await self.in_thread(_live_runs, host):
                    self._deliver(host, 0, run_id, kind, payload)
        if self._follower is None:
            self._follower = threading.Thread(
                target=self._follow, args=(asyncio.get_running_loop(),), name="piflow-feed", daemon=True
            )
            self._follower.start()
            self.server.spawn(self._hand_over())
        return host

    def _temporal_host(self, project: Project) -> Host | None:
        """A Temporal-backed project's host, followed from its creation; None for an embedded project."""
        from piflow.server.temporal_runs import temporal_host

        if (known := self._hosts.get(project.root)) is not None:
            return known
        if (host := temporal_host(project)) is not None:
            self._hosts[project.root] = host
            self.server.spawn(host.follow(functools.partial(self._deliver, host)))
        return host

    async def host_for_path(self, path: str | None) -> Host:
        from piflow.server.projects import Projects

        return await self.host_for(self.server.get_feature(Projects).root_for(path))

    def hosts(self) -> list[Host]:
        return list(self._hosts.values())

    async def host_of_run(self, run_id: str) -> tuple[Host, str]:
        """The host whose store holds `run_id` (a prefix of 8+ characters is enough) and the full id."""
        errors: list[WorkflowError] = []
        for host in await self._all_hosts():
            if (temporal := _temporal(host)) is not None:
                if (found := await temporal.resolve(run_id)) is not None:
                    return host, found
                continue
            reader = await self.in_thread(host.open_reader)
            if reader is None:
                continue
            try:
                return host, await self.in_thread(reader.resolve_run_id, run_id)
            except WorkflowError as error:
                errors.append(error)
        ambiguous = [error for error in errors if "Ambiguous" in error.message]
        raise ambiguous[0] if ambiguous else WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")

    # -- events -------------------------------------------------------------------------------
    def _deliver(
        self, host: Host, seq: int, run_id: str, kind: str, payload: Any, agents: frozenset[str] = frozenset()
    ) -> None:
        event = RunEvent(
            seq, run_id, kind, payload if isinstance(payload, dict) else {}, run_id in host.own, host, agents
        )
        self.server.dispatch("run_event", event)

    def _follow(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follower thread: poll every store's feed and queue what it read for the loop."""
        while not self._stopping.wait(FEED_INTERVAL):
            for host in self.hosts():
                found = host.poll()
                if found:
                    try:
                        loop.call_soon_threadsafe(self._arrivals.put_nowait, (host, found))
                    except RuntimeError:  # the loop closed: the server is gone
                        return

    async def _hand_over(self) -> None:
        """Hand the features what the follower read, in order, a slice at a time."""
        while True:
            host, found = await self._arrivals.get()
            while host.starting:  # an owner is being started: its run is ours once it replies
                await asyncio.sleep(FEED_INTERVAL)
            for number, (event, agents) in enumerate(found, start=1):
                self._deliver(host, event.seq, event.run_id, event.type, event.payload, agents)
                if number % DELIVERY_SLICE == 0:
                    await asyncio.sleep(0)  # an edit that came meanwhile is handled first

    # -- control ------------------------------------------------------------------------------
    async def _start_owner(self, host: Host, argv: list[str], script_text: str | None = None) -> dict[str, Any]:
        """Start an owner process in the project and return its reply; the run it names is ours."""
        host.starting += 1
        try:
            reply = await asyncio.to_thread(  # waits for the owner's reply: no thread of ours is held up
                lambda: start_owner(argv, cwd=str(host.root), script_text=script_text, niceness=EDITOR_RUN_NICENESS)
            )
            if "runId" in reply:
                host.own.add(reply["runId"])
            await self.in_thread(host.open_reader)  # the launch may have created the store
        finally:
            host.starting -= 1
        error = reply.get("error")
        if error is not None:
            raise WorkflowError.from_json(error)
        return reply

    async def launch(self, path: str, script: str, **options: Any) -> str:
        """Launch a script (its text as the editor has it) in its project, in an owner process."""
        host = await self.host_for_path(path)
        cwd = project_root(str(Path(path).parent))
        if (temporal := _temporal(host)) is not None:
            return await temporal.launch(path, script, cwd, options)
        argv = ["run", path]
        for name in ("args", "budget"):
            if name in options:
                argv += [f"--{name}", json.dumps(options[name])]
        for name in ("concurrency", "backend"):
            if options.get(name) is not None:
                argv += [f"--{name}", str(options[name])]
        if options.get("fixtures"):  # a relative fixture file is the project's, as in piflow.toml
            argv += ["--fixtures", str(Path(cwd, options["fixtures"]).resolve())]
        reply = await self._start_owner(host, argv, script)
        return str(reply["runId"])

    async def resume(self, run_id: str, budget: Any) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        if (temporal := _temporal(host)) is not None:
            return await temporal.resume(run_id, budget)
        argv = ["resume", run_id] + (["--budget", json.dumps(budget)] if budget is not None else [])
        reply = await self._start_owner(host, argv)
        return {key: value for key, value in reply.items() if key in ("runId", "state", "proposalId", "message")}

    async def pause(self, run_id: str) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        if (temporal := _temporal(host)) is not None:
            return await temporal.control(run_id, "pause")
        return {"runId": run_id, "state": await self._control(host, run_id, control.pause)}

    async def stop(self, run_id: str) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        if (temporal := _temporal(host)) is not None:
            return await temporal.control(run_id, "stop")
        return outcome_json(await self._control(host, run_id, control.stop))

    async def respond(
        self, run_id: str, *, name: str | None, proposal_id: str | None, approved: bool
    ) -> dict[str, Any]:
        """Answer a checkpoint (a request the owner picks up) or a budget proposal (an approved one
        resumes the run: in a new owner process)."""
        host, run_id = await self.host_of_run(run_id)
        if (temporal := _temporal(host)) is not None:
            return await temporal.respond(run_id, name=name, proposal_id=proposal_id, approved=approved)
        if proposal_id is not None:
            argv = ["budget", "approve" if approved else "reject", run_id, proposal_id]
            reply = await self._start_owner(host, argv)
            return {key: value for key, value in reply.items() if key in ("state", "approved", "reason")}
        if not name:
            raise WorkflowError("INVALID_METADATA", "workflow_respond requires name or proposalId")
        answer = await self._control(
            host, run_id, lambda store, record: control.answer_checkpoint(store, record, name, approved)[0]
        )
        return outcome_json(answer)

    async def _control(self, host: Host, run_id: str, request: Callable[[RunStore, RunRecord], R]) -> R:
        """Worker thread: a control request on the run's store, as `piflow stop` makes it (the run's
        owner carries it out; no engine runs here)."""
        def call() -> R:
            store = _reader(host, run_id)
            return request(store, control.find(store, run_id))

        return await self.in_thread(call)

    # -- reads (worker threads) ----------------------------------------------------------------
    async def summaries(self, path: str | None = None, states: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Runs of one script (a resolved path) or of every open project, by attention order;
        only those in `states`, if given (a script's history can be long: lenses want the live ones)."""
        found: list[dict[str, Any]] = []
        for host in await self._all_hosts():
            temporal = _temporal(host)
            found.extend(await temporal.summaries(path, states) if temporal is not None
                         else await self.in_thread(_summaries, host, path, states))
        return sorted(found, key=lambda s: attention_key(s["state"], s["updatedAt"]))

    async def latest_with_agents(self, host: Host, path: str) -> str | None:
        """The newest run of a script that started agents (what inlay hints report on)."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.latest(path, with_agents=True)
        return await self.in_thread(_latest, host, path, True)

    async def latest(self, host: Host, path: str) -> str | None:
        """The newest run of a script (a new run replaces what the previous one reported)."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.latest(path, with_agents=False)
        return await self.in_thread(_latest, host, path, False)

    async def view(self, host: Host, run_id: str, *, details: bool = False) -> dict[str, Any]:
        """A run as `run_view` shows it (agents with outputs and attempts when `details`), with its uri."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.shown(run_id, details)
        view = await self.in_thread(_view, host, run_id, details)
        view["uri"] = script_uri(view.get("scriptPath"))
        return view

    async def progress(self, host: Host, run_id: str, changed: set[str] | None) -> dict[str, Any]:
        """What a progress notification needs, read in proportion to the change: the run's small
        fields, its agent counts, and its agents — all of them when `changed` is None, else those
        in `changed` and the running ones (whose tokens and activity move without events)."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.progress(run_id)
        progress = await self.in_thread(_progress, host, run_id, changed)
        progress["uri"] = script_uri(progress.get("scriptPath"))
        return progress

    async def agents_of(self, host: Host, run_id: str, *, failed_only: bool) -> tuple[RunState, list[AgentView]]:
        """A run's state and its agents — only the failed ones when `failed_only`, and then none is
        read unless one failed (what failed-agent diagnostics need, while thousands complete)."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.agents_of(run_id, failed_only)
        return await self.in_thread(_agents_of, host, run_id, failed_only)

    async def launched_script(self, host: Host, run_id: str) -> str:
        """The text a run launched (its launch snapshot's script)."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.launched_script(run_id)
        return await self.in_thread(lambda: _reader(host, run_id).run_script(run_id))

    async def uri_of(self, host: Host, run_id: str) -> str | None:
        """The document of a run's script (None for an inline or registered workflow)."""
        if (temporal := _temporal(host)) is not None:
            return script_uri((await temporal.view(run_id)).summary.script_path)
        record = await self.in_thread(lambda: _reader(host, run_id).get_run(run_id))
        return script_uri(record.script_path if record is not None else None)

    async def agent(self, host: Host, run_id: str, agent_id: str) -> dict[str, Any]:
        """One agent with its full output."""
        if (temporal := _temporal(host)) is not None:
            return await temporal.agent(run_id, agent_id)
        return await self.in_thread(
            lambda: agent_detail_json(agent_detail(_reader(host, run_id), run_id, agent_id))
        )

    # -- lifecycle ----------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Stop following the stores; the runs go on in their owner processes."""
        self._stopping.set()
        if self._follower is not None:
            await asyncio.to_thread(self._follower.join, 1.0)
        for host in self.hosts():
            for connection in (host.reader, host.feed):
                if connection is not None:
                    with contextlib.suppress(Exception):
                        connection.close()


def _temporal(host: Host) -> TemporalHost | None:
    """The host as a Temporal-backed project's (`server/temporal_runs.py`), None for a run store's."""
    from piflow.server.temporal_runs import TemporalHost

    return host if isinstance(host, TemporalHost) else None


def _live_runs(host: Host) -> list[tuple[str, str, dict[str, Any]]]:
    """Worker thread: the runs of a store that are live (their owner is alive), as the events that
    introduce them to an editor: started, and each checkpoint still waiting for an answer."""
    reader = host.open_reader()
    found: list[tuple[str, str, dict[str, Any]]] = []
    if reader is None:
        return found
    with reader.consistent_read():
        for record in reader.list_runs():
            if observed_run(reader, record).state in ENDED:
                continue
            host.live.add(record.id)
            base = {"runId": record.id, "workflowName": record.workflow_name}
            found.append((record.id, events.RUN_STARTED, base))
            found += [
                (record.id, events.CHECKPOINT_STATE_CHANGED,
                 {**base, "name": c.label, "state": "awaiting", "prompt": c.prompt, "context": c.context})
                for c in reader.awaiting_checkpoints(record.id)
            ]
    return found


def _summaries(host: Host, path: str | None, states: frozenset[str] | None) -> list[dict[str, Any]]:
    reader = host.open_reader()
    if reader is None:
        return []
    summaries = []
    with reader.consistent_read():
        for record in reader.list_runs(script_path=path):
            record = observed_run(reader, record)
            if states is not None and record.state not in states:
                continue
            summary = summary_json(summary_of(reader, record))
            summary["uri"] = script_uri(record.script_path)
            summaries.append(summary)
    return summaries


def _latest(host: Host, path: str, with_agents: bool) -> str | None:
    reader = host.open_reader()
    if reader is None:
        return None
    runs = reader.list_runs(script_path=path)
    return next((record.id for record in runs if not with_agents or reader.agents(record.id)), None)


def _reader(host: Host, run_id: str) -> RunStore:
    reader = host.open_reader()
    if reader is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
    return reader


def _record(reader: RunStore, run_id: str) -> RunRecord:
    record = reader.get_run(run_id)
    if record is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
    return record


def _view(host: Host, run_id: str, details: bool) -> dict[str, Any]:
    return run_json(run_view(_reader(host, run_id), run_id, details=details))


def _agents_of(host: Host, run_id: str, failed_only: bool) -> tuple[RunState, list[AgentView]]:
    reader = _reader(host, run_id)
    with reader.consistent_read():
        state = observed_run(reader, _record(reader, run_id)).state
        if failed_only and reader.agent_counts(run_id, (AgentState.FAILED,))[1] == 0:
            return state, []
        return state, [agent_view(a) for a in reader.agents(run_id) if not failed_only or a.state == AgentState.FAILED]


def _progress(host: Host, run_id: str, changed: set[str] | None) -> dict[str, Any]:
    reader = _reader(host, run_id)
    with reader.consistent_read():  # one moment: never a pending checkpoint on a `running` run
        record = _record(reader, run_id)
        total, settled = reader.agent_counts(run_id, AGENT_SETTLED)
        agents = reader.agents(run_id) if changed is None else reader.agents_changing(run_id, changed)
        return {
            "runId": run_id,
            "scriptPath": record.script_path,
            "workflowName": record.workflow_name,
            "state": observed_run(reader, record).state,
            "phase": record.phase,
            "agentCounts": {"total": total, "settled": settled},
            "agents": [agent_json(agent_view(agent)) for agent in agents],
            "budget": {"limits": record.budget or {}, "usage": record.usage or {},
                       "events": reader.budget_events(run_id)},
            "checkpoints": [{"name": c.label, "prompt": c.prompt, "context": c.context}
                            for c in reader.awaiting_checkpoints(run_id)],
            "result": record.result,
            "error": record.error,
        }
