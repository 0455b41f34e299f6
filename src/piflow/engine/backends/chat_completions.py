"""One call to an OpenAI-compatible `/chat/completions` endpoint, streamed, reduced to a `Reply`.

The request asks for a stream (`stream: true`, `stream_options.include_usage`), but servers
differ, so the answer is read by its content type: `text/event-stream` is decoded chunk by
chunk (reporting activity as it arrives), anything else as one `chat.completion` JSON body.
Both shapes go through the same accumulator, so a plain answer is just a one-delta stream.

Failures are mapped to what the engine acts on: a rate limit (HTTP 429, or an error whose
code/type is `429`, `rate_limit_exceeded` or `RATE_LIMITED`) is `ProviderRateLimited` (the run
pauses and the attempt is retried); everything else — HTTP errors, unreachable servers,
malformed JSON or event streams, error chunks, `finish_reason: "error"`, a stream that ends
before the response does — is `AGENT_FAILED` with the provider's own message when it gave one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from piflow.engine.backends.base import ProviderRateLimited
from piflow.engine.backends.sse import SseError, server_sent_events
from piflow.errors import WorkflowError

_RATE_LIMIT_MARKERS: Final = frozenset({"429", "rate_limit_exceeded", "RATE_LIMITED"})
_SNIPPET: Final = 300
_DONE: Final = "[DONE]"
# llama.cpp and vLLM stream reasoning as `reasoning_content`; OpenRouter and others as `reasoning`.
_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call one provider: the full `/chat/completions` URL and its headers."""

    provider: str
    url: str
    headers: dict[str, str]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """The raw JSON text the model produced (parsed by whoever answers the call)."""


@dataclass(frozen=True)
class TokenCounts:
    """Token counts as the provider reports them (`prompt` includes `cached`, as in OpenAI)."""

    prompt: int
    completion: int
    cached: int


@dataclass(frozen=True)
class Reply:
    """The assistant message of one call; `tokens` is None when the server reported no usage."""

    content: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    tokens: TokenCounts | None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation for the next call."""
        content = self.content or (None if self.tool_calls else "")
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


async def complete(
    client: httpx.AsyncClient, endpoint: Endpoint, body: dict[str, Any], activity: Callable[[str], None]
) -> Reply:
    """POST `body` and read the reply; `activity` hears `reasoning`, `responding` or a tool name.

    Leaving this coroutine in any way (including cancellation) closes the response stream.
    """
    provider = endpoint.provider
    try:
        async with client.stream("POST", endpoint.url, json=body, headers=endpoint.headers) as response:
            if response.status_code >= 400:
                await response.aread()
                raise _http_failure(response.status_code, response.text or response.reason_phrase)
            reply = _Accumulator(provider, activity)
            if "text/event-stream" in response.headers.get("content-type", ""):
                await _read_stream(reply, response)
            else:
                await response.aread()
                _read_body(reply, response.text)
            return reply.result()
    except (httpx.RequestError, httpx.InvalidURL) as error:
        reason = str(error) or type(error).__name__
        raise WorkflowError("AGENT_FAILED", f"Request to provider {provider} failed: {reason}") from None
    except SseError as error:
        message = f"Provider {provider} sent a malformed event stream: {error}"
        raise WorkflowError("AGENT_FAILED", message) from None


async def _read_stream(reply: _Accumulator, response: httpx.Response) -> None:
    async for event in server_sent_events(response.aiter_lines()):
        if event.data == _DONE:
            reply.done = True
            return
        chunk = _parse_object(event.data)
        if chunk is None:
            raise reply.malformed("stream chunk", event.data)
        if chunk.get("error") is not None:
            raise _object_failure(chunk, f"Provider {reply.provider} reported an error")
        if event.event == "error":  # the payload itself is the error object
            raise _object_failure({"error": chunk}, f"Provider {reply.provider} reported an error")
        reply.chunk(chunk)


def _read_body(reply: _Accumulator, text: str) -> None:
    body = _parse_object(text)
    if body is None:
        raise reply.malformed("JSON", text)
    if body.get("error") is not None:
        raise _object_failure(body, f"Provider {reply.provider} reported an error")
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise reply.malformed("response without a message", text)
    message = dict(choice["message"])
    if isinstance(message.get("tool_calls"), list):  # complete calls: each is its own, ids or not
        message["tool_calls"] = [
            {**call, "index": index} if isinstance(call, dict) else call
            for index, call in enumerate(message["tool_calls"])
        ]
    reply.chunk({"choices": [{**choice, "delta": message}], "usage": body.get("usage")})
    reply.done = True


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _Accumulator:
    """Builds a `Reply` from chat-completion chunks (a plain answer is one chunk)."""

    def __init__(self, provider: str, activity: Callable[[str], None]) -> None:
        self.provider = provider
        self.done = False
        self._activity = activity
        self._shown: str | None = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._last_call: int | None = None
        self._tokens: TokenCounts | None = None

    def malformed(self, what: str, text: str) -> WorkflowError:
        message = f"Provider {self.provider} sent malformed {what}: {text[:_SNIPPET]}"
        return WorkflowError("AGENT_FAILED", message)

    def _show(self, text: str) -> None:
        if text != self._shown:
            self._shown = text
            self._activity(text)

    def chunk(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):  # the last report wins: some servers repeat running totals
            self._tokens = _token_counts(usage)
        choices = chunk.get("choices")
        if choices is None or choices == []:
            return
        choice = choices[0] if isinstance(choices, list) else None
        if not isinstance(choice, dict):
            raise self.malformed("stream chunk", json.dumps(chunk))
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self._delta(delta)
        finish = choice.get("finish_reason")
        if finish == "error":
            raise _object_failure(choice, f"Provider {self.provider} ended the response with an error")
        if finish:
            self.done = True

    def _delta(self, delta: dict[str, Any]) -> None:
        for name in _REASONING_FIELDS:
            reasoning = _text(delta.get(name))
            if reasoning:
                self._reasoning.append(reasoning)
                self._show("reasoning")
        content = _text(delta.get("content"))
        if content:
            self._content.append(content)
            self._show("responding")
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._tool_call_delta(call)

    def _tool_call_delta(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        call_id = delta.get("id")
        if not isinstance(index, int):
            index = self._implicit_index(call_id)
        call = self._calls.setdefault(index, _PartialCall())
        self._last_call = index
        if isinstance(call_id, str) and call_id:
            call.id = call_id
        function = delta.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name:
                call.name = name
                self._show(name)
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments.append(arguments)
            elif arguments is not None:  # some servers send the arguments already parsed
                call.arguments.append(json.dumps(arguments))

    def _implicit_index(self, call_id: Any) -> int:
        """For servers that omit `index`: a new id starts a new call, anything else continues."""
        last = self._last_call
        if last is None or (isinstance(call_id, str) and call_id and call_id != self._calls[last].id):
            return len(self._calls)
        return last

    def result(self) -> Reply:
        if not self.done:
            raise WorkflowError(
                "AGENT_FAILED", f"Provider {self.provider} stream ended before the response was complete"
            )
        calls = tuple(
            ToolCall(call.id or f"call_{index}", call.name, "".join(call.arguments))
            for index, call in sorted(self._calls.items())
        )
        return Reply("".join(self._content), "".join(self._reasoning), calls, self._tokens)


def _text(value: Any) -> str:
    """A delta's text: a string, or the text parts of a content-part list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part["text"] for part in value if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _token_counts(usage: dict[str, Any]) -> TokenCounts:
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return TokenCounts(_count(prompt), _count(completion), _count(cached))


def _parse_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _error_details(body: dict[str, Any] | None) -> tuple[str | None, set[str]]:
    """The message of an error object (`{error: {message, code, type}}` or `{error: "..."}`) and
    its code/type markers."""
    error = body.get("error") if body is not None else None
    if isinstance(error, str):
        return error or None, set()
    if not isinstance(error, dict):
        return None, set()
    message = error.get("message")
    markers = {str(error[key]) for key in ("code", "type", "status") if error.get(key) is not None}
    return (message if isinstance(message, str) and message else None), markers


def _http_failure(status: int, text: str) -> Exception:
    message, markers = _error_details(_parse_object(text))
    if status == 429 or markers & _RATE_LIMIT_MARKERS:
        return ProviderRateLimited(message or f"HTTP {status}: {text[:_SNIPPET]}")
    return WorkflowError("AGENT_FAILED", message or f"HTTP {status}: {text[:_SNIPPET]}")


def _object_failure(body: dict[str, Any], fallback: str) -> Exception:
    message, markers = _error_details(body)
    if markers & _RATE_LIMIT_MARKERS:
        return ProviderRateLimited(message or fallback)
    return WorkflowError("AGENT_FAILED", message or fallback)
