"""Provider failures over real HTTP: rate limits, HTTP and network errors, malformed replies,
error chunks, timeouts and cancellation."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import Body, ChatServer, Hang, Stream, chunk, text_stream, usage

from piflow.config.registry import load_model_registry
from piflow.engine.backends.base import ProviderRateLimited
from piflow.engine.backends.openai import OpenAIBackend
from piflow.errors import WorkflowError


async def agent_failure(backend: OpenAIBackend) -> str:
    """The AGENT_FAILED message of an attempt that must fail."""
    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(), BudgetControl())
    assert caught.value.code == "AGENT_FAILED"
    return caught.value.message


@pytest.mark.parametrize(
    "reply",
    [
        Body({"error": {"message": "Rate limit reached for m1", "code": "rate_limit_exceeded"}}, status=429),
        Body("slow down", status=429, content_type="text/plain"),
        Body({"error": {"message": "Rate limit reached for m1", "code": "rate_limit_exceeded"}}, status=400),
        Body({"error": {"message": "Rate limit reached for m1", "type": "RATE_LIMITED"}}, status=503),
        Body({"error": {"message": "Rate limit reached for m1", "code": 429}}),
        Stream([chunk({"content": "Hi"}), {"error": {"message": "Rate limit reached for m1", "code": 429}}]),
    ],
    ids=["http-429", "http-429-text", "code", "type", "body-with-200", "stream-chunk"],
)
async def test_rate_limits_ask_the_engine_to_pause_the_run(
    server: ChatServer, backend: OpenAIBackend, reply: Any
) -> None:
    server.script(reply)
    control = BudgetControl()

    with pytest.raises(ProviderRateLimited) as caught:
        await backend.run_attempt(attempt_request(), control)

    assert str(caught.value) in ("Rate limit reached for m1", "HTTP 429: slow down")
    assert control.turns == []


async def test_a_rate_limited_attempt_is_retried_from_its_start(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Body({"error": {"message": "later"}}, status=429), Stream(text_stream("Now.")))
    with pytest.raises(ProviderRateLimited):
        await backend.run_attempt(attempt_request(conversation="c"), BudgetControl())

    assert await backend.run_attempt(attempt_request(conversation="c"), BudgetControl()) == "Now."
    assert server.requests[0].body == server.requests[1].body


async def test_an_http_error_fails_with_the_providers_message(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Body({"error": {"message": "The model `m1` does not exist", "type": "invalid_request_error"}}, 404))

    assert await agent_failure(backend) == "The model `m1` does not exist"


async def test_an_http_error_without_a_json_message_shows_status_and_text(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Body("<html>Bad gateway</html>", status=502, content_type="text/html"))

    assert await agent_failure(backend) == "HTTP 502: <html>Bad gateway</html>"


async def test_an_http_error_with_an_empty_body_shows_the_reason(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Body("", status=500, content_type="text/plain"))

    assert await agent_failure(backend) == "HTTP 500: Internal Server Error"


async def test_an_unreachable_server_fails_the_attempt(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path / "models.json"
    provider = {"baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions", "models": [{"id": "m1"}]}
    path.write_text(json.dumps({"providers": {"local": provider}}), encoding="utf-8")
    backend = OpenAIBackend(load_model_registry(path, environ={}))

    message = await agent_failure(backend)

    assert message.startswith("Request to provider local failed: ")


async def test_malformed_json_fails_with_a_clear_message(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Body('{"choices": [', content_type="application/json"))

    assert await agent_failure(backend) == 'Provider local sent malformed JSON: {"choices": ['


async def test_json_without_a_message_fails(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Body({"object": "chat.completion", "choices": []}))

    assert await agent_failure(backend) == (
        'Provider local sent malformed response without a message: {"object": "chat.completion", "choices": []}'
    )


async def test_a_malformed_stream_chunk_fails(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream([chunk({"content": "Hi"}), "data: {not json\n\n"]))

    assert await agent_failure(backend) == "Provider local sent malformed stream chunk: {not json"


async def test_a_stream_that_is_not_server_sent_events_fails(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(["<html>\n<body>Proxy error</body>\n"], done=False))

    assert await agent_failure(backend) == (
        "Provider local sent a malformed event stream: not an event-stream line: '<html>'"
    )


async def test_comments_and_event_ids_are_ignored(server: ChatServer, backend: OpenAIBackend) -> None:
    events = [f"id: {n}\nretry: 100\n: processing\ndata: {json.dumps(c)}\n\n" for n, c in enumerate(text_stream("Hi"))]
    server.script(Stream(events))

    assert await backend.run_attempt(attempt_request(), BudgetControl()) == "Hi"


async def test_an_error_chunk_fails_with_its_message(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream([chunk({"content": "Par"}), {"error": {"message": "Upstream overloaded", "code": "server_error"}}])
    )

    assert await agent_failure(backend) == "Upstream overloaded"


async def test_an_error_event_fails_with_its_message(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream([f"event: error\ndata: {json.dumps({'message': 'Model crashed'})}\n\n"], done=False))

    assert await agent_failure(backend) == "Model crashed"


async def test_finish_reason_error_fails_the_attempt(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream([chunk({"content": "Par"}), chunk({}, finish="error")]))

    assert await agent_failure(backend) == "Provider local ended the response with an error"


async def test_a_stream_that_ends_before_the_response_does_fails(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream([chunk({"content": "Half an ans"})], done=False))

    assert await agent_failure(backend) == "Provider local stream ended before the response was complete"


async def test_a_connection_cut_mid_stream_fails(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream([chunk({"content": "Half an ans"})], truncate=True))

    assert (await agent_failure(backend)).startswith("Request to provider local failed: ")


async def test_usage_of_turns_before_a_failure_stays_recorded(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream(text_stream("", counts=usage(10, 0))),
        Body({"error": {"message": "boom"}}, status=500),
    )
    schema = {"type": "object"}
    control = BudgetControl(schema=schema)

    with pytest.raises(WorkflowError, match="boom"):
        await backend.run_attempt(attempt_request(schema=schema), control)

    assert control.usage.input == 10


async def asked(server: ChatServer) -> None:
    """Return once the server has the attempt's request: its call is in flight, its connection open.
    (A fixed wait could end before a loaded machine sent it, and a call never made closes nothing.)"""
    while not server.requests:
        await anyio.sleep(0.01)


async def test_the_engine_timeout_cancels_the_call_and_closes_the_connection(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Hang())

    async def expire(timeout: anyio.CancelScope) -> None:
        await asked(server)
        timeout.deadline = anyio.current_time()  # the engine's timeout falls while the reply hangs

    with pytest.raises(TimeoutError), anyio.fail_after(30) as timeout:
        async with anyio.create_task_group() as group:
            group.start_soon(expire, timeout)
            await backend.run_attempt(attempt_request(), BudgetControl())

    assert await anyio.to_thread.run_sync(server.disconnected.wait, 5)


async def test_cancelling_an_attempt_closes_the_connection(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Hang())
    control = BudgetControl()

    async with anyio.create_task_group() as group:
        group.start_soon(backend.run_attempt, attempt_request(), control)
        await asked(server)
        group.cancel_scope.cancel()

    assert await anyio.to_thread.run_sync(server.disconnected.wait, 5)
    assert control.turns == []


async def test_a_slow_stream_is_read_to_its_end(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(text_stream("Slowly, but surely.", counts=usage(5, 5)), delay=0.05))

    with anyio.fail_after(5):
        assert await backend.run_attempt(attempt_request(), BudgetControl()) == "Slowly, but surely."
