"""Budgets seen from the openai backend (spec H): turn gates, hard exhaustion, the soft instruction."""

from __future__ import annotations

from typing import Any

import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import ChatServer, Stream, text_stream, tool_stream, usage
from conftest import PRICES

from piflow.engine.backends.openai import OpenAIBackend
from piflow.engine.budgets import soft_instruction
from piflow.engine.prompts import SUBMIT_RESULT
from piflow.errors import WorkflowError

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_an_over_budget_turn_that_calls_tools_stops_the_attempt(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(Stream(tool_stream("read", {}, counts=usage(500, 100))), Stream(text_stream("never sent")))
    control = BudgetControl(limits={"tokens": {"hard": 500}})

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(), control)

    assert caught.value.code == "BUDGET_EXHAUSTED"
    assert caught.value.message == "Budget version 1 exhausted: tokens usage=600 hard=500"
    assert len(server.requests) == 1
    assert control.budget.usage["tokens"] == 600


async def test_a_final_answer_that_overshoots_is_accepted(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(text_stream("Done.", counts=usage(500, 100))))
    control = BudgetControl(limits={"tokens": {"hard": 500}})

    assert await backend.run_attempt(attempt_request(), control) == "Done."
    assert [event["type"] for event in control.budget.events] == ["hard_overrun"]


async def test_no_turn_starts_once_the_budget_is_exhausted(server: ChatServer, backend: OpenAIBackend) -> None:
    control = BudgetControl(limits={"costUsd": {"hard": 0}})

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(), control)

    assert caught.value.code == "BUDGET_EXHAUSTED"
    assert server.requests == []


async def test_with_a_schema_the_main_turn_is_not_final(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(Stream(text_stream("Thinking out loud.", counts=usage(500, 100))))
    control = BudgetControl(schema=SCHEMA, limits={"tokens": {"hard": 500}})

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(schema=SCHEMA), control)

    assert caught.value.code == "BUDGET_EXHAUSTED"
    assert len(server.requests) == 1


async def test_a_result_accepted_in_an_over_budget_turn_is_kept(server: ChatServer, backend: OpenAIBackend) -> None:
    server.script(
        Stream(text_stream("Counted.", counts=usage(100, 10))),
        Stream(tool_stream("workflow_result", {"n": 3}, counts=usage(500, 10))),
    )
    control = BudgetControl(schema=SCHEMA, limits={"tokens": {"hard": 500}})

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), control) == {"n": 3}
    assert [turn.final for turn in control.turns] == [False, True]


async def test_the_soft_instruction_is_sent_once_before_the_next_turn(
    server: ChatServer, backend: OpenAIBackend
) -> None:
    server.script(
        Stream(tool_stream("read", {}, counts=usage(100, 50))),
        Stream(text_stream("Partial findings.", counts=usage(200, 50))),
        Stream(text_stream("Still no result.", counts=usage(300, 50))),
        Stream(tool_stream("workflow_result", {"n": 1}, counts=usage(400, 50))),
    )
    control = BudgetControl(schema=SCHEMA, limits={"tokens": {"soft": 100, "hard": 5000}})

    assert await backend.run_attempt(attempt_request(schema=SCHEMA), control) == {"n": 1}

    cost = round(PRICES.usd(100, 50), 10)
    instruction = soft_instruction({"tokens": 150, "costUsd": cost, "durationMs": 0, "agentLaunches": 0})
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == instruction
    third = server.requests[2].body["messages"]
    assert [m["content"] for m in third[-2:]] == ["Partial findings.", SUBMIT_RESULT]
    last = server.requests[3].body["messages"]
    assert [m["content"] for m in last if m["role"] == "user"].count(instruction) == 1
