"""Serving a worker's primitive calls: dispatch, replay from the journal, batched settling."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import anyio

from piflow.engine import events
from piflow.engine.agents import AgentRunner
from piflow.engine.journal import OperationKind, agent_path, conversation_id, turn_path
from piflow.engine.resolution import resolve_agent
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun

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
        self._results: list[dict[str, Any]] = []
        self._ready = anyio.Event()

    def finish(self, call_id: int, value: Any = None, error: WorkflowError | None = None) -> None:
        if error is None:
            self._results.append({"id": call_id, "ok": True, "value": value})
        else:
            self._results.append({"id": call_id, "ok": False, "error": error.to_json()})
        self._ready.set()

    async def flush_forever(self, settle: Any) -> None:
        """Send every finished answer in one message, in call order, as soon as any is ready."""
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            await anyio.lowlevel.checkpoint()
            batch, self._results = self._results, []
            if batch:
                batch.sort(key=lambda result: result["id"])
                await settle(batch)

    async def serve(self, call: dict[str, Any]) -> None:
        call_id = call["id"]
        try:
            value = await self._dispatch(call)
        except WorkflowError as exc:
            self.finish(call_id, error=exc)
        except Exception:
            # A bug of piflow's, not the script's: fail this call (the script may catch it) and keep
            # the engine, and every other run it hosts, alive.
            log.exception("serving a %s call failed", call.get("op"))
            self.finish(call_id, error=WorkflowError(
                "INTERNAL_ERROR", f"piflow failed to serve this {call.get('op')} call (a bug; the log has details)"
            ))
        else:
            self.finish(call_id, value)

    async def _dispatch(self, call: dict[str, Any]) -> Any:
        op = call.get("op")
        if op == "agent":
            return await self._agent(call)
        if op == "turn":
            return await self._turn(call)
        if op == "checkpoint":
            return await self.run.checkpoint(call.get("value"), call["label"])
        if op == "phase":
            return await self.phase(call.get("name"))
        if op == "log":
            return await self.log(call.get("message"))
        if op == "function":
            return await self.run.call_function(self, call)
        raise WorkflowError("INTERNAL_ERROR", f"Unknown worker call: {op}")

    async def _agent(self, call: dict[str, Any]) -> Any:
        prompt = call.get("prompt")
        if not isinstance(prompt, str):
            raise WorkflowError("INTERNAL_ERROR", "agent prompt must be a string")
        options = call.get("options")
        options = {} if options is None else options
        identity = call["identity"]
        path = agent_path(identity["path"], identity["callSite"], identity["occurrence"])
        return await self.run_agent(prompt, options, OperationKind.AGENT, path, identity, None)

    async def _turn(self, call: dict[str, Any]) -> Any:
        prompt = call.get("prompt")
        if not isinstance(prompt, str):
            raise WorkflowError("INVALID_METADATA", "conversation.run prompt must be a string")
        convo = call["conversation"]
        cid = conversation_id(convo["name"], convo["path"], convo["callSite"], convo["occurrence"])
        path = turn_path(cid, call["turn"])
        return await self.run_agent(prompt, call.get("options") or {}, OperationKind.TURN, path, convo, cid)

    async def run_agent(
        self,
        prompt: str,
        options: Any,
        kind: OperationKind,
        path: str,
        identity: dict[str, Any],
        conversation: str | None,
    ) -> Any:
        """An agent or conversation turn: its journaled value on replay, else a new agent run to a value."""
        run = self.run
        recorded = run.operations.check(kind, path)
        if recorded is not None:
            return recorded.value
        spec = resolve_agent(options, run.resolution, "conversation" if kind is OperationKind.TURN else "agent")
        await run.lifecycle.enter()
        try:
            runner = AgentRunner(
                run,
                spec,
                prompt,
                kind,
                path,
                list(identity.get("path") or []),
                identity.get("worktreeOwner"),
                conversation,
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

