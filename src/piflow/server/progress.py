"""Telling the user about runs: `piflow/*` notifications for plugins, standard LSP messages for the rest.

A client that opted in (`initializationOptions.piflow.customNotifications`) gets every run of its
projects as `piflow/runStarted`, `piflow/runProgress` (what changed, coalesced within ~100 ms per
run: the run's small fields and the agents whose progress changed; every agent, with `reset`, the
first time a run reaches this client),
`piflow/checkpoint`, `piflow/budgetApproval`, `piflow/runFinished` and `piflow/log`. Every client
also gets standard work-done progress (`$/progress`) for the runs it launched or resumed; a
client without the plugin is asked checkpoint and budget questions with `window/showMessageRequest`
(Approve / Reject) and told about the end of a run with `window/showMessage`. Requests to the
client are sent from background tasks: no handler ever waits for the user.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any, Final

from lsprotocol import types

from piflow.engine import events
from piflow.engine.lifecycle import ENDED
from piflow.engine.subagents.progress import SUBAGENT_LANES, SUBAGENT_PROGRESS, event_line
from piflow.engine.subagents.views import lane_board
from piflow.errors import WorkflowError, format_workflow_failure
from piflow.server import protocol
from piflow.server.base import LanguageFeature, PiflowServer, custom_notification
from piflow.server.runs import Host, RunEvent, Runs
from piflow.view_wire import lane_board_json

log = logging.getLogger(__name__)

THROTTLE_SECONDS: Final = 0.1
APPROVE: Final = "Approve"
REJECT: Final = "Reject"
_RESULT_PREVIEW: Final = 300


def progress_message(progress: dict[str, Any]) -> str:
    counts = progress["agentCounts"]
    parts = [progress["state"].replace("_", " ")]
    if progress.get("phase"):
        parts.append(f"phase {progress['phase']}")
    parts.append(f"{counts['settled']}/{counts['total']} agents")
    return " · ".join(parts)


Told = tuple[Any, ...]
"""An agent as a client was last told it: its progress fields' values, none of them a container,
so the collector stops tracking the tuple (a run's thousands of them cost no full collection)."""


def _told(agent: protocol.AgentProgress) -> Told:
    return tuple(agent.__dict__.values())


def progress_notification(progress: dict[str, Any], sent: dict[str, Told] | None) -> protocol.RunProgress:
    """The `piflow/runProgress` of `progress` (from `Runs.progress`) for a client last told the
    agents in `sent`: those that differ, or every agent with `reset` when `sent` is None."""
    shown = protocol.RunProgress.model_validate({**progress, "reset": sent is None})
    if sent is not None:
        shown.agents = [agent for agent in shown.agents if sent.get(agent.id) != _told(agent)]
        sent.update((agent.id, _told(agent)) for agent in shown.agents)
    return shown


def _wire_progress(progress: dict[str, Any], sent: dict[str, Told] | None) -> tuple[bytes, dict[str, Told]]:
    """Worker thread: the notification's wire frame, and the agents it told the client about."""
    notification = progress_notification(progress, sent)
    frame = custom_notification("piflow/runProgress", notification.to_wire())
    return frame, {agent.id: _told(agent) for agent in notification.agents}


class RunNotifications(LanguageFeature):
    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self._sent_agents: dict[str, dict[str, Told]] = {}
        """Per run: each agent as the client was last told (a run absent here gets a reset)."""
        self._changed: dict[str, set[str]] = {}
        """Per run: agents whose state events came since the last progress was read."""
        self._sent_at: dict[str, float] = {}
        self._tokens: dict[str, str] = {}
        self._began: set[str] = set()
        self._reports: dict[str, types.WorkDoneProgressReport] = {}
        """Per run with a progress token: its latest report, told as soon as the client's progress
        begins (a run can reach its checkpoint before the client has created the token)."""
        self._uris: dict[str, str | None] = {}
        self._announced: dict[str, asyncio.Future[None]] = {}
        self._sending: dict[str, asyncio.Lock] = {}
        self._boards: dict[str, dict[int, dict[str, Any]]] = {}
        """Per pi-subagents run: each `runs.lanes` board as its last event carried it (wire form)."""

    @property
    def _runs(self) -> Runs:
        return self.server.get_feature(Runs)

    def run_event(self, event: RunEvent) -> None:
        kind, payload = event.type, event.payload
        if kind == events.AGENT_STATE_CHANGED:
            self._changed.setdefault(event.run_id, set()).update(event.agents)
        elif kind == SUBAGENT_LANES and (board := lane_board(payload)) is not None:
            self._boards.setdefault(event.run_id, {})[board.call] = lane_board_json(board)
        if kind == events.RUN_STARTED:
            announced = self._announced[event.run_id] = asyncio.get_running_loop().create_future()
            self.server.spawn(self._started(event, announced))
        if kind in (events.RUN_STARTED, events.RUN_RESUMED) and event.own:
            self._begin(event)
        self._schedule_progress(event)
        if kind == events.RUN_STATE_CHANGED and payload.get("state") in ENDED:
            self.server.spawn(self._finished(event))
        elif kind == events.CHECKPOINT_STATE_CHANGED and payload.get("state") == "awaiting":
            self.server.spawn(self._checkpoint(event))
        elif kind == events.BUDGET_EVENT and payload.get("type") == "adjustment_requested":
            self._budget_approval(event)
        elif kind == events.RUN_LOG and payload.get("notice") != "checkpoint":
            # a waiting checkpoint already reaches the client as `piflow/checkpoint`
            self.server.notify_custom(
                "piflow/log", protocol.RunLog(run_id=event.run_id, message=str(payload.get("message", ""))).to_wire()
            )
        elif kind in SUBAGENT_PROGRESS and (line := event_line(kind, payload)) is not None:
            # a pi-subagents emit, host step or lane stage, as `piflow show --follow` prints it
            self.server.notify_custom("piflow/log", protocol.RunLog(run_id=event.run_id, message=line).to_wire())

    async def _uri(self, event: RunEvent) -> str | None:
        """The script of a run (remembered from its snapshots; looked up the first time)."""
        if event.run_id not in self._uris:
            self._uris[event.run_id] = await self._runs.uri_of(event.host, event.run_id)
        return self._uris[event.run_id]

    async def _started(self, event: RunEvent, announced: asyncio.Future[None]) -> None:
        try:
            started = protocol.RunStarted(
                run_id=event.run_id, uri=await self._uri(event), workflow_name=event.payload.get("workflowName", "")
            )
            self.server.notify_custom("piflow/runStarted", started.to_wire())
        finally:
            announced.set_result(None)

    # -- snapshots ----------------------------------------------------------------------------
    def _shows_progress(self, run_id: str) -> bool:
        """The client is told this run's progress: as notifications, or on a progress bar."""
        return self.server.options.custom_notifications or run_id in self._tokens

    def _schedule_progress(self, event: RunEvent) -> None:
        if not self._shows_progress(event.run_id) or event.run_id in self._pending:
            return
        wait = max(0.0, THROTTLE_SECONDS - (time.monotonic() - self._sent_at.get(event.run_id, 0.0)))
        loop = asyncio.get_running_loop()
        self._pending[event.run_id] = loop.call_later(
            wait, lambda: self.server.spawn(self._send_progress(event.host, event.run_id))
        )

    async def _send_progress(self, host: Host, run_id: str) -> dict[str, Any]:
        """Send what changed in the run; one at a time per run, so they arrive in order (the last one last)."""
        announced = self._announced.get(run_id)
        if announced is not None:
            await announced  # runStarted goes out before the first snapshot
        async with self._sending.setdefault(run_id, asyncio.Lock()):
            handle = self._pending.pop(run_id, None)
            if handle is not None:
                handle.cancel()
            self._sent_at[run_id] = time.monotonic()
            sent = self._sent_agents.get(run_id)
            changed = self._changed.pop(run_id, set())
            custom = self.server.options.custom_notifications
            progress = await self._runs.progress(host, run_id, None if sent is None else changed)
            self._uris[run_id] = progress["uri"]
            boards = self._boards.get(run_id)
            if boards:  # the live lane board (each event carries its board whole)
                progress["lanes"] = [boards[call] for call in sorted(boards)]
            if custom:
                # validated, converted and encoded in a worker thread: a run's first snapshot can
                # hold thousands of agents
                frame, agents = await self._runs.in_thread(_wire_progress, progress, sent)
                if sent is None:
                    self._sent_agents[run_id] = agents
                self.server.send_custom(frame)
            token = self._tokens.get(run_id)
            if token is not None and progress["state"] not in ENDED:
                total, settled = progress["agentCounts"]["total"], progress["agentCounts"]["settled"]
                report = self._reports[run_id] = types.WorkDoneProgressReport(
                    message=progress_message(progress), percentage=int(settled * 100 / total) if total else None
                )
                if token in self._began:
                    self.server.work_done_progress.report(token, report)
            return progress

    # -- $/progress -----------------------------------------------------------------------------
    def _begin(self, event: RunEvent) -> None:
        if event.run_id in self._tokens or not self.server.client_supports("window.work_done_progress"):
            return
        token = f"piflow-run-{event.run_id}-{uuid.uuid4().hex[:8]}"
        self._tokens[event.run_id] = token
        self.server.spawn(self._create_progress(event, token))

    async def _create_progress(self, event: RunEvent, token: str) -> None:
        try:
            await self.server.work_done_progress.create_async(token)
        except Exception as error:  # the client declined: no progress bar, nothing else changes
            log.info("work done progress refused: %s", error)
            self._tokens.pop(event.run_id, None)
            return
        if self._tokens.get(event.run_id) != token:
            return  # the run ended while the client created the token
        name = event.payload.get("workflowName") or "workflow"
        self.server.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=f"Workflow {name}", cancellable=True, message="running")
        )
        self._began.add(token)
        if (report := self._reports.get(event.run_id)) is not None:
            self.server.work_done_progress.report(token, report)
        cancelled = self.server.work_done_progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(
                lambda future: future.cancelled() and self.server.spawn(self._runs.stop(event.run_id))
            )

    def _end(self, run_id: str, message: str) -> None:
        token = self._tokens.pop(run_id, None)
        if token is not None and token in self._began:
            self._began.discard(token)
            self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            self.server.work_done_progress.tokens.pop(token, None)

    # -- the end of a run ---------------------------------------------------------------------
    async def _finished(self, event: RunEvent) -> None:
        try:
            view = await self._send_progress(event.host, event.run_id)  # the final snapshot, then the end
        except Exception:  # the end reaches the client even when the final snapshot cannot be read
            log.exception("cannot read the end of run %s", event.run_id)
            view = {"state": event.payload["state"], "uri": self._uris.get(event.run_id),
                    "workflowName": event.payload.get("workflowName", "workflow")}
        state = view["state"]
        finished: dict[str, Any] = {"runId": event.run_id, "uri": view.get("uri"), "state": state}
        if state == "completed":
            finished["result"] = view.get("result")
        error = view.get("error")
        if error:
            finished["error"] = {"code": error.get("code", "INTERNAL_ERROR"), "message": error.get("message", "")}
            if error.get("authored") is True:  # the author's own words are shown as written
                finished["error"]["authored"] = True
        self.server.notify_custom("piflow/runFinished", protocol.RunFinished.model_validate(finished).to_wire())
        self._end(event.run_id, state)
        for table in (self._announced, self._sending, self._sent_at, self._uris, self._sent_agents, self._changed,
                      self._boards, self._reports):
            table.pop(event.run_id, None)
        if event.own and not self.server.options.custom_notifications:
            self.server.window_show_message(_finished_message(view))

    # -- questions --------------------------------------------------------------------------------
    async def _checkpoint(self, event: RunEvent) -> None:
        payload = event.payload
        name = str(payload.get("name", ""))
        question = protocol.CheckpointRequest(
            run_id=event.run_id, uri=await self._uri(event), name=name, prompt=str(payload.get("prompt", "")),
            context=payload.get("context"),
        )
        if self._shows_progress(event.run_id):
            # a fresh snapshot first (in order with any snapshot already on its way), so a client
            # never sees the run as running after it was asked the question
            await self._send_progress(event.host, event.run_id)
        if self.server.options.custom_notifications:
            self.server.notify_custom("piflow/checkpoint", question.to_wire())
        elif event.own:
            text = (f"Workflow {payload.get('workflowName', '')} checkpoint {name}: {question.prompt}\n"
                    f"Context: {json.dumps(question.context)}")
            await self._ask(event.run_id, text, name=name, proposal_id=None)

    def _budget_approval(self, event: RunEvent) -> None:
        payload = event.payload
        proposal_id = str(payload.get("proposalId", ""))
        approval = protocol.BudgetApproval.model_validate(
            {"runId": event.run_id, "proposalId": proposal_id, "consumed": payload.get("usage") or {},
             "previous": payload.get("previous") or {}, "proposed": payload.get("proposed") or {}}
        )
        if self.server.options.custom_notifications:
            self.server.notify_custom("piflow/budgetApproval", approval.to_wire())
        elif event.own:
            text = (f"Workflow {payload.get('workflowName', '')} asks to raise its budget to "
                    f"{json.dumps(payload.get('proposed'))} (consumed {json.dumps(payload.get('usage'))}).")
            self.server.spawn(self._ask(event.run_id, text, name=None, proposal_id=proposal_id))

    async def _ask(self, run_id: str, text: str, *, name: str | None, proposal_id: str | None) -> None:
        """Ask with Approve/Reject; a dismissed question stays pending (lenses and the CLI can answer)."""
        choice = await self.server.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Info,
                message=text,
                actions=[types.MessageActionItem(APPROVE), types.MessageActionItem(REJECT)],
            )
        )
        if choice is None or choice.title not in (APPROVE, REJECT):
            return
        try:
            await self._runs.respond(run_id, name=name, proposal_id=proposal_id, approved=choice.title == APPROVE)
        except WorkflowError as error:
            self.server.window_show_message(
                types.ShowMessageParams(types.MessageType.Error, format_workflow_failure(error))
            )

    async def shutdown(self) -> None:
        for handle in self._pending.values():
            handle.cancel()


def _finished_message(view: dict[str, Any]) -> types.ShowMessageParams:
    name, state = view.get("workflowName", "workflow"), view["state"]
    error = view.get("error")
    if state == "completed":
        result = json.dumps(view.get("result"), ensure_ascii=False)
        if len(result) > _RESULT_PREVIEW:
            result = result[: _RESULT_PREVIEW - 1] + "…"
        return types.ShowMessageParams(types.MessageType.Info, f"Workflow {name} completed: {result}")
    if error:
        prose = format_workflow_failure(WorkflowError.from_json(error))
        kind = types.MessageType.Error if state == "failed" else types.MessageType.Warning
        return types.ShowMessageParams(kind, f"Workflow {name} {state.replace('_', ' ')}: {prose}")
    return types.ShowMessageParams(types.MessageType.Warning, f"Workflow {name} {state.replace('_', ' ')}.")
