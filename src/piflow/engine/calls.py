"""Serving a worker's primitive calls: dispatch, replay from the journal, batched settling."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, assert_never

import anyio

from piflow.engine import events
from piflow.engine.journal import OperationKind, agent_path, conversation_id, conversation_name, turn_path
from piflow.engine.resolution import resolve_agent
from piflow.engine.worker.protocol import (
    AgentCall,
    CheckpointCall,
    FunctionCall,
    LogCall,
    PhaseCall,
    Placement,
    Settled,
    TurnCall,
    WorkerCall,
)
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun
    from piflow.engine.subagents.calls import SubagentCalls
    from piflow.engine.subagents.host import HostSteps
    from piflow.engine.worker.subagents_protocol import SubagentsCall

log = logging.getLogger(__name__)

LOG_LIMIT_BYTES = 4096


def cut_utf8(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` UTF-8 bytes at a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


class CallServer:
    """Answers one worker execution's calls; finished answers go back in deterministic batches."""

    def __init__(self, run: ActiveRun) -> None:
        self.run = run
        self._subagents: SubagentCalls | None = None
        self._host_steps: HostSteps | None = None
        self._results: list[Settled] = []
        self._ready = anyio.Event()

    def finish(self, answer: Settled) -> None:
        self._results.append(answer)
        self._ready.set()

    async def flush_forever(self, settle: Callable[[list[Settled]], Awaitable[None]]) -> None:
        """Send every finished answer in one message, in call order, as soon as any is ready."""
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            await anyio.lowlevel.checkpoint()
            batch, self._results = self._results, []
            if batch:
                batch.sort(key=lambda answer: answer.id)
                await settle(batch)

    def replayed(self, call: WorkerCall) -> bool:
        """Answer an agent call whose outcome is journaled now, without a task of its own: a resume
        replays thousands, and a task each cost more than the rest of the replay (spec G.3)."""
        journal = self.run.operations
        if not len(journal) or not isinstance(call, AgentCall) or not isinstance(call.prompt, str):
            return False
        placement = call.placement
        try:
            recorded = journal.check(OperationKind.AGENT, agent_path(placement.path, call.call_site,
                                                                     placement.occurrence))
        except WorkflowError as exc:
            self.finish(Settled(call.id, error=exc))
            return True
        if recorded is None:
            return False
        text = recorded.text  # journaled in an earlier session: its JSON text goes to the worker as it is
        self.finish(Settled(call.id, text=text) if text is not None else Settled(call.id, recorded.value))
        return True

    async def serve(self, call: WorkerCall) -> None:
        try:
            value = await self._dispatch(call)
        except WorkflowError as exc:
            self.finish(Settled(call.id, error=exc))
        except Exception:
            # A bug of piflow's, not the script's: fail this call (the script may catch it) and keep
            # the engine, and every other run it hosts, alive.
            log.exception("serving a %s call failed", call.op)
            self.finish(Settled(call.id, error=WorkflowError(
                "INTERNAL_ERROR", f"piflow failed to serve this {call.op} call (a bug; the log has details)"
            )))
        else:
            self.finish(Settled(call.id, value))

    async def _dispatch(self, call: WorkerCall) -> Any:
        match call:
            case AgentCall():
                return await self._agent(call)
            case TurnCall():
                return await self._turn(call)
            case CheckpointCall():
                return await self.run.checkpoint(call.value, call.label)
            case PhaseCall():
                return await self.phase(call.name)
            case LogCall():
                return await self.log(call.message)
            case FunctionCall():
                return await self.run.call_function(self, call)
        return await self._subagents_call(call)

    async def _subagents_call(self, call: SubagentsCall) -> Any:
        """A call only pi-subagents scripts make (their types are imported on such a script's first call)."""
        from piflow.engine.worker.subagents_protocol import (
            ChildrenCall,
            EmitCall,
            HostCall,
            LanesCall,
            StateCall,
            StatusCall,
            SteerCall,
        )

        match call:
            case ChildrenCall():
                return await self.subagents.launch(call)
            case SteerCall():
                return await self.subagents.steer(call)
            case StatusCall():
                return await self.subagents.status(call)
            case EmitCall():
                return await self.subagents.emit(call)
            case StateCall():
                return await self.subagents.state_call(call)
            case HostCall():
                return await self.host_steps.call(call.key, call.params)
            case LanesCall():
                from piflow.engine.subagents.lanes import run_lanes

                return await run_lanes(self.subagents, call.lanes)
        assert_never(call)

    @property
    def subagents(self) -> SubagentCalls:
        """The pi-subagents side of this execution (made on its first call: only that dialect calls it)."""
        if self._subagents is None:
            from piflow.engine.subagents.calls import SubagentCalls

            self._subagents = SubagentCalls(self.run)
        return self._subagents

    @property
    def host_steps(self) -> HostSteps:
        """The `runs.host` steps of this execution (their keys share the children's namespace)."""
        if self._host_steps is None:
            from piflow.engine.subagents.host import HostSteps

            self._host_steps = HostSteps(self.run, self.subagents.children)
        return self._host_steps

    async def _agent(self, call: AgentCall) -> Any:
        if not isinstance(call.prompt, str):
            raise WorkflowError("INTERNAL_ERROR", "agent prompt must be a string")
        options = {} if call.options is None else call.options
        placement = call.placement
        path = agent_path(placement.path, call.call_site, placement.occurrence)
        return await self.run_agent(call.prompt, options, OperationKind.AGENT, path, placement, None)

    async def _turn(self, call: TurnCall) -> Any:
        if not isinstance(call.prompt, str):
            raise WorkflowError("INVALID_METADATA", "conversation.run prompt must be a string")
        placement = call.placement
        cid = conversation_id(call.conversation, placement.path, call.call_site, placement.occurrence)
        path = turn_path(cid, call.turn)
        return await self.run_agent(
            call.prompt, call.options or {}, OperationKind.TURN, path, placement, cid, turn=call.turn
        )

    async def run_agent(
        self,
        prompt: str,
        options: Any,
        kind: OperationKind,
        path: str,
        placement: Placement,
        conversation: str | None,
        turn: int = 0,
        breadcrumb: str | None = None,
    ) -> Any:
        """An agent or conversation turn: its journaled value on replay, else a new agent run to a value.

        `breadcrumb` names the extension function (`outer > inner`) that started the agent, if one did.
        """
        run = self.run
        recorded = run.operations.check(kind, path)
        if recorded is not None:
            if conversation is not None:  # a later turn continues from this one's head (spec G.3)
                head = run.store.conversation_head(run.id, conversation)
                if head is None or head[0] < turn:
                    message = (f"Conversation {conversation_name(conversation)}: the state of turn {turn} is "
                               f"missing from the run store, so turn {turn + 1} cannot continue it")
                    run.emit(events.RUN_WARNING, {"message": message})
                    raise WorkflowError("RESUME_INCOMPATIBLE", "Completed conversation turn has no persisted head")
            return recorded.value
        spec = resolve_agent(options, run.resolution, "conversation" if kind is OperationKind.TURN else "agent")
        from piflow.engine.agents import AgentRunner  # a resume that only replays never loads the agent machinery

        await run.lifecycle.enter()
        try:
            runner = AgentRunner(
                run,
                spec,
                prompt,
                kind,
                path,
                list(placement.path),
                placement.worktree_owner,
                conversation,
                turn,
                parent_breadcrumb=breadcrumb,
            )
            return await runner.execute()
        finally:
            run.lifecycle.leave()

    async def phase(self, name: Any) -> None:
        if not isinstance(name, str):
            raise WorkflowError("INTERNAL_ERROR", "phase name must be a string")
        run = self.run
        await run.lifecycle.enter()
        try:
            run.set_phase(name)
        finally:
            run.lifecycle.leave()

    async def log(self, message: Any) -> None:
        if not isinstance(message, str):
            raise WorkflowError("INTERNAL_ERROR", "log message must be a string")
        run = self.run
        await run.lifecycle.enter()
        try:
            with run.batch():
                run.emit(events.RUN_LOG, {"message": cut_utf8(message, LOG_LIMIT_BYTES)})
        finally:
            run.lifecycle.leave()


def checkpoint_notice(workflow_name: str, label: str, prompt: str, context: Any) -> str:
    """What a user is told when a checkpoint waits for an answer (spec F.4)."""
    return (
        f"Workflow {workflow_name} checkpoint {label}: {prompt}\nContext: "
        f"{json.dumps(context, separators=(',', ':'))}\nRespond with piflow approve or piflow reject."
    )

