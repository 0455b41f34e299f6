"""Conversations that survive restarts: the owner process is killed (SIGKILL) while turn 2 is in flight;
the resumed run's turn 2 still sees turn 1, because turn 1's messages were saved in the run store."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from chat_server import ChatServer, Hang, Stream, text_stream, usage

from piflow.engine import events
from piflow.engine.environment import store_path
from piflow.engine.prompts import attempt_prompt
from piflow.engine.store import RunStore

SCRIPT = """
const chat = conversation("chat");
const first = await chat.run("I am Ada.");
const second = await chat.run("Who am I?");
return [first, second];
"""


def piflow(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "piflow", *args], cwd=project, env=dict(os.environ),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_during_turn_two(project: Path, server: ChatServer) -> str:
    """Start the run, SIGKILL its owner once turn 2's request arrived, and return the run id."""
    (project / "chat.workflow.js").write_text(SCRIPT)
    server.script(Stream(text_stream("Nice to meet you, Ada.", counts=usage(50, 6))), Hang(limit=60))
    owner = piflow(project, "run", "chat.workflow.js", "--json")
    deadline = time.monotonic() + 60
    while len(server.requests) < 2:
        assert owner.poll() is None, owner.communicate()
        assert time.monotonic() < deadline, "turn 2 never started"
        time.sleep(0.01)
    owner.send_signal(signal.SIGKILL)
    owner.communicate()
    with RunStore.open(store_path(str(project))) as store:
        [run] = store.list_runs()
    return run.id


def resume(project: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "piflow", "resume", run_id[:8], "--json"], cwd=project,
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)


def turns(body: dict[str, object]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]  # type: ignore[attr-defined,index]


def test_turn_two_after_a_kill_and_resume_continues_turn_one(project: Path, server: ChatServer) -> None:
    run_id = kill_during_turn_two(project, server)
    server.script(Stream(text_stream("You are Ada.", counts=usage(80, 4))))

    done = resume(project, run_id)

    assert done.returncode == 0, done.stderr
    with RunStore.open(store_path(str(project))) as store:
        record = store.get_run(run_id)
    assert record is not None and record.state == "completed", record
    assert record.result == ["Nice to meet you, Ada.", "You are Ada."]
    assert len(server.requests) == 3, "turn 1 was replayed from the journal, not asked again"
    assert turns(server.requests[2].body) == [
        ("user", attempt_prompt("chat", "m1", "I am Ada.")),
        ("assistant", "Nice to meet you, Ada."),
        ("user", attempt_prompt("chat", "m1", "Who am I?")),
    ]
    assert server.requests[2].body["messages"][0] == server.requests[0].body["messages"][0]


def test_a_conversation_whose_state_is_gone_fails_with_a_warning_instead_of_starting_over(
    project: Path, server: ChatServer
) -> None:
    run_id = kill_during_turn_two(project, server)
    with sqlite3.connect(store_path(str(project))) as raw:  # as a store written before heads were saved
        raw.execute("DELETE FROM conversations")

    done = resume(project, run_id)

    assert done.returncode != 0
    with RunStore.open(store_path(str(project))) as store:
        record = store.get_run(run_id)
        warnings = [e.payload["message"] for e in store.events(run_id) if e.type == events.RUN_WARNING]
    assert record is not None and record.state == "failed"
    assert record.error is not None and record.error["code"] == "RESUME_INCOMPATIBLE"
    assert record.error["message"] == "Completed conversation turn has no persisted head"  # spec G.3
    assert warnings == ["Conversation chat: the state of turn 1 is missing from the run store, so turn 2 "
                        "cannot continue it"]
    assert len(server.requests) == 2, "nothing was sent: the conversation did not silently start over"
