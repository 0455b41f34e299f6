"""The `pi` backend: every attempt is a real pi agent session, run by the `pi` CLI.

Agents get pi's own tools, system prompt, model registry (`<agentDir>/models.json`), auth,
settings and session files; piflow only drives the session and keeps the books.

How an attempt maps onto pi (0.80.x, see docs/backends.md):

- Process: `pi --mode rpc` (the JSON event stream of `--mode json`, plus commands on stdin, so
  the submit/repair prompts and steering happen in the same session), started in the
  attempt's cwd in a new process group, with `--model <provider>/<model>`,
  `--thinking <level>` (when the request has one), `--tools <list>` (the request's tools, plus
  `workflow_result` with an output schema; `--no-tools` when that list is empty),
  `--append-system-prompt <file>` holding the role body, `--name
  <workflow>:<label>:attempt-<n>` (spec J.3) and `-e <bridge>` (`pi_bridge`). The environment
  is passed through, with `PI_CODING_AGENT_DIR` set when the backend was given an agent dir.
- Turns (spec H): the bridge holds every model turn at `turn_start` until `before_turn` passed
  and at `turn_end` until `after_turn` charged it. Usage is the turn's assistant message usage
  (pi's `input`, `output`, `cacheRead`, `cacheWrite` and `cost.total`, priced from the model's
  `cost` table), so the sum is the attempt's delta of the session's cumulative stats. A turn
  whose message calls tools is not final; with an output schema only the accepting turn is.
  A failed check kills pi (the session is aborted); a soft-limit steering message is queued
  with RPC `steer` before the turn is released, so the next model call sees it (after a turn
  without tool calls pi makes one more model call for it, as the reference did). LLM calls pi
  makes outside turns (context compaction summaries) are neither gated nor charged: pi
  reports no usage for them.
- Output schema (spec J.4): the bridge registers `workflow_result` with the schema as its
  parameters, and piflow judges each call: `Result acceptance is not enabled yet.` during the
  task prompt, `Result does not match the required schema.` when `validate_result` fails,
  else `Result accepted.`, which ends pi's tool batch. Then the submit prompt, then at most one
  repair prompt, then RESULT_INVALID. Prose is never parsed. Arguments pi's own validator
  rejects never reach piflow; the model gets pi's validation error instead (as upstream).
- Child agents (spec J.5): with children, the bridge registers `agent`, `get_subagent_result`
  and `steer_subagent` (named in `--tools`) and each call is a `piflow:tool` dialog, answered by
  the same tool runtime and engine path (`engine.children`) as on the openai backend.
- Policy and audit (spec D, J.3): the bridge takes the skills of `disabledAgentResources` out
  of the system prompt and switches off the tools of its extensions, then reports the prompt
  pi will send, which the attempt records as its effective system prompt.
- Progress: thinking deltas are `reasoning`, text deltas `responding`, a tool execution is
  its tool name. Any other extension dialog is cancelled: nobody is there to answer it.
- Failures: an assistant message ending in `error` whose message names a rate limit (429,
  `rate limit`, `too many requests`; quota and billing exhaustion excluded) raises
  `ProviderRateLimited` at once, without waiting for pi's own retries. Other provider errors
  are left to pi's auto-retry (its `retry` settings); when pi gives up, the attempt is
  AGENT_FAILED with pi's error message. pi exiting early is AGENT_FAILED with its stderr.
- Conversations (spec J.6): a turn forks (`--fork`) the session file of the conversation's
  last successful turn, so a failed or rate-limited attempt leaves no trace in the next one.
  The head (the session file) is saved in the run store with the turn's journaled result, so
  a turn after a crash, a kill -9 or a cold resume forks the same session; the engine checks
  that a turn continues its head with the same model and execution policy (which covers the
  role's system-prompt append, tools and cwd), and a session file that is gone is
  RESUME_INCOMPATIBLE, never a silent fresh start.
- Transcripts: pi's own session file (`get_state` → `sessionFile`, `sessionId`).
- Steering (`runs.steer`, pi-subagents A.8): the backend keeps each running attempt by agent id.
  A message for an attempt whose task prompt pi has accepted goes to pi at once as RPC `steer`
  (mode `steer` or `auto`: delivered after the current turn's tool calls, before the next model
  call) or `follow_up` (delivered when the agent would stop), and is `delivered` once pi
  answers. A message for an agent with no such attempt (not started yet, between retries,
  settled) is `queued` and sent right after the next attempt's task prompt.
- Ending: after a settled session, stdin is closed so pi shuts down; otherwise (errors,
  budget stops, cancellation, timeouts) the whole process group is killed at once. Both paths
  end by killing the group, so nothing the agent started (bash tool jobs) outlives it.

Finding pi: the `command` argument, else `$PIFLOW_PI_COMMAND` (a shell-style command line),
else `pi` on PATH, else `npx --no-install --package=@earendil-works/pi-coding-agent pi` (a
local or global install, never a download); none of them → CONFIG_ERROR saying how to install.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE
from typing import Any, Final

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from piflow.config import CHILD_AGENT_TOOL, ResourcePolicy
from piflow.config.pi_tools import (
    INSTALL_HINT,
    PI_PACKAGE,
    PiCommand,
    PiTool,
    PiToolList,
    cached_pi_tools,
    find_pi,
    pi_tools_fingerprint,
    save_pi_tools,
)
from piflow.engine.backends.base import AttemptControl, AttemptRequest, ProviderRateLimited, Usage
from piflow.engine.backends.openai import RESULT_TOOL, RESULT_TOOL_DESCRIPTION
from piflow.engine.backends.pi_bridge import DIALOG_PREFIX, write_bridge
from piflow.engine.prompts import NOT_ACCEPTING, RESULT_ACCEPTED, RESULT_REJECTED, submit_result
from piflow.engine.tools import ToolRuntime
from piflow.engine.tools.registry import child_agent_tools
from piflow.errors import WorkflowError

__all__ = ["PI_PACKAGE", "PiBackend", "PiCommand", "current_pi_tools", "find_pi", "probe_pi_tools"]

TERMINAL_ERROR: Final = "Native Pi assistant ended with a terminal provider error"
# One event carries whole messages (`agent_end` all of a run's), so lines can be large.
MAX_EVENT_BYTES: Final = 64 * 1024 * 1024
SHUTDOWN_GRACE: Final = 5.0
PROBE_TIMEOUT: Final = 60.0
"""How long a tool probe may take: pi's start-up (Node, extension loading) on a loaded machine."""
STDERR_TAIL: Final = 2000
_TOOLS_DIALOG: Final = DIALOG_PREFIX + "tools"
_DIALOG_METHODS: Final = frozenset({"select", "confirm", "input", "editor"})
_FAILED_STOPS: Final = frozenset({"error", "aborted"})
_RATE_LIMITED: Final = re.compile(r"\b429\b|rate.?limit|too many requests", re.IGNORECASE)
# pi's own list of provider limits that are not transient: pausing the run would not help.
_EXHAUSTED: Final = re.compile(
    r"insufficient_quota|quota exceeded|out of budget|billing|usage limit|available balance", re.IGNORECASE
)


@dataclass(frozen=True)
class _Head:
    """A conversation after its last successful turn: the session file the next turn forks (the
    engine keeps and checks the rest of the turn's identity, spec J.6)."""

    session_file: str

    def to_json(self) -> dict[str, Any]:
        return {"sessionFile": self.session_file}

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> _Head:
        session_file = state.get("sessionFile")
        if not isinstance(session_file, str):
            message = "Cannot reopen conversation transcript: its saved state is damaged"
            raise WorkflowError("RESUME_INCOMPATIBLE", message)
        return cls(session_file)


class PiBackend:
    """Runs each attempt as a pi session in RPC mode (see the module docstring)."""

    name = "pi"

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        agent_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        if agent_dir is not None:
            self._environ["PI_CODING_AGENT_DIR"] = str(agent_dir)
        self._command = PiCommand(tuple(command)) if command is not None else None
        self._running: dict[str, _Attempt] = {}
        self._queued: dict[str, list[_Steer]] = {}
        """Steering for agents without a live attempt, sent after the next attempt's task prompt."""

    async def steer(self, agent_id: str, message: str, mode: str) -> str:
        """Deliver `message` to the agent's live pi session (`runs.steer`), else queue it for its next attempt."""
        steer = _Steer("follow_up" if mode == "follow_up" else "steer", message)
        attempt = self._running.get(agent_id)
        if attempt is None or not attempt.live:
            self._queued.setdefault(agent_id, []).append(steer)
            return "queued"
        await attempt.deliver(steer)
        return "delivered"

    def command(self) -> PiCommand:
        """The command attempts run; found on first use, so a backend is cheap to create."""
        if self._command is None:
            self._command = find_pi(self._environ)
        return self._command

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        command = self.command()
        head = self._head(request, control)
        with tempfile.TemporaryDirectory(prefix="piflow-pi-") as scratch:
            served = _served_tools(request)
            argv = [*command.argv, *self._arguments(request, Path(scratch), head, served)]
            async with _launch(argv, request.cwd, self._environ, Path(scratch), command.via_npx) as pi:
                attempt = _Attempt(pi, request, control, served)
                value = await self._steerable(attempt)
        if request.conversation:
            head = _Head(attempt.session_file)
            control.save_conversation_state(head.to_json())
        return value

    async def _steerable(self, attempt: _Attempt) -> Any:
        """Run `attempt`, reachable by `steer` (and handed the steering queued for its agent) meanwhile."""
        agent_id = attempt.request.agent_id
        attempt.queued = self._queued.setdefault(agent_id, [])
        self._running[agent_id] = attempt
        try:
            return await attempt.run()
        finally:
            del self._running[agent_id]
            attempt.close()
            if not attempt.queued:
                self._queued.pop(agent_id, None)

    def _head(self, request: AttemptRequest, control: AttemptControl) -> _Head | None:
        """The session of the conversation's previous turn, which must still exist (spec J.6)."""
        state = control.conversation_state() if request.conversation else None
        if state is None:
            return None
        head = _Head.from_json(state)
        if not Path(head.session_file).is_file():
            message = f"Cannot reopen conversation transcript: {head.session_file} does not exist"
            raise WorkflowError("RESUME_INCOMPATIBLE", message)
        return head

    @staticmethod
    def _arguments(request: AttemptRequest, scratch: Path, head: _Head | None, served: ToolRuntime) -> list[str]:
        args = ["--mode", "rpc", "--model", request.model.name]
        if request.thinking is not None:
            args += ["--thinking", request.thinking]
        own = [tool for tool in request.tools if tool != CHILD_AGENT_TOOL]  # the bridge serves `agent` (J.5)
        own += served.tools
        tools = [*own, RESULT_TOOL] if request.output_schema is not None else own
        args += ["--tools", ",".join(tools)] if tools else ["--no-tools"]
        if request.system_append:
            # A file, because pi reads `--append-system-prompt` as a path when one exists by that name.
            role = scratch / "role.md"
            role.write_text(request.system_append, encoding="utf-8")
            args += ["--append-system-prompt", str(role)]
        if head is not None:
            args += ["--fork", head.session_file]
        bridge = write_bridge(scratch, RESULT_TOOL, RESULT_TOOL_DESCRIPTION, request.output_schema, request.resources,
                              tools=list(served.tools.values()))
        args += ["--name", f"{request.workflow_name}:{request.label}:attempt-{request.attempt}", "-e", str(bridge)]
        return args


def _served_tools(request: AttemptRequest) -> ToolRuntime:
    """The tools piflow serves through the bridge: spec J.5's child-agent tools when the engine gave
    the attempt children, run by the same engine path as on the openai backend."""
    tools = child_agent_tools(request.children) if request.children is not None else {}
    return ToolRuntime(list(tools.values()), request.cwd, None)


async def probe_pi_tools(
    command: PiCommand, cwd: Path, environ: Mapping[str, str], resources: ResourcePolicy
) -> tuple[PiTool, ...]:
    """Ask a pi session in `cwd` which tools it offers (pi has no CLI listing): the bridge reports
    `pi.getAllTools()` at `session_start`, less the tools of extensions `resources` disables. No
    model is called and no session is saved."""
    with tempfile.TemporaryDirectory(prefix="piflow-pi-probe-") as scratch:
        bridge = write_bridge(Path(scratch), RESULT_TOOL, RESULT_TOOL_DESCRIPTION, None, resources, report_tools=True)
        argv = [*command.argv, "--mode", "rpc", "--no-session", "--offline", "-e", str(bridge)]
        try:
            with anyio.fail_after(PROBE_TIMEOUT):
                async with _launch(argv, str(cwd), environ, Path(scratch), command.via_npx) as pi:
                    while True:
                        event = await pi.receive()
                        if event.get("type") == "extension_ui_request" and event.get("title") == _TOOLS_DIALOG:
                            return _probed(event.get("placeholder"))
        except TimeoutError:
            detail = f"pi did not report its tools within {PROBE_TIMEOUT:.0f} s"
        except WorkflowError as error:
            if error.code == "CONFIG_ERROR":
                raise
            detail = error.message
    raise WorkflowError("CONFIG_ERROR", f"Cannot ask pi for its tools: {detail}")


def _probed(placeholder: Any) -> tuple[PiTool, ...]:
    try:
        listed = json.loads(placeholder)
        return tuple(PiTool(str(tool["name"]), str(tool["source"]), str(tool["path"])) for tool in listed)
    except (TypeError, ValueError, KeyError) as exc:
        raise WorkflowError("CONFIG_ERROR", f"Cannot ask pi for its tools: unreadable answer ({exc})") from None


async def current_pi_tools(
    agent_dir: Path, project_root: Path, resources: ResourcePolicy, environ: Mapping[str, str] | None = None,
    *, refresh: bool = False,
) -> PiToolList:
    """pi's tools for a project: the cache when current (and not `refresh`), else a probe, cached.

    Raises CONFIG_ERROR when pi cannot be found or asked.
    """
    env = dict(os.environ if environ is None else environ)
    cached = None if refresh else cached_pi_tools(agent_dir, project_root, env)
    if cached is not None and cached.current:
        return cached
    command = find_pi(env)
    # Taken before the probe: a change while pi starts leaves the cache stale, never wrongly fresh.
    fingerprint = pi_tools_fingerprint(command, agent_dir, project_root)
    env["PI_CODING_AGENT_DIR"] = str(agent_dir)
    tools = PiToolList(await probe_pi_tools(command, project_root, env, resources), fingerprint)
    save_pi_tools(tools, agent_dir, project_root, env)
    return tools


@dataclass(frozen=True)
class _Steer:
    """A `runs.steer` message and the pi RPC command that delivers it (`steer` or `follow_up`)."""

    command: str
    message: str


class _Pi:
    """A running `pi --mode rpc`: JSON lines in and out, stderr kept in a file for error messages."""

    def __init__(self, process: Process, stderr: Path, via_npx: bool) -> None:
        self.process = process
        self.stderr = stderr
        self.via_npx = via_npx
        self.answered = False
        """Whether pi has answered a command (before that, an exit means pi could not start)."""
        self.settled = False
        """Whether pi is idle, so closing stdin lets it shut down cleanly."""
        assert process.stdout is not None
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._sending = anyio.Lock()
        """Steers are sent from the steering task while the attempt's task sends its own commands."""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        # When pi has exited, the next receive() reports why.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with self._sending:
                await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def receive(self) -> dict[str, Any]:
        """The next JSON object pi prints (other stdout lines, e.g. from extensions, are skipped)."""
        while True:
            try:
                line = await self._stdout.receive_until(b"\n", MAX_EVENT_BYTES)
            except (anyio.IncompleteRead, anyio.EndOfStream):
                raise await self._exited() from None
            except anyio.DelimiterNotFound:
                raise WorkflowError("AGENT_FAILED", f"pi sent an event larger than {MAX_EVENT_BYTES} bytes") from None
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                if event.get("type") == "response":
                    self.answered = True
                return event

    async def _exited(self) -> WorkflowError:
        status = await self.process.wait()
        detail = self.stderr.read_text(encoding="utf-8", errors="replace").strip()[-STDERR_TAIL:]
        if self.via_npx and not self.answered:
            return WorkflowError("CONFIG_ERROR", f"Cannot run pi through npx ({detail or status}): {INSTALL_HINT}")
        return WorkflowError("AGENT_FAILED", detail or f"pi exited with status {status}")

    async def stop(self) -> None:
        """Let an idle pi shut down, then kill the process group (pi and anything it started)."""
        if self.settled:
            assert self.process.stdin is not None
            await self.process.stdin.aclose()
            with anyio.move_on_after(SHUTDOWN_GRACE):
                await self.process.wait()
        with contextlib.suppress(ProcessLookupError):  # the group is already gone
            os.killpg(self.process.pid, signal.SIGKILL)
        await self.process.aclose()


@asynccontextmanager
async def _launch(
    argv: list[str], cwd: str, environ: Mapping[str, str], scratch: Path, via_npx: bool
) -> AsyncIterator[_Pi]:
    if not Path(cwd).is_dir():
        # Checked here: a missing cwd would otherwise look like a missing pi executable.
        raise WorkflowError("AGENT_FAILED", f"Agent working directory does not exist: {cwd}")
    stderr_path = scratch / "stderr.log"
    with stderr_path.open("wb") as stderr:
        try:
            process = await anyio.open_process(
                argv, stdin=PIPE, stdout=PIPE, stderr=stderr, cwd=cwd, env=dict(environ), start_new_session=True
            )
        except OSError as exc:
            message = f"Cannot run pi ({argv[0]}: {exc.strerror}): {INSTALL_HINT}"
            raise WorkflowError("CONFIG_ERROR", message) from None
    pi = _Pi(process, stderr_path, via_npx)
    try:
        yield pi
    finally:
        with anyio.CancelScope(shield=True):
            await pi.stop()


class _Attempt:
    """One attempt's conversation with pi: prompts, turn gates, result judging, progress."""

    def __init__(self, pi: _Pi, request: AttemptRequest, control: AttemptControl, served: ToolRuntime) -> None:
        self.pi = pi
        self.served = served
        self.request = request
        self.control = control
        self.queued: list[_Steer] = []
        """Steering sent before this attempt was live, delivered once its task prompt runs."""
        self.prompted = False
        """Whether pi accepted the task prompt (from then on a steer reaches the running session)."""
        self._acks: dict[str, _Ack] = {}
        self.schema = request.output_schema
        self.session_file = ""
        self.message: dict[str, Any] | None = None
        """The last assistant message of the current prompt."""
        self.accepting = False
        self.accepted = False
        self.value: Any = None
        self.finished = False
        """A result was accepted and pi is about to call the model again: stop here instead."""
        self.activity: str | None = None
        self._ids = itertools.count(1)

    @property
    def live(self) -> bool:
        """Whether a steer sent now reaches this attempt's running session."""
        return self.prompted and not self.pi.settled and not self.finished

    async def deliver(self, steer: _Steer) -> None:
        """Send a steer from another task; the attempt's own loop reads pi's answer."""
        request_id = f"piflow-steer-{next(self._ids)}"
        ack = self._acks[request_id] = _Ack()
        await self.pi.send({"id": request_id, "type": steer.command, "message": steer.message})
        await ack.done.wait()
        if ack.error is not None:
            raise WorkflowError("AGENT_FAILED", ack.error)

    def close(self) -> None:
        """Answer the steers pi never acknowledged: the attempt ended under them."""
        for ack in self._acks.values():
            ack.settle("The child's pi session ended before it accepted the message.")
        self._acks.clear()

    async def run(self) -> Any:
        state = await self._call("get_state")
        self.session_file = str(state["sessionFile"])
        self.control.transcript(self.session_file, state.get("sessionId"))
        await self._prompt(self.request.prompt, task=True)
        if self.schema is None:
            return _text(self.message)
        self.accepting = True
        await submit_result(self._prompt, lambda: self.accepted)
        return self.value

    async def _call(self, command: str, **fields: Any) -> Any:
        """Send one RPC command and handle events until its response."""
        request_id = f"piflow-{next(self._ids)}"
        await self.pi.send({"id": request_id, "type": command, **fields})
        while True:
            event = await self.pi.receive()
            if event.get("type") == "response" and event.get("id") == request_id:
                if not event.get("success"):
                    raise WorkflowError("AGENT_FAILED", str(event.get("error") or f"pi rejected {command}"))
                return event.get("data") or {}
            await self._handle(event)

    async def _prompt(self, text: str, *, task: bool = False) -> None:
        """Send a user prompt and follow the session until pi settles (or a result ends it); after the
        task prompt, the steering queued before the attempt was live."""
        self.message = None
        self.pi.settled = False
        await self._call("prompt", message=text)
        if task:
            self.prompted = True
            while self.queued and self.live:
                steer = self.queued.pop(0)
                await self._call(steer.command, message=steer.message)
        while not (self.pi.settled or self.finished):
            await self._handle(await self.pi.receive())

    async def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response" and (ack := self._acks.pop(str(event.get("id")), None)) is not None:
            ack.settle(None if event.get("success") else str(event.get("error") or "pi rejected the message"))
        elif kind == "extension_ui_request":
            await self._dialog(event)
        elif kind == "message_update":
            # Only starts and deltas: pi closes all of a message's blocks at its end, in block order.
            update = (event.get("assistantMessageEvent") or {}).get("type")
            if update in ("thinking_start", "thinking_delta"):
                self._activity("reasoning")
            elif update in ("text_start", "text_delta"):
                self._activity("responding")
        elif kind == "tool_execution_start":
            name = str(event.get("toolName"))
            if name != RESULT_TOOL:  # `toolBudget` counts the agent's tools, not its answer
                self.control.tool_call(name)
            self._activity(name)
        elif kind == "message_end" and (event.get("message") or {}).get("role") == "assistant":
            self.message = event["message"]
        elif kind == "agent_end":
            if not event.get("willRetry") and self.message is not None and _failed(self.message):
                raise WorkflowError("AGENT_FAILED", _error(self.message))
        elif kind == "agent_settled":
            self.pi.settled = True

    def _activity(self, text: str) -> None:
        if text != self.activity:
            self.activity = text
            self.control.activity(text)

    async def _dialog(self, event: dict[str, Any]) -> None:
        method, title = event.get("method"), str(event.get("title") or "")
        if method not in _DIALOG_METHODS:
            return  # fire-and-forget UI (status, widgets, notifications)
        if method != "input" or not title.startswith(DIALOG_PREFIX):
            await self.pi.send({"type": "extension_ui_response", "id": event["id"], "cancelled": True})
            return
        gate = title.removeprefix(DIALOG_PREFIX)
        reply: dict[str, Any] = {}
        if gate == "before_turn":
            if self.accepted:
                self.finished = True
                return
            self.control.before_turn()
        elif gate == "after_turn":
            await self._after_turn()
        elif gate == "result":
            reply = self._judge(json.loads(event.get("placeholder") or "null"))
        elif gate == "tool":
            reply = await self._serve(json.loads(event.get("placeholder") or "null"))
        elif gate == "system_prompt":
            prompt = json.loads(event.get("placeholder") or "null")
            if isinstance(prompt, str):
                self.control.system_prompt(prompt)
        await self.pi.send({"type": "extension_ui_response", "id": event["id"], "value": json.dumps(reply)})

    async def _after_turn(self) -> None:
        message = self.message or {}
        usage = _usage(message)
        if _failed(message):
            # Charged as final: nothing builds on a failed turn, and the provider's error must
            # surface rather than a budget stop.
            self.control.after_turn(usage, final=True)
            error = _error(message)
            if _RATE_LIMITED.search(error) and not _EXHAUSTED.search(error):
                raise ProviderRateLimited(error)
            return  # pi may retry; `agent_end` says whether it gave up
        calls_tools = any(block.get("type") == "toolCall" for block in message.get("content") or [])
        final = self.accepted if self.schema is not None else not calls_tools
        steering = self.control.after_turn(usage, final)
        if steering is not None and not final:
            await self._call("steer", message=steering)

    async def _serve(self, call: dict[str, Any]) -> dict[str, Any]:
        """Run one call of a tool the bridge serves; a failure is a tool error the model reads, except
        BUDGET_EXHAUSTED, which ends the attempt. Calls are answered one at a time (children still
        run concurrently)."""
        name, arguments = str(call["name"]), json.dumps(call.get("params") or {})
        self._activity(self.served.summary(name, arguments))
        result = await self.served.call(name, arguments)
        return {"text": result.text, "isError": result.is_error}

    def _judge(self, value: Any) -> dict[str, Any]:
        """piflow's answer to one `workflow_result` call (spec J.4 texts)."""
        if not self.accepting:
            return {"accepted": False, "message": NOT_ACCEPTING}
        if not self.control.validate_result(value):
            return {"accepted": False, "message": RESULT_REJECTED}
        if not self.accepted:
            self.accepted, self.value = True, value
        return {"accepted": True, "message": RESULT_ACCEPTED}


class _Ack:
    """pi's answer to one steer sent by `deliver`: set by the attempt's loop, or by `close`."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: str | None = None

    def settle(self, error: str | None) -> None:
        self.error = error
        self.done.set()


def _usage(message: dict[str, Any]) -> Usage:
    usage = message.get("usage") or {}
    cost = usage.get("cost") or {}
    return Usage(
        input=int(usage.get("input") or 0),
        output=int(usage.get("output") or 0),
        cache_read=int(usage.get("cacheRead") or 0),
        cache_write=int(usage.get("cacheWrite") or 0),
        cost_usd=float(cost.get("total") or 0.0),
    )


def _failed(message: dict[str, Any]) -> bool:
    return message.get("stopReason") in _FAILED_STOPS


def _error(message: dict[str, Any]) -> str:
    return str(message.get("errorMessage") or TERMINAL_ERROR)


def _text(message: dict[str, Any] | None) -> str:
    content = (message or {}).get("content") or []
    return "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")
