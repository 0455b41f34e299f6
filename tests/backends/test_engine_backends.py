"""A whole run on the openai backend against the loopback server: results, accounting, budgets, 429 pause."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from chat_server import Body, ChatServer, Stream, text_stream, usage

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore


async def test_openai_run_accounts_tokens_and_cost(project: Path, server: ChatServer) -> None:
    server.script(Stream(text_stream("the answer", counts=usage(1000, 250))))
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script='return await agent("question")', cwd=str(project),
                                                       budget={"costUsd": {"soft": 0.001}}))
            with anyio.fail_after(20):
                record = await engine.wait(run_id)
    assert record.state == "completed", record.error
    assert record.result == "the answer"
    assert record.usage["tokens"] == 1250
    assert record.usage["costUsd"] == pytest.approx((1000 * 2 + 250 * 8) / 1_000_000)
    assert server.bodies()[0]["model"] == "m1"
    assert "Task:\nquestion" in server.bodies()[0]["messages"][-1]["content"]


async def test_rate_limit_pauses_the_run_and_retries_after_resume(project: Path, server: ChatServer) -> None:
    server.script(Body({"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, status=429),
                  Stream(text_stream("after the pause", counts=usage(10, 5))))
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script='return await agent("q")', cwd=str(project)))
            with anyio.fail_after(20):
                while store.get_run(run_id).state != "paused":  # type: ignore[union-attr]
                    await anyio.sleep(0.01)
                await engine.resume(run_id)
                record = await engine.wait(run_id)
    assert record.state == "completed"
    assert record.result == "after the pause"
    assert len(server.requests) == 2


async def test_pi_run_records_transcripts_and_charges_the_budget(
    project: Path, server: ChatServer, pi_command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIFLOW_PI_COMMAND", pi_command[0])
    server.script(Stream(text_stream("pi says hi", counts=usage(300, 40))))
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script='return await agent("greet", {tools: ["read"]})',
                                                       cwd=str(project), backend="pi",
                                                       budget={"tokens": {"hard": 100000}}))
            with anyio.fail_after(120):
                record = await engine.wait(run_id)
        assert record.state == "completed", record.error
        assert record.result == "pi says hi"
        assert record.usage["tokens"] == 340
        assert record.usage["costUsd"] == pytest.approx((300 * 2 + 40 * 8) / 1_000_000)
        [agent] = store.agents(run_id)
        [attempt] = store.attempts(agent.id)
        assert attempt.transcript_path and Path(attempt.transcript_path).is_file()
