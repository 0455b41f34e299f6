"""Output schemas over real HTTP (spec J.4): the `workflow_result` tool, submit and one repair."""

from __future__ import annotations

import json
from typing import Any

import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import Body, ChatServer, Stream, completion, text_stream, tool_stream, usage

from piflow.engine.backends.openai import RESULT_TOOL_DESCRIPTION, OpenAIBackend
from piflow.engine.prompts import (
    NO_VALID_RESULT,
    NOT_ACCEPTING,
    REPAIR_RESULT,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    SUBMIT_RESULT,
)
from piflow.engine.tools import BUILTIN_TOOLS
from piflow.errors import WorkflowError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"enum": ["pass", "fail"]}, "score": {"type": "integer"}},
    "required": ["verdict", "score"],
    "additionalProperties": False,
}
VALID = {"verdict": "pass", "score": 9}


def tool_replies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


async def test_the_main_turn_then_a_submitted_result(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream(text_stream("The code looks fine.", counts=usage(200, 30))),
        Stream(tool_stream("workflow_result", VALID, counts=usage(260, 12))),
    )
    control = BudgetControl(schema=SCHEMA)

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), control) == VALID

    assert [turn.final for turn in control.turns] == [False, True]
    assert control.activities == ["responding", "workflow_result"]
    for request in server.requests:
        assert request.body["tools"] == [
            BUILTIN_TOOLS["read"].definition(),
            {
                "type": "function",
                "function": {"name": "workflow_result", "description": RESULT_TOOL_DESCRIPTION, "parameters": SCHEMA},
            }
        ]
    submit = server.requests[1].body["messages"]
    assert submit[-1] == {"role": "user", "content": SUBMIT_RESULT}
    assert submit[-2] == {"role": "assistant", "content": "The code looks fine."}


async def test_a_result_before_acceptance_is_refused_and_the_main_prompt_goes_on(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(
        Stream(tool_stream("workflow_result", VALID, call_id="early")),
        Stream(text_stream("Submitted above.")),
        Stream(tool_stream("workflow_result", VALID, call_id="late")),
    )
    control = BudgetControl(schema=SCHEMA)

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), control) == VALID

    assert [turn.final for turn in control.turns] == [False, False, True]
    second = server.requests[1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "early", "content": NOT_ACCEPTING}
    assert user_texts(server.requests[2].body["messages"])[-1] == SUBMIT_RESULT


async def test_an_invalid_result_is_refused_then_repaired(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream(text_stream("Reviewed.")),
        Stream(tool_stream("workflow_result", {"verdict": "maybe", "score": 9}, call_id="bad")),
        Stream(text_stream("I tried.")),
        Stream(tool_stream("workflow_result", {"verdict": "fail", "score": 2}, call_id="good")),
    )
    control = BudgetControl(schema=SCHEMA)

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), control) == {"verdict": "fail", "score": 2}

    after_invalid = server.requests[2].body["messages"]
    assert after_invalid[-1] == {"role": "tool", "tool_call_id": "bad", "content": RESULT_REJECTED}
    repair = server.requests[3].body["messages"]
    assert user_texts(repair)[-2:] == [SUBMIT_RESULT, REPAIR_RESULT]
    assert [turn.final for turn in control.turns] == [False, False, False, True]


async def test_arguments_that_are_not_json_are_refused(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream(text_stream("Reviewed.")),
        Stream(tool_stream("workflow_result", '{"verdict": "pass", "score":', call_id="cut")),
        Stream(text_stream("Sorry.")),
        Stream(tool_stream("workflow_result", VALID)),
    )

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), BudgetControl(schema=SCHEMA)) == VALID
    assert tool_replies(server.requests[2].body["messages"]) == [RESULT_REJECTED]


async def test_no_valid_result_after_one_repair_is_result_invalid(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream(text_stream("Reviewed.")),
        Stream(text_stream('{"verdict": "pass", "score": 9}')),
        Stream(text_stream('```json\n{"verdict": "pass", "score": 9}\n```')),
    )

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(schema=SCHEMA), BudgetControl(schema=SCHEMA))

    assert (caught.value.code, caught.value.message) == ("RESULT_INVALID", NO_VALID_RESULT)
    assert len(server.requests) == 3
    assert user_texts(server.requests[2].body["messages"])[-2:] == [SUBMIT_RESULT, REPAIR_RESULT]


async def test_the_first_valid_result_wins_and_every_call_is_answered(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    submitted = {"a": {"verdict": "x"}, "b": {"verdict": "pass", "score": 1}, "c": {"verdict": "fail", "score": 2}}
    calls = [
        {"id": key, "type": "function", "function": {"name": "workflow_result", "arguments": json.dumps(value)}}
        for key, value in submitted.items()
    ]
    server.script(Body(completion("Reviewed.")), Body(completion(None, tool_calls=calls)))
    control = BudgetControl(schema=SCHEMA)

    assert await backend.run_attempt(attempt_request(schema=SCHEMA, conversation="c"), control) == {
        "verdict": "pass",
        "score": 1,
    }

    server.script(Stream(text_stream("ok")))
    await backend.run_attempt(attempt_request("next", conversation="c", turn=2), BudgetControl(head=control.saved))
    history = server.requests[2].body["messages"]
    assert tool_replies(history) == [RESULT_REJECTED, RESULT_ACCEPTED, RESULT_ACCEPTED]
    assert [m["tool_call_id"] for m in history if m["role"] == "tool"] == ["a", "b", "c"]


async def test_a_result_submitted_without_a_streamed_index_or_id_is_still_read(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(
        Stream(text_stream("Reviewed.")),
        Stream(
            [
                {"choices": [{"delta": {"tool_calls": [{"function": {"name": "workflow_result", "arguments": ""}}]}}]},
                {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": '{"verdict": "pass",'}}]}}]},
                {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ' "score": 9}'}}]}}]},
                {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
            ]
        ),
    )

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), BudgetControl(schema=SCHEMA)) == VALID
