"""Agents with hands on the openai backend: a whole run whose model greps, reads, edits and runs the
tests in its worktree through the tool runtime, over real HTTP and in a real git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
from attempt_control import BudgetControl, attempt_request
from chat_server import ChatServer, Stream, chunk, text_stream, tool_stream, usage

from piflow.engine.backends.openai import OpenAIBackend
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore

SCRIPT = """
return await withWorktree("fix", () => agent("Fix add() so the tests pass.",
                                             {label: "fixer", tools: ["grep", "read", "edit", "bash"]}));
"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def repository(root: Path) -> None:
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text("from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('PASSED')\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "calc.py", "test_calc.py")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init")


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [message["content"] for message in body["messages"] if message["role"] == "tool"]


async def test_an_agent_greps_reads_edits_and_tests_in_its_worktree(project: Path, server: ChatServer) -> None:
    repository(project)
    # Each reply after a tool call comes slowly (`delay` before each chunk), as a model's does: the
    # tool's activity stays shown until the next reply streams, long enough for the store poll
    # below to see it even on a loaded machine (a reply at once left `read calc.py` up for ~1 ms).
    slowly = 0.1
    server.script(
        Stream(tool_stream("grep", {"pattern": "def add"}, call_id="c1", counts=usage(100, 10))),
        Stream(tool_stream("read", {"path": "calc.py"}, call_id="c2", counts=usage(120, 10)), delay=slowly),
        Stream(tool_stream("edit", {"path": "calc.py", "edits": [{"oldText": "a - b", "newText": "a + b"}]},
                           call_id="c3", counts=usage(140, 10)), delay=slowly),
        Stream(tool_stream("bash", {"command": "python3 test_calc.py"}, call_id="c4", counts=usage(160, 10)),
               delay=slowly),
        Stream(text_stream("Fixed: add() returns a + b and the tests pass.", counts=usage(180, 12)), delay=slowly),
    )
    activities: list[str] = []
    with RunStore.open(project.parent / "runs.db") as store:
        async with Engine(store) as engine:
            run_id = await engine.launch(LaunchRequest(script=SCRIPT, cwd=str(project)))
            with anyio.fail_after(60):
                while (record := store.get_run(run_id)) is None or record.state in ("queued", "running"):
                    activities += [a.activity for a in store.agents(run_id) if a.activity and
                                   (not activities or activities[-1] != a.activity)]
                    await anyio.sleep(0.005)
                record = await engine.wait(run_id)
        assert record.state == "completed", record.error
        assert record.result == "Fixed: add() returns a + b and the tests pass."
        [worktree] = store.worktrees(run_id)
        [agent] = store.agents(run_id)
        [attempt] = store.attempts(agent.id)

    bodies = server.bodies()
    assert [tool["function"]["name"] for tool in bodies[0]["tools"]] == ["grep", "read", "edit", "bash"]
    assert tool_messages(bodies[1]) == ["calc.py:1: def add(a, b):"]
    assert tool_messages(bodies[2])[-1] == "1\tdef add(a, b):\n2\t    return a - b"
    assert tool_messages(bodies[3])[-1] == "Successfully replaced 1 block(s) in calc.py."
    assert tool_messages(bodies[4])[-1] == "PASSED"
    assert (Path(worktree.path) / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a - b\n", "the checkout is untouched"
    assert record.usage["tokens"] == 700 + 52

    assert attempt.transcript_path is not None
    lines = [json.loads(line) for line in Path(attempt.transcript_path).read_text().splitlines()]
    calls = [(line["tool"]["name"], line["tool"]["isError"]) for line in lines if "tool" in line]
    assert calls == [("grep", False), ("read", False), ("edit", False), ("bash", False)]
    assert lines[-1]["message"]["content"] == "Fixed: add() returns a + b and the tests pass."

    for shown in ("grep def add", "read calc.py", "edit calc.py", "bash: python3 test_calc.py"):
        assert shown in activities, activities


async def test_parallel_tool_calls_run_concurrently_and_are_answered_in_order(
    server: ChatServer, backend: OpenAIBackend, tmp_path: Path
) -> None:
    # Each command waits for the other, so they end only if they run at the same time (one after the
    # other, the first waits until its timeout: no wall-clock bound to miss on a loaded machine); the
    # second call ends first, and the answers still come in the order of the calls.
    slow = "touch slow.started; until [ -f fast.done ]; do sleep 0.05; done; echo slow"
    fast = "until [ -f slow.started ]; do sleep 0.05; done; touch fast.done; echo fast"
    calls = [
        {"index": 0, "id": "slow", "type": "function",
         "function": {"name": "bash", "arguments": json.dumps({"command": slow})}},
        {"index": 1, "id": "fast", "type": "function",
         "function": {"name": "bash", "arguments": json.dumps({"command": fast})}},
    ]
    server.script(
        Stream([chunk({"role": "assistant", "content": None}), chunk({"tool_calls": calls}),
                chunk({}, finish="tool_calls")]),
        Stream(text_stream("Both done.")),
    )
    request = attempt_request(tools=("bash",), cwd=str(tmp_path), options={"toolTimeoutMs": 20000})

    assert await backend.run_attempt(request, BudgetControl()) == "Both done."

    history = server.requests[1].body["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in history if m["role"] == "tool"] == [
        ("slow", "slow"), ("fast", "fast")]


async def test_a_tool_error_reaches_the_model_which_goes_on(
    server: ChatServer, backend: OpenAIBackend, tmp_path: Path
) -> None:
    server.script(
        Stream(tool_stream("read", {"path": "../../etc/passwd"})),
        Stream(text_stream("I may only read my own files.")),
    )
    request = attempt_request(tools=("read",), cwd=str(tmp_path))

    assert await backend.run_attempt(request, BudgetControl()) == "I may only read my own files."

    [reply] = tool_messages(server.requests[1].body)
    assert reply.startswith(f"Path ../../etc/passwd is outside the working directory {tmp_path.resolve()}")


async def test_tool_timeout_ms_bounds_each_call(server: ChatServer, backend: OpenAIBackend, tmp_path: Path) -> None:
    server.script(Stream(tool_stream("bash", {"command": "sleep 30"})), Stream(text_stream("Too slow.")))
    request = attempt_request(tools=("bash",), cwd=str(tmp_path), options={"toolTimeoutMs": 500})

    with anyio.fail_after(20):
        await backend.run_attempt(request, BudgetControl())

    assert tool_messages(server.requests[1].body) == ["Tool 'bash' exceeded its timeout of 500ms."]
