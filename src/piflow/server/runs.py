"""Runs as the editor sees them: the engine that owns runs launched here, and the shared run stores.

Each project has one run store (the one `piflow run` uses, so the terminal and the editor see the
same runs). The server opens it read-only-ish to list and show runs, and starts an engine on it
only when it launches, resumes or controls a run. Events reach the features two ways — the
engine's bus for the runs this process owns, and polling `events(after_seq=...)` for runs another
process (a `piflow run` in a terminal, another editor) owns — and a per-run high-water mark makes
each event count exactly once. Shutting the server down shuts its engines down, which leaves their
unfinished runs `interrupted` and resumable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pygls.uris import from_fs_path, to_fs_path

from piflow.engine.lifecycle import ENDED
from piflow.engine.store import RunRecord, RunStore
from piflow.engine.views import agent_detail, attention_key, run_summary, run_view
from piflow.errors import WorkflowError
from piflow.server.base import LanguageFeature, PiflowServer

if TYPE_CHECKING:
    from piflow.engine.engine import Engine

log = logging.getLogger(__name__)

POLL_SECONDS: Final = 0.25


@dataclass(frozen=True)
class RunEvent:
    """One run event as the features receive it; `own` when this server owns (launched/resumed) the run."""

    seq: int
    run_id: str
    type: str
    payload: dict[str, Any]
    own: bool
    host: Host


def script_uri(script_path: str | None) -> str | None:
    return from_fs_path(script_path) if script_path else None


def canonical_path(uri: str) -> str | None:
    """The script path a run records for a document (resolved, as `piflow run` stores it)."""
    path = to_fs_path(uri)
    return str(Path(path).resolve()) if path else None


@dataclass(eq=False)
class Host:
    """One project's run store, and the engine on it once one is needed."""

    root: Path
    store_path: Path
    reader: RunStore | None = None
    engine: Engine | None = None
    started: asyncio.Future[Engine] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    after_seq: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)
    born_watched: bool = False
    """The store did not exist when the server began following it: all its events are news."""

    def open_reader(self) -> RunStore | None:
        """Worker thread: open the store for reading once it exists (a project without runs has none)."""
        if self.reader is None and self.store_path.exists():
            self.reader = RunStore.open(self.store_path)
            if not self.born_watched:  # runs from before the editor came are history, not news
                self.after_seq = self.reader.last_event_seq()
        return self.reader


class Runs(LanguageFeature):
    """The run stores of the open projects and the engines the server runs on them."""

    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._hosts: dict[Path, Host] = {}
        self._poller: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._folders: asyncio.Task[None] | None = None

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
        store_path = project.store
        if store_path is None:
            raise WorkflowError("CONFIG_ERROR", f"No run store for the project at {root}")
        host = self._hosts.get(store_path)
        if host is None:
            host = self._hosts[store_path] = Host(root, store_path)
            host.born_watched = await self.server.run_in_thread(host.open_reader) is None
        if self._poller is None:
            self._loop = asyncio.get_running_loop()
            self._poller = self.server.spawn(self._poll())
        return host

    async def host_for_path(self, path: str | None) -> Host:
        from piflow.server.projects import Projects

        return await self.host_for(self.server.get_feature(Projects).root_for(path))

    def hosts(self) -> list[Host]:
        return list(self._hosts.values())

    async def engine(self, host: Host) -> Engine:
        """The engine of a host, started on first need; it lives until the server shuts down."""
        if host.started is None:
            host.started = asyncio.get_running_loop().create_future()
            self.server.spawn(self._run_engine(host))
        return await asyncio.shield(host.started)

    async def _run_engine(self, host: Host) -> None:
        from piflow.engine.engine import Engine

        assert host.started is not None
        try:
            store = await self.server.run_in_thread(RunStore.open, host.store_path)
            await self.server.run_in_thread(host.open_reader)
            async with Engine(store) as engine:
                host.engine = engine
                unsubscribe = engine.bus.subscribe(lambda event: self._from_bus(host, event))
                host.started.set_result(engine)
                try:
                    await host.stop.wait()
                finally:
                    unsubscribe()
        except BaseException as error:
            if not host.started.done():
                host.started.set_exception(error if isinstance(error, Exception) else RuntimeError("engine stopped"))
            if not isinstance(error, asyncio.CancelledError):
                log.exception("the engine of %s stopped", host.store_path)
            raise
        finally:
            host.engine = None

    async def host_of_run(self, run_id: str) -> tuple[Host, str]:
        """The host whose store holds `run_id` (a prefix of 8+ characters is enough) and the full id."""
        errors: list[WorkflowError] = []
        for host in await self._all_hosts():
            reader = await self.server.run_in_thread(host.open_reader)
            if reader is None:
                continue
            try:
                return host, await self.server.run_in_thread(reader.resolve_run_id, run_id)
            except WorkflowError as error:
                errors.append(error)
        ambiguous = [error for error in errors if "Ambiguous" in error.message]
        raise ambiguous[0] if ambiguous else WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")

    # -- events -------------------------------------------------------------------------------
    def _from_bus(self, host: Host, event: Any) -> None:
        """Engine bus listener: may be called off the loop; hand the event to the loop."""
        loop = self._loop
        if loop is None:
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._deliver(host, event.seq, event.run_id, event.type, event.payload)
        else:
            loop.call_soon_threadsafe(self._deliver, host, event.seq, event.run_id, event.type, event.payload)

    def _deliver(self, host: Host, seq: int, run_id: str, kind: str, payload: Any) -> None:
        if seq <= host.seen.get(run_id, 0):
            return
        host.seen[run_id] = seq
        started = kind in ("workflow:run-started", "workflow:run-resumed")
        if started and host.engine is not None and run_id in host.engine.active:
            host.own.add(run_id)
        event = RunEvent(seq, run_id, kind, payload if isinstance(payload, dict) else {}, run_id in host.own, host)
        self.server.dispatch("run_event", event)

    async def _poll(self) -> None:
        """Follow every store for events written by other processes."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            for host in self.hosts():
                try:
                    found = await self.server.run_in_thread(_events_after, host)
                except WorkflowError as error:
                    log.warning("cannot read the run store %s: %s", host.store_path, error.message)
                    continue
                for event in found:
                    host.after_seq = max(host.after_seq, event.seq)
                    self._deliver(host, event.seq, event.run_id, event.type, event.payload)

    # -- control ------------------------------------------------------------------------------
    async def launch(self, path: str, script: str, **options: Any) -> str:
        """Launch a script (its text as the editor has it) in its project, owned by this server."""
        from piflow.engine.engine import LaunchRequest
        from piflow.engine.environment import project_root

        host = await self.host_for_path(path)
        engine = await self.engine(host)
        cwd = project_root(str(Path(path).parent))
        if options.get("fixtures"):  # a relative fixture file is the project's, as in piflow.toml
            options["fixtures"] = str(Path(cwd, options["fixtures"]).resolve())
        request = LaunchRequest(script=script, cwd=cwd, script_path=path, **options)
        run_id = await engine.launch(request)
        host.own.add(run_id)
        return run_id

    async def resume(self, run_id: str, budget: Any) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        host.own.add(run_id)  # a budget proposal or a resumed run is this editor's to follow
        reply = await (await self.engine(host)).resume(run_id, budget)
        return {"runId": run_id, **reply}

    async def pause(self, run_id: str) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        return {"runId": run_id, "state": (await self.engine(host)).pause(run_id)}

    async def stop(self, run_id: str) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        reply: dict[str, Any] = (await self.engine(host)).stop(run_id)
        return reply

    async def respond(
        self, run_id: str, *, name: str | None, proposal_id: str | None, approved: bool
    ) -> dict[str, Any]:
        host, run_id = await self.host_of_run(run_id)
        engine = await self.engine(host)
        reply: dict[str, Any] = engine.respond(run_id, name=name, proposal_id=proposal_id, approved=approved)
        return reply

    # -- reads (worker threads) ----------------------------------------------------------------
    async def summaries(self, path: str | None = None, states: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Runs of one script (a resolved path) or of every open project, by attention order;
        only those in `states`, if given (a script's history can be long: lenses want the live ones)."""
        found: list[dict[str, Any]] = []
        for host in await self._all_hosts():
            found.extend(await self.server.run_in_thread(_summaries, host, path, states))
        return sorted(found, key=attention_key)

    async def latest_with_agents(self, host: Host, path: str) -> str | None:
        """The newest run of a script that started agents (what inlay hints report on)."""
        return await self.server.run_in_thread(_latest, host, path, True)

    async def latest(self, host: Host, path: str) -> str | None:
        """The newest run of a script (a new run replaces what the previous one reported)."""
        return await self.server.run_in_thread(_latest, host, path, False)

    async def view(self, host: Host, run_id: str, *, details: bool = False) -> dict[str, Any]:
        """A run as `run_view` shows it (agents with outputs and attempts when `details`), with its uri."""
        view = await self.server.run_in_thread(_view, host, run_id, details)
        view["uri"] = script_uri(view.get("scriptPath"))
        return view

    async def agent(self, host: Host, run_id: str, agent_id: str) -> dict[str, Any]:
        """One agent with its full output."""
        return await self.server.run_in_thread(lambda: agent_detail(_reader(host, run_id), run_id, agent_id))

    # -- lifecycle ----------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Interrupt the runs this server owns (resumable later), then stop following stores."""
        if self._poller is not None:
            self._poller.cancel()
        stopping = []
        for host in self.hosts():
            host.stop.set()
            if host.started is not None and host.started.done() and not host.started.exception():
                stopping.append(host)
        for _ in range(200):  # the engines mark their runs interrupted before they exit
            if all(host.engine is None for host in stopping):
                break
            await asyncio.sleep(0.025)
        for host in self.hosts():
            if host.reader is not None:
                with contextlib.suppress(Exception):
                    host.reader.close()


def _events_after(host: Host) -> list[Any]:
    reader = host.open_reader()
    return [] if reader is None else reader.events(after_seq=host.after_seq, limit=500)


def _effective(record: RunRecord, reader: RunStore) -> RunRecord:
    """A run whose owner died shows as interrupted (the engine records that when it next touches it)."""
    if record.state in ENDED or reader.lease_owner(record.id) is not None:
        return record
    from dataclasses import replace

    return replace(record, state="interrupted")


def _summaries(host: Host, path: str | None, states: frozenset[str] | None) -> list[dict[str, Any]]:
    reader = host.open_reader()
    if reader is None:
        return []
    summaries = []
    for record in reader.list_runs(script_path=path):
        record = _effective(record, reader)
        if states is not None and record.state not in states:
            continue
        summary = run_summary(record, reader.agents(record.id))
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


def _view(host: Host, run_id: str, details: bool) -> dict[str, Any]:
    reader = _reader(host, run_id)
    view = run_view(reader, run_id, details=details)
    record = reader.get_run(run_id)
    if record is not None:
        view["state"] = _effective(record, reader).state
    return view
