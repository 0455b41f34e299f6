"""Spec J.6 on resume: a conversation's head keeps the identity its turns ran with (model, execution
policy fingerprint, tool-definition hash), and a turn that would continue it under another identity
fails with RESUME_INCOMPATIBLE and the spec's message, sending nothing. openai backend, loopback
server, a real owner process killed with SIGKILL between turns."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from attempt_control import attempt_request
from chat_server import ChatServer, Stream, text_stream, usage
from test_openai_conversations import kill_during_turn_two, resume

from piflow.engine.agents import conversation_identity
from piflow.engine.environment import store_path
from piflow.engine.store import RunStore


def test_the_identity_ignores_per_turn_options_and_follows_everything_fixed() -> None:
    turn = dataclasses.replace(attempt_request("one", conversation="c"), options={"model": "local/m1"})
    same = conversation_identity(turn, None, {})

    assert conversation_identity(dataclasses.replace(turn, options={**turn.options, "timeoutMs": 5, "retries": 2}),
                                 None, {}) == same
    assert conversation_identity(turn, "wt-1", {})["policy"] != same["policy"]
    assert conversation_identity(dataclasses.replace(turn, cwd="/elsewhere"), None, {})["policy"] != same["policy"]
    assert conversation_identity(dataclasses.replace(turn, system_append="Be terse."), None, {})["policy"] != (
        same["policy"])
    tools = dataclasses.replace(turn, tools=("ticket",))
    assert conversation_identity(tools, None, {"ticket": {"v": 1}})["tools"] != (
        conversation_identity(tools, None, {"ticket": {"v": 2}})["tools"])


def test_the_head_of_each_turn_keeps_its_identity_beside_the_backends_state(project: Path, server: ChatServer) -> None:
    run_id = kill_during_turn_two(project, server)

    with RunStore.open(store_path(str(project))) as store:
        head = store.conversation_head(run_id, next(iter(_conversations(project))))
    assert head is not None
    turn, state = head
    assert turn == 1
    assert state["identity"]["model"] == "local/m1"
    assert {len(state["identity"]["policy"]), len(state["identity"]["tools"])} == {64}
    assert [m["role"] for m in state["state"]["messages"]] == ["system", "user", "assistant"]


@pytest.mark.parametrize(
    ("key", "saved", "message"),
    [
        ("model", "local/other", "Conversation model changed"),
        ("policy", "0" * 64, "Conversation execution policy changed"),
        ("tools", "0" * 64, "Conversation tool definitions changed"),
    ],
)
def test_a_resumed_turn_under_another_identity_is_refused_with_the_specs_message(
    project: Path, server: ChatServer, key: str, saved: str, message: str
) -> None:
    run_id = kill_during_turn_two(project, server)
    with sqlite3.connect(store_path(str(project))) as raw:  # turn 1 as if it had run under another identity
        [(conversation, state)] = raw.execute("SELECT conversation, state FROM conversations").fetchall()
        changed = json.loads(state)
        changed["identity"][key] = saved
        raw.execute("UPDATE conversations SET state = ? WHERE conversation = ?", (json.dumps(changed), conversation))
    server.script(Stream(text_stream("You are Ada.", counts=usage(80, 4))))

    done = resume(project, run_id)

    assert done.returncode != 0
    with RunStore.open(store_path(str(project))) as store:
        record = store.get_run(run_id)
    assert record is not None and record.state == "failed"
    assert record.error is not None and (record.error["code"], record.error["message"]) == (
        "RESUME_INCOMPATIBLE", message)
    assert len(server.requests) == 2, "turn 2 was not sent again under the changed identity"


def _conversations(project: Path) -> list[str]:
    with sqlite3.connect(store_path(str(project))) as raw:
        return [row[0] for row in raw.execute("SELECT conversation FROM conversations")]
