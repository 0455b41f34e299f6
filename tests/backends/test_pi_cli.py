"""The pi backend end to end: attempts run as real pi sessions (`pi --mode rpc`, installed from
the npm registry by `scripts/install-pi`) against the loopback chat-completions server, which a
`models.json` in an isolated agent dir names as provider `local`."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from attempt_control import BudgetControl, attempt_request
from chat_server import Body, ChatServer, Hang, Stream, text_stream, tool_stream, usage
from conftest import PRICES

from piflow.engine.backends.base import AttemptRequest, ProviderRateLimited, Usage
from piflow.engine.backends.pi import PiBackend
from piflow.engine.budgets import soft_instruction
from piflow.engine.prompts import (
    NO_VALID_RESULT,
    NOT_ACCEPTING,
    REPAIR_RESULT,
    RESULT_ACCEPTED,
    RESULT_REJECTED,
    SUBMIT_RESULT,
)
from piflow.errors import WorkflowError

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-pi-test-key"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


@pytest.fixture
def agent_dir(tmp_path: Path, server: ChatServer) -> Path:
    agent = tmp_path / "agent"
    agent.mkdir()
    provider = {
        "baseUrl": server.url,
        "api": "openai-completions",
        "apiKey": KEY,
        "models": [{"id": "m1", "reasoning": True, "cost": {**PRICES.to_json(), "cacheWrite": 0}}],
    }
    (agent / "models.json").write_text(json.dumps({"providers": {"local": provider}}), encoding="utf-8")
    return agent


@pytest.fixture
def pi(pi_command: list[str], agent_dir: Path, tmp_path: Path) -> PiBackend:
    home = tmp_path / "home"
    home.mkdir()
    return PiBackend(command=pi_command, agent_dir=agent_dir, environ={"HOME": str(home), "PATH": os.environ["PATH"]})


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("piflow notes\n", encoding="utf-8")
    yield work


def request_in(cwd: Path, **changes: Any) -> AttemptRequest:
    return dataclasses.replace(attempt_request(**changes), cwd=str(cwd))


def messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A request's conversation as (role, text) pairs, system prompt left out."""
    pairs = []
    for message in body["messages"][1:]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        pairs.append((message["role"], content or ""))
    return pairs


def read_transcript(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def charged(prompt: int, completion: int, cached: int = 0) -> Usage:
    """What a turn costs with `local/m1`'s prices, rounded like `rounded`."""
    uncached = prompt - cached
    return Usage(uncached, completion, cached, 0, round(PRICES.usd(uncached, completion, cached), 12))


def rounded(usage: Usage) -> Usage:
    """pi sums the cost's parts in another order than piflow: equal up to float noise."""
    return dataclasses.replace(usage, cost_usd=round(usage.cost_usd, 12))


async def test_an_attempt_is_a_pi_session_with_tools_usage_cost_and_a_transcript(
    server: ChatServer, pi: PiBackend, workdir: Path, agent_dir: Path
) -> None:
    server.script(
        Stream(tool_stream("read", {"path": "notes.txt"}, counts=usage(300, 20))),
        Stream(text_stream("The notes say hello.", reasoning="Read it.", counts=usage(500, 30, cached=100))),
    )
    control = BudgetControl()
    request = request_in(workdir, system_append="You write short answers.", thinking="high")

    result = await pi.run_attempt(request, control)

    assert result == "The notes say hello."
    assert [(rounded(turn.usage), turn.final) for turn in control.turns] == [
        (charged(300, 20), False),
        (charged(500, 30, cached=100), True),
    ]
    assert control.budget.usage["tokens"] == 300 + 20 + 400 + 30
    assert control.activities == ["read", "reasoning", "responding"]
    first, second = server.requests
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.body["model"] == "m1"
    assert first.body["reasoning_effort"] == "high"
    assert [tool["function"]["name"] for tool in first.body["tools"]] == ["read"]
    system = first.body["messages"][0]["content"]
    assert "You write short answers." in system
    assert f"Current working directory: {workdir}" in system
    assert messages(first.body) == [("user", request.prompt)]
    assert messages(second.body)[-1] == ("tool", "piflow notes\n")

    [(path, session_id)] = control.transcripts
    assert Path(path).is_relative_to(agent_dir / "sessions")
    entries = read_transcript(path)
    assert entries[0] == {**entries[0], "type": "session", "id": session_id, "cwd": str(workdir)}
    assert {"type": "session_info", "name": "demo:writer:attempt-1"}.items() <= entries[1].items()
    assistant = [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    assert assistant[-1]["content"][-1] == {"type": "text", "text": "The notes say hello."}


async def test_the_output_schema_is_a_workflow_result_tool_accepted_only_after_the_task(
    server: ChatServer, pi: PiBackend, workdir: Path
) -> None:
    server.script(
        Stream(tool_stream("workflow_result", {"answer": 1}, counts=usage(100, 10))),
        Stream(text_stream("It is 42.", counts=usage(120, 5))),
        Stream(tool_stream("workflow_result", {"answer": 42}, call_id="call_2", counts=usage(150, 8))),
    )
    control = BudgetControl(schema=SCHEMA)

    result = await pi.run_attempt(request_in(workdir, schema=SCHEMA), control)

    assert result == {"answer": 42}
    assert [turn.final for turn in control.turns] == [False, False, True]
    first, second, third = server.requests
    tool = next(t for t in first.body["tools"] if t["function"]["name"] == "workflow_result")
    assert tool["function"]["parameters"] == SCHEMA
    assert messages(second.body)[-1] == ("tool", NOT_ACCEPTING)
    assert messages(third.body)[-2:] == [("assistant", "It is 42."), ("user", SUBMIT_RESULT)]
    [(path, _)] = control.transcripts
    results = [e["message"] for e in read_transcript(path) if e.get("message", {}).get("role") == "toolResult"]
    assert [(r["content"][0]["text"], r["isError"]) for r in results] == [
        (NOT_ACCEPTING, True),
        (RESULT_ACCEPTED, False),
    ]


async def test_a_result_piflow_rejects_gets_one_repair_then_fails(
    server: ChatServer, pi: PiBackend, workdir: Path
) -> None:
    # pi validates against the tool's schema; piflow's own check (here stricter) has the last word.
    server.script(
        Stream(text_stream("Working.", counts=usage(10, 1))),
        Stream(tool_stream("workflow_result", {"answer": 1}, counts=usage(10, 1))),
        Stream(text_stream("Done.", counts=usage(10, 1))),
        Stream(text_stream("No.", counts=usage(10, 1))),
    )
    control = BudgetControl(schema={**SCHEMA, "properties": {"answer": {"type": "integer", "minimum": 5}}})

    with pytest.raises(WorkflowError) as caught:
        await pi.run_attempt(request_in(workdir, schema=SCHEMA), control)

    assert (caught.value.code, caught.value.message) == ("RESULT_INVALID", NO_VALID_RESULT)
    assert messages(server.requests[2].body)[-1] == ("tool", RESULT_REJECTED)
    assert messages(server.requests[3].body)[-2:] == [("assistant", "Done."), ("user", REPAIR_RESULT)]


async def test_a_rate_limit_pauses_at_once_instead_of_pi_retrying(
    server: ChatServer, pi: PiBackend, workdir: Path
) -> None:
    error = {"error": {"message": "Rate limit reached for m1", "code": "rate_limit_exceeded"}}
    server.script(Body(error, status=429), Stream(text_stream("too late")))

    with anyio.fail_after(30), pytest.raises(ProviderRateLimited) as caught:
        await pi.run_attempt(request_in(workdir), BudgetControl())

    assert "429" in str(caught.value)
    assert "Rate limit reached for m1" in str(caught.value)
    assert len(server.requests) == 1


async def test_a_provider_error_fails_the_attempt_with_pis_message(
    server: ChatServer, pi: PiBackend, workdir: Path
) -> None:
    server.script(Body({"error": {"message": "Unsupported parameter: tools"}}, status=400))

    with pytest.raises(WorkflowError) as caught:
        await pi.run_attempt(request_in(workdir), BudgetControl())

    assert caught.value.code == "AGENT_FAILED"
    assert "400" in caught.value.message
    assert "Unsupported parameter: tools" in caught.value.message


async def test_an_exhausted_budget_stops_before_the_first_model_turn(
    server: ChatServer, pi: PiBackend, workdir: Path
) -> None:
    control = BudgetControl(limits={"tokens": {"hard": 0}})

    with pytest.raises(WorkflowError) as caught:
        await pi.run_attempt(request_in(workdir), control)

    assert caught.value.code == "BUDGET_EXHAUSTED"
    assert server.requests == []


async def test_an_over_budget_tool_turn_aborts_the_session(server: ChatServer, pi: PiBackend, workdir: Path) -> None:
    server.script(
        Stream(tool_stream("read", {"path": "notes.txt"}, counts=usage(400, 200))),
        Stream(text_stream("never asked")),
    )
    control = BudgetControl(limits={"tokens": {"hard": 500}})

    with pytest.raises(WorkflowError) as caught:
        await pi.run_attempt(request_in(workdir), control)

    assert caught.value.code == "BUDGET_EXHAUSTED"
    assert [turn.final for turn in control.turns] == [False]
    assert len(server.requests) == 1


async def test_the_soft_limit_steers_the_next_turn(server: ChatServer, pi: PiBackend, workdir: Path) -> None:
    server.script(
        Stream(tool_stream("read", {"path": "notes.txt"}, counts=usage(100, 20))),
        Stream(text_stream("Finished.", counts=usage(150, 5))),
    )
    control = BudgetControl(limits={"tokens": {"soft": 50, "hard": 10_000}})

    assert await pi.run_attempt(request_in(workdir), control) == "Finished."

    first_turn = {"tokens": 120, "costUsd": round(control.turns[0].usage.cost_usd, 10)}
    steering = soft_instruction({"durationMs": 0, "agentLaunches": 0, **first_turn})
    assert messages(server.requests[1].body)[-2:] == [("tool", "piflow notes\n"), ("user", steering)]


async def test_cancellation_kills_the_pi_process_group(server: ChatServer, pi: PiBackend, workdir: Path) -> None:
    marker = f"cancel-{uuid.uuid4().hex}"
    server.script(Hang(limit=30))
    request = dataclasses.replace(request_in(workdir), workflow_name=marker)

    with anyio.move_on_after(20) as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(pi.run_attempt, request, BudgetControl())
            while not server.requests:
                await anyio.sleep(0.05)
            group.cancel_scope.cancel()

    assert not scope.cancelled_caught
    assert server.disconnected.wait(5)
    assert _processes_mentioning(marker) == []


async def test_a_conversation_continues_the_last_successful_turns_session(
    server: ChatServer, pi: PiBackend, workdir: Path
) -> None:
    server.script(
        Stream(text_stream("First answer.", counts=usage(10, 2))),
        Body({"error": {"message": "Unsupported parameter: tools"}}, status=400),
        Stream(text_stream("Second answer.", counts=usage(20, 2))),
    )
    first = request_in(workdir, task="Turn one.", conversation="c1")
    second = request_in(workdir, task="Turn two.", conversation="c1", turn=2, agent_id="run-1:2")
    controls = [BudgetControl()]
    assert await pi.run_attempt(first, controls[0]) == "First answer."
    head = controls[0].saved
    assert head is not None and head["sessionFile"] == controls[0].transcripts[0][0]
    controls += [BudgetControl(head=head), BudgetControl(head=head)]  # as the run store hands it back

    with pytest.raises(WorkflowError):
        await pi.run_attempt(second, controls[1])
    assert controls[1].saved is None
    retry = dataclasses.replace(second, attempt=2)
    assert await pi.run_attempt(retry, controls[2]) == "Second answer."

    assert messages(server.requests[2].body) == [
        ("user", first.prompt),
        ("assistant", "First answer."),
        ("user", second.prompt),
    ]
    paths = [control.transcripts[0][0] for control in controls]
    assert len(set(paths)) == 3
    assert read_transcript(paths[2])[0]["parentSession"] == paths[0]
    # A changed model or a missing head is the engine's to refuse (tests/backends/test_conversation_identity.py).


def _processes_mentioning(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found
