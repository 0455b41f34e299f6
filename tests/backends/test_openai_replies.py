"""The openai backend's plain attempts over real HTTP: requests, replies, accounting, transcripts,
conversations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import Body, ChatServer, Stream, completion, text_stream, tool_stream, usage
from conftest import API_KEY, PRICES

from piflow.config.registry import ModelRegistry
from piflow.engine.backends.base import Usage
from piflow.engine.backends.openai import SYSTEM_PROMPT, OpenAIBackend
from piflow.engine.prompts import attempt_prompt
from piflow.engine.tools import BUILTIN_TOOLS
from piflow.errors import WorkflowError


async def test_a_streamed_answer_is_the_result_with_its_usage_and_cost(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(text_stream("Hello there.", counts=usage(1000, 50, cached=200))))
    control = BudgetControl()

    result = await backend.run_attempt(attempt_request(), control)

    assert result == "Hello there."
    expected = Usage(input=800, output=50, cache_read=200, cost_usd=PRICES.usd(800, 50, 200))
    assert [(turn.usage, turn.final) for turn in control.turns] == [(expected, True)]
    assert control.budget.usage["tokens"] == 850
    assert control.activities == ["responding"]


async def test_the_request_carries_model_messages_stream_options_and_headers(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(text_stream("ok", counts=usage(10, 1))))

    await backend.run_attempt(attempt_request("Count the files."), BudgetControl())

    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["x-team"] == "piflow"
    assert request.headers["x-model"] == "m1"
    assert request.body == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": attempt_prompt("demo", "writer", "Count the files.")},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [BUILTIN_TOOLS["read"].definition()],
    }


async def test_an_agent_without_tools_is_offered_none(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(text_stream("ok")))

    await backend.run_attempt(attempt_request(tools=()), BudgetControl())

    assert "tools" not in server.requests[0].body


async def test_the_role_body_follows_the_system_prompt(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(text_stream("ok")))

    await backend.run_attempt(attempt_request(system_append="You review code."), BudgetControl())

    system = server.requests[0].body["messages"][0]
    assert system == {"role": "system", "content": f"{SYSTEM_PROMPT}\n\nYou review code."}


@pytest.mark.parametrize(
    ("thinking", "effort"),
    [
        (None, None),
        ("off", None),
        ("minimal", "minimal"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "high"),
        ("max", "high"),
    ],
)
async def test_thinking_becomes_reasoning_effort_on_reasoning_models(
    server: ChatServer, backend: OpenAIBackend, thinking: str | None, effort: str | None
) -> None:
    server.script(Stream(text_stream("ok")))

    await backend.run_attempt(attempt_request(thinking=thinking), BudgetControl())

    assert server.requests[0].body.get("reasoning_effort") == effort


async def test_models_without_reasoning_get_no_reasoning_effort(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(text_stream("ok")))

    await backend.run_attempt(attempt_request(model="local/plain", thinking="high"), BudgetControl())

    assert "reasoning_effort" not in server.requests[0].body


async def test_reasoning_then_text_is_reported_as_activity_and_only_text_is_the_result(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(text_stream("42", reasoning="Let me think about it.")))
    control = BudgetControl()

    assert await backend.run_attempt(attempt_request(), control) == "42"
    assert control.activities == ["reasoning", "responding"]


async def test_a_server_that_ignores_streaming_answers_with_one_json_body(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Body(completion("Plain answer.", counts=usage(300, 20))))
    control = BudgetControl()

    assert await backend.run_attempt(attempt_request(), control) == "Plain answer."
    assert control.usage == Usage(input=300, output=20, cost_usd=PRICES.usd(300, 20))
    assert control.activities == ["responding"]


async def test_content_parts_are_concatenated(server: ChatServer, backend: OpenAIBackend) -> None:
    parts = [{"type": "text", "text": "Hello, "}, {"type": "image_url"}, {"type": "text", "text": "world."}]
    server.script(Body(completion(None) | {"choices": [{"message": {"role": "assistant", "content": parts}}]}))

    assert await backend.run_attempt(attempt_request(), BudgetControl()) == "Hello, world."


async def test_without_reported_usage_tokens_are_estimated_so_budgets_still_bind(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(text_stream("Twelve chars")))
    control = BudgetControl()

    await backend.run_attempt(attempt_request(), control)

    body = server.requests[0].body
    sent = json.dumps([body["messages"], body["tools"]])
    assert control.usage.input == math.ceil(len(sent) / 4)
    assert control.usage.output == 3
    assert control.usage.cost_usd == PRICES.usd(control.usage.input, 3)


async def test_a_keyless_loopback_provider_gets_no_authorization_header(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(text_stream("ok")))

    await backend.run_attempt(attempt_request(model="keyless/m"), BudgetControl())

    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].body["model"] == "m"


async def test_a_call_to_a_tool_the_agent_was_not_given_is_answered_and_the_model_continues(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(
        Stream(tool_stream("bash", {"command": "cat README.md"}, counts=usage(100, 10))),
        Stream(text_stream("I cannot run commands.", counts=usage(120, 8))),
    )
    control = BudgetControl()

    assert await backend.run_attempt(attempt_request(), control) == "I cannot run commands."

    assert [turn.final for turn in control.turns] == [False, True]
    # the model's call is shown as it streams and counts against the tool budget (the model made
    # it), but no "what it does" line follows: the call was refused, nothing ran
    assert control.activities == ["bash", "responding"]
    assert control.tool_calls == ["bash"]
    messages = server.requests[1].body["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "bash", "arguments": '{"command": "cat README.md"}'}}
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "Tool bash not found"}
    assert [tool["function"]["name"] for tool in server.requests[1].body["tools"]] == ["read"]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("local/missing", "Model local/missing is not configured in the model registry"),
        ("nowhere/m", "Model nowhere/m is not configured in the model registry"),
        ("claude/sonnet", "Model claude/sonnet uses api anthropic-messages; the openai backend serves only "
         "openai-completions models"),
    ],
)
async def test_models_this_backend_cannot_serve_fail_before_any_request(
    server: ChatServer, backend: OpenAIBackend, model: str, message: str
) -> None:
    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(model=model), BudgetControl())

    assert (caught.value.code, caught.value.message) == ("AGENT_FAILED", message)
    assert server.requests == []


async def test_the_transcript_records_every_message_and_is_reported(
    server: ChatServer, backend: OpenAIBackend, transcripts: Path
) -> None:
    server.script(Stream(text_stream("Done.", counts=usage(40, 2))))
    control = BudgetControl()

    await backend.run_attempt(attempt_request(agent_id="run-1:7", attempt=2), control)

    [(path, session_id)] = control.transcripts
    assert Path(path) == transcripts / "run-1" / "run-1_7.attempt-2.jsonl"
    lines = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {
        "type": "session",
        "id": session_id,
        "model": "local/m1",
        "label": "writer",
        "attempt": 2,
        "conversation": None,
    }
    assert [line["message"]["role"] for line in lines[1:]] == ["system", "user", "assistant"]
    assert lines[3]["message"]["content"] == "Done."
    assert lines[3]["usage"] == {"input": 40, "output": 2, "cacheRead": 0, "costUsd": PRICES.usd(40, 2)}


async def test_no_transcripts_directory_means_no_transcript(server: ChatServer, registry: ModelRegistry) -> None:
    server.script(Stream(text_stream("ok")))
    control = BudgetControl()

    await OpenAIBackend(registry).run_attempt(attempt_request(), control)

    assert control.transcripts == []


async def test_a_conversation_turn_continues_the_previous_one(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(text_stream("Nice to meet you, Ada.")), Stream(text_stream("Your name is Ada.")))
    first = BudgetControl()
    await backend.run_attempt(attempt_request("I am Ada.", conversation="chat"), first)
    second = BudgetControl(head=first.saved)
    answer = await backend.run_attempt(
        attempt_request("Who am I?", conversation="chat", turn=2, agent_id="run-1:2"), second
    )

    assert answer == "Your name is Ada."
    messages = server.requests[1].body["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", SYSTEM_PROMPT),
        ("user", attempt_prompt("demo", "writer", "I am Ada.")),
        ("assistant", "Nice to meet you, Ada."),
        ("user", attempt_prompt("demo", "writer", "Who am I?")),
    ]
    assert first.transcripts[0][1] == second.transcripts[0][1]


async def test_a_failed_conversation_turn_leaves_the_history_at_the_previous_turn(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(
        Stream(text_stream("First answer.")),
        Stream(tool_stream("read", {})),
        Body({"error": {"message": "boom"}}, status=500),
        Stream(text_stream("Second answer.")),
    )
    first = BudgetControl()
    await backend.run_attempt(attempt_request("one", conversation="chat"), first)
    failed = BudgetControl(head=first.saved)
    with pytest.raises(WorkflowError, match="boom"):
        await backend.run_attempt(attempt_request("two", conversation="chat", turn=2), failed)
    assert failed.saved is None

    retry = attempt_request("two", conversation="chat", turn=2, attempt=2)
    await backend.run_attempt(retry, BudgetControl(head=first.saved))

    roles = [m["role"] for m in server.requests[3].body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


async def test_a_conversation_keeps_its_system_prompt(server: ChatServer, backend: OpenAIBackend) -> None:
    """The engine checks model, policy and head (test_conversation_identity.py); the prompt is the backend's."""
    server.script(Stream(text_stream("a")))
    first = BudgetControl()
    await backend.run_attempt(attempt_request("one", conversation="c"), first)

    changed = attempt_request("two", conversation="c", turn=2, system_append="You are someone else.")
    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(changed, BudgetControl(head=first.saved))

    assert (caught.value.code, caught.value.message) == ("RESUME_INCOMPATIBLE", "Conversation system prompt changed")
    assert len(server.requests) == 1
