"""The `openai` backend: agent attempts on an OpenAI-compatible chat-completions endpoint.

It serves the models pi's `models.json` configures with `api: "openai-completions"` (OpenAI,
OpenRouter, Ollama, vLLM, llama.cpp, LM Studio, ...), calling `<baseUrl>/chat/completions` with
the provider's resolved `apiKey` as a bearer token (none when there is no key, as for a local
server) and the provider's and model's `headers`, whose values are sent as written.

How an attempt maps onto chat completions:

- Messages: a system message (a short piflow preamble plus the role body, when the agent has a
  role) and the engine's J.3 task prompt as the first user message.
- Turns: one turn is one chat-completions call. `before_turn` gates every call; `after_turn`
  records its usage and may hand back the budget's soft instruction, which is sent as a user
  message before the next turn. A turn whose assistant message calls tools is not final, so
  the budget can stop the attempt after it (spec H).
- Output schema (spec J.4): the model is offered one tool, `workflow_result`, whose parameters
  are the schema. The task prompt runs until the model stops calling tools (acceptance is not
  enabled yet), then the submit prompt, then at most one repair prompt. The first schema-valid
  call is the result and ends the attempt. Only that turn is final: every other turn is
  followed by more model work (so the main turn is non-final, as spec H says), and nothing
  follows the accepting one — the reference keeps a result accepted in an over-budget turn
  too. Prose is never parsed.
- Tools: the request offers the JSON schemas of exactly the attempt's tools (`request.tools`,
  already filtered by options, role and policy) that the tool runtime (`piflow.engine.tools`)
  serves, confined to the attempt's working directory. A turn's calls run concurrently and are
  answered in the order the model made them; each shows as activity (`read src/x.py`,
  `bash: pytest -q`) and lands in the transcript with its result. The agent option
  `toolTimeoutMs` bounds each call (default 5 minutes). A call to a tool the agent was not given
  is answered `Tool <name> not found` and the model continues.
- Thinking: sent as `reasoning_effort`, only when the model's registry entry says
  `reasoning: true`. `minimal`/`low`/`medium`/`high` go through unchanged; `xhigh` and `max`
  are sent as `high`, because `xhigh` is accepted only by a few OpenAI models and `max` by none,
  and an unsupported value fails the call; `off` sends nothing (the model's default), as pi does.
- Accounting: OpenAI counts cached tokens inside `prompt_tokens`, so input = prompt − cached and
  cache_read = cached; output = `completion_tokens` (which already includes reasoning tokens).
  Cost comes from the model's `cost` table. A server that reports no usage is charged an
  estimate of four characters per token, so budgets still bind.
- Conversations: after a successful turn the message history is saved as the conversation's
  head in the run store (`control.save_conversation_state`, committed with the turn's journaled
  result), and the next turn continues from it — in this process or after a crash, a kill -9 or
  a cold resume. A retried or rate-limited attempt starts again from the previous turn's head.
  A turn whose system prompt differs from the conversation's is RESUME_INCOMPATIBLE (spec J.6);
  the engine checks the rest of the turn's identity (model, execution policy, tool definitions)
  and that a head exists (`AgentRunner`, never a silent fresh start).
- Transcripts: with `transcripts_dir`, each attempt's messages (history included) are written
  as JSONL to `<dir>/<run id>/<agent id>.attempt-<n>.jsonl` as they happen, and reported
  through `control.transcript`.
"""

from __future__ import annotations

import functools
import json
import math
import re
import ssl
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx

from piflow.config.registry import ModelRegistry, RegistryModel
from piflow.engine.backends.base import AttemptControl, AttemptRequest, Usage
from piflow.engine.backends.chat_completions import Endpoint, Reply, TokenCounts, ToolCall, complete
from piflow.engine.prompts import NOT_ACCEPTING, RESULT_ACCEPTED, RESULT_REJECTED, submit_result
from piflow.engine.tools import Tool, ToolResult, ToolRuntime
from piflow.engine.tools.registry import child_agent_tools
from piflow.errors import WorkflowError

__all__ = ["OpenAIBackend"]

API: Final = "openai-completions"
SYSTEM_PROMPT: Final = (
    "You are an agent running one task of a piflow workflow. Do the task in the user message and "
    "answer with its result."
)
RESULT_TOOL: Final = "workflow_result"
RESULT_TOOL_DESCRIPTION: Final = "Submit the terminal structured workflow result"
REASONING_EFFORT: Final[dict[str, str]] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}
CHARS_PER_TOKEN: Final = 4
# No read timeout: the engine's attempt timeout (timeoutMs) bounds the whole attempt, and a
# reasoning model may think for minutes before its first byte.
TIMEOUT: Final = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0)
TOOL_TIMEOUT_MS: Final = 300_000
"""Per-call tool time limit when the agent sets no `toolTimeoutMs` (pi-subagents' default)."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle takes tens of milliseconds, and every attempt has a client."""
    return httpx.create_ssl_context()


def _default_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=TIMEOUT, verify=_ssl_context())


@dataclass(frozen=True)
class _Session:
    """A conversation's state after its last successful turn (or a new attempt's start)."""

    id: str
    model: str
    system: str
    messages: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"sessionId": self.id, "model": self.model, "system": self.system, "messages": list(self.messages)}

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> _Session:
        messages = state.get("messages")
        fields = (state.get("sessionId"), state.get("model"), state.get("system"))
        if not all(isinstance(value, str) for value in fields) or not isinstance(messages, list):
            message = "Cannot reopen conversation transcript: its saved state is damaged"
            raise WorkflowError("RESUME_INCOMPATIBLE", message)
        return cls(str(fields[0]), str(fields[1]), str(fields[2]), tuple(messages))


def _tool_timeout(request: AttemptRequest) -> int:
    value = request.options.get("toolTimeoutMs", TOOL_TIMEOUT_MS)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WorkflowError("INVALID_METADATA", "agent toolTimeoutMs must be a positive integer")
    return value


class OpenAIBackend:
    """Runs attempts against the chat-completions endpoints of `registry`'s providers."""

    name = "openai"

    def __init__(
        self,
        registry: ModelRegistry,
        *,
        transcripts_dir: Path | None = None,
        client_factory: Callable[[], httpx.AsyncClient] | None = None,
        extension_tools: Mapping[str, Tool] | None = None,
    ) -> None:
        self._registry = registry
        self._transcripts_dir = transcripts_dir
        self._client_factory = client_factory or _default_client
        self._extension_tools = dict(extension_tools or {})
        self._steering: dict[str, list[str]] = {}
        """Steering messages per agent id, taken before the running attempt's next model turn."""
        self._running: set[str] = set()

    async def steer(self, agent_id: str, message: str, mode: str) -> str:
        """Queue `message` as a user message before the agent's next turn (`runs.steer`, `steer_subagent`)."""
        self._steering.setdefault(agent_id, []).append(message)
        return "delivered" if agent_id in self._running else "queued"

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        endpoint, model = await self._endpoint(request)
        extra = self._extension_tools
        names = request.tools
        if request.children is not None:  # spec J.5: `agent` brings its two companions
            children = child_agent_tools(request.children)
            extra, names = {**extra, **children}, (*names, *children)
        tools = ToolRuntime.for_names(names, request.cwd, _tool_timeout(request), extra)
        session = self._session(request, model, control)
        control.system_prompt(session.system)
        transcript = self._transcript(request, model, session.id, control)
        steering = self._steering.setdefault(request.agent_id, [])
        self._running.add(request.agent_id)
        try:
            async with self._client_factory() as client:
                attempt = _Attempt(client, endpoint, model, request, control, list(session.messages), transcript,
                                   tools, steering)
                value = await attempt.run()
        finally:
            self._running.discard(request.agent_id)
            if not steering:
                self._steering.pop(request.agent_id, None)
        if request.conversation:
            head = _Session(session.id, session.model, session.system, tuple(attempt.messages))
            control.save_conversation_state(head.to_json())
        return value

    def _session(self, request: AttemptRequest, model: RegistryModel, control: AttemptControl) -> _Session:
        """A fresh session, or the conversation's, which must keep its system prompt (J.6; the engine
        checked that this turn continues the head with the same model and execution policy)."""
        system = SYSTEM_PROMPT if not request.system_append else f"{SYSTEM_PROMPT}\n\n{request.system_append}"
        state = control.conversation_state() if request.conversation else None
        if state is None:
            return _Session(uuid.uuid4().hex, model.ref, system, ({"role": "system", "content": system},))
        session = _Session.from_json(state)
        if session.system != system:
            raise WorkflowError("RESUME_INCOMPATIBLE", "Conversation system prompt changed")
        return session

    async def _endpoint(self, request: AttemptRequest) -> tuple[Endpoint, RegistryModel]:
        ref = request.model.name
        model = self._registry.model(ref)
        provider = self._registry.provider(request.model.provider)
        if model is None or provider is None or not provider.base_url:
            raise WorkflowError("AGENT_FAILED", f"Model {ref} is not configured in the model registry")
        if model.api != API:
            message = f"Model {ref} uses api {model.api}; the openai backend serves only {API} models"
            raise WorkflowError("AGENT_FAILED", message)
        # A `!command` key runs a subprocess: keep it off the event loop.
        key = await anyio.to_thread.run_sync(self._registry.api_key, provider.name)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        headers.update(provider.headers)
        headers.update(model.headers)
        return Endpoint(provider.name, provider.base_url.rstrip("/") + "/chat/completions", headers), model

    def _transcript(
        self, request: AttemptRequest, model: RegistryModel, session_id: str, control: AttemptControl
    ) -> _Transcript | None:
        if self._transcripts_dir is None:
            return None
        path = self._transcripts_dir / _file_part(request.run_id) / (
            f"{_file_part(request.agent_id)}.attempt-{request.attempt}.jsonl"
        )
        transcript = _Transcript(
            path,
            {
                "type": "session",
                "id": session_id,
                "model": model.ref,
                "label": request.label,
                "attempt": request.attempt,
                "conversation": request.conversation,
            },
        )
        control.transcript(str(path), session_id)
        return transcript


def _file_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


class _Transcript:
    """An attempt's JSONL transcript, appended line by line so a crash keeps what happened."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")


class _Attempt:
    """One attempt's turns over a message history (which a conversation carries on)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        endpoint: Endpoint,
        model: RegistryModel,
        request: AttemptRequest,
        control: AttemptControl,
        messages: list[dict[str, Any]],
        transcript: _Transcript | None,
        tools: ToolRuntime,
        steering: list[str],
    ) -> None:
        self.tools = tools
        self.steering = steering
        self.client = client
        self.endpoint = endpoint
        self.model = model
        self.request = request
        self.control = control
        self.messages: list[dict[str, Any]] = []
        self.transcript = transcript
        self.schema = request.output_schema
        self.accepting = False
        self.accepted = False
        self.value: Any = None
        self.text = ""
        for message in messages:
            self._add(message)

    async def run(self) -> Any:
        await self._prompt(self.request.prompt)
        if self.schema is None:
            return self.text
        self.accepting = True
        await submit_result(self._prompt, lambda: self.accepted)
        return self.value

    async def _prompt(self, text: str) -> None:
        """Send a user message, then run turns until the model stops calling tools or a
        result is accepted."""
        self._add({"role": "user", "content": text})
        while True:
            while self.steering:
                self._add({"role": "user", "content": self.steering.pop(0)})
            self.control.before_turn()
            body = self._body()
            reply = await complete(self.client, self.endpoint, body, self.control.activity)
            usage = self._usage(reply, body)
            self._add(reply.message(), usage)
            results = await self._run_tools(reply.tool_calls)
            for call, result in zip(reply.tool_calls, results, strict=True):
                message = {"role": "tool", "tool_call_id": call.id, "content": result.text}
                self._add(message, tool=(call, result))
            self.text = reply.content
            final = self.accepted if self.schema is not None else not reply.tool_calls
            steering = self.control.after_turn(usage, final)
            if steering is not None and not final:
                self._add({"role": "user", "content": steering})
            if self.accepted or not reply.tool_calls:
                return

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model.id,
            "messages": list(self.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = self.tools.definitions()
        if self.schema is not None:
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": RESULT_TOOL,
                        "description": RESULT_TOOL_DESCRIPTION,
                        "parameters": self.schema,
                    },
                }
            )
        if tools:
            body["tools"] = tools
        effort = REASONING_EFFORT.get(self.request.thinking or "off")
        if effort is not None and self.model.reasoning:
            body["reasoning_effort"] = effort
        return body

    async def _run_tools(self, calls: tuple[ToolCall, ...]) -> list[ToolResult]:
        """Every call of one turn, run concurrently; results in the order of the calls."""
        results: list[ToolResult] = [ToolResult("", False)] * len(calls)
        for call in calls:  # toolBudget counts every call of the turn before any runs (the answer is no tool)
            if call.name != RESULT_TOOL or self.schema is None:
                self.control.tool_call(call.name)

        async def run(index: int, call: ToolCall) -> None:
            if call.name == RESULT_TOOL and self.schema is not None:
                results[index] = self._answer_result(call)
                return
            if call.name in self.tools.tools:  # the streamed name was shown already; now what it does
                self.control.activity(self.tools.summary(call.name, call.arguments))
            results[index] = await self.tools.call(call.name, call.arguments)

        async with anyio.create_task_group() as group:
            for index, call in enumerate(calls):
                group.start_soon(run, index, call)
        return results

    def _answer_result(self, call: ToolCall) -> ToolResult:
        """Spec J.4's replies to a `workflow_result` call."""
        if not self.accepting:
            return ToolResult(NOT_ACCEPTING, True)
        try:
            value = json.loads(call.arguments or "{}")
        except ValueError:
            return ToolResult(RESULT_REJECTED, True)
        if not self.control.validate_result(value):
            return ToolResult(RESULT_REJECTED, True)
        if not self.accepted:
            self.accepted, self.value = True, value
        return ToolResult(RESULT_ACCEPTED, False)

    def _usage(self, reply: Reply, body: dict[str, Any]) -> Usage:
        tokens = reply.tokens or _estimate(reply, body)
        cached = min(tokens.cached, tokens.prompt)
        uncached = tokens.prompt - cached
        cost = self.model.cost.usd(uncached, tokens.completion, cached)
        return Usage(input=uncached, output=tokens.completion, cache_read=cached, cost_usd=cost)

    def _add(
        self, message: dict[str, Any], usage: Usage | None = None, tool: tuple[ToolCall, ToolResult] | None = None
    ) -> None:
        self.messages.append(message)
        if self.transcript is not None:
            record: dict[str, Any] = {"type": "message", "message": message}
            if tool is not None:
                call, result = tool
                record["tool"] = {"name": call.name, "arguments": call.arguments, "isError": result.is_error}
            if usage is not None:
                record["usage"] = {
                    "input": usage.input,
                    "output": usage.output,
                    "cacheRead": usage.cache_read,
                    "costUsd": usage.cost_usd,
                }
            self.transcript.write(record)


def _estimate(reply: Reply, body: dict[str, Any]) -> TokenCounts:
    """Token counts for a server that reports none: what was sent and what came back."""
    sent = json.dumps([body["messages"], body.get("tools")])
    calls = "".join(call.name + call.arguments for call in reply.tool_calls)
    received = reply.content + reply.reasoning + calls
    return TokenCounts(math.ceil(len(sent) / CHARS_PER_TOKEN), math.ceil(len(received) / CHARS_PER_TOKEN), 0)
