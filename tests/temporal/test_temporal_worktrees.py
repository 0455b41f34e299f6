"""`withWorktree` on Temporal: each worker checks a scope's branch out in its own clone of the repository
and pushes it to the clone's origin, so the scope's next agent continues it on another machine and a
teammate fetches the result. Real git (a bare repository as the remote, two worker clones), a real dev
server, real `piflow worker`s and a real chat-completions server on loopback driving the tool runtime."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporal_support import machine, models, until_state

from backends.chat_server import ChatServer, Stream, text_stream, tool_stream, usage
from piflow.engine.engine import LaunchRequest
from piflow.engine.lifecycle import ENDED
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from piflow.engine.worktrees import branch_prefix, worktree_key
from temporal_cluster import DevServer

SCRIPT = """
const fixed = await withWorktree("fix", () => agent("Fix add().", {label: "fixer", tools: ["edit"]}));
await checkpoint({name: "handover", prompt: "Continue on another worker?", context: null});
const noted = await withWorktree("fix", () => agent("Note it.", {label: "noter", tools: ["read", "write"]}));
return [fixed, noted];
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A bare repository (the team's remote) holding calc.py and the project's piflow.toml."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (seed / "piflow.toml").write_text('[piflow]\nbackend = "openai"\nmodel = "local/m1"\n')
    git(seed, "init", "-q", "-b", "main")
    git(seed, "add", ".")
    git(seed, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    return bare


async def test_a_scope_continues_on_another_worker_s_clone_and_comes_back_as_a_pushed_branch(
    tmp_path: Path, dev_server: DevServer, chat: ChatServer, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher, clone_a, clone_b = (tmp_path / name for name in ("laptop", "clone-a", "clone-b"))
    for clone in (launcher, clone_a, clone_b):
        git(tmp_path, "clone", "-q", str(remote), str(clone))
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / "agent"))
    models(home / "agent", chat)
    chat.script(
        Stream(tool_stream("edit", {"path": "calc.py", "edits": [{"oldText": "a - b", "newText": "a + b"}]},
                           counts=usage(100, 10))),
        Stream(text_stream("fixed", counts=usage(120, 2))),
        Stream(tool_stream("read", {"path": "calc.py"}, counts=usage(100, 10))),
        Stream(tool_stream("write", {"path": "NOTES.md", "content": "add() adds\n"}, call_id="c2",
                           counts=usage(120, 10))),
        Stream(text_stream("noted", counts=usage(140, 2))),
    )
    task_queue = f"piflow-worktrees-{os.getpid()}-{tmp_path.name}"
    first = machine(dev_server, tmp_path / "machine-a", task_queue, chat, f'[temporal]\nworktrees = "{clone_a}"\n')
    second = machine(dev_server, tmp_path / "machine-b", task_queue, chat, f'[temporal]\nworktrees = "{clone_b}"\n')
    settings = TemporalSettings(address=dev_server.address, task_queue=task_queue)
    try:
        first.start(1)
        async with TemporalRuns(settings, str(launcher)) as runs:
            run_id = await runs.launch(LaunchRequest(script=SCRIPT, cwd=str(launcher)))
            waiting = await until_state(runs, run_id, {"awaiting_input", *ENDED}, 120)
            assert waiting.state == "awaiting_input", (waiting.error, waiting.agents, first.logs())
            first.stop_all()  # machine A is gone: its clone still has the branch, the remote has it too
            second.start(1)
            assert await runs.respond(run_id, "handover", True)
            final = await until_state(runs, run_id, ENDED, 120)
        assert (final.state, final.result) == ("completed", ["fixed", "noted"]), (final.error, second.logs())
    finally:
        first.stop_all()
        second.stop_all()

    read_on_b = [m["content"] for m in chat.bodies()[3]["messages"] if m["role"] == "tool"]
    assert read_on_b[-1] == "1\tdef add(a, b):\n2\t    return a + b", "machine B continued machine A's work"
    branch = f"{branch_prefix(run_id)}/{worktree_key(run_id, 'worktree/named/fix')}"
    git(launcher, "fetch", "-q", "origin", branch)
    assert git(launcher, "show", "FETCH_HEAD:calc.py") == "def add(a, b):\n    return a + b\n"
    assert git(launcher, "show", "FETCH_HEAD:NOTES.md") == "add() adds\n"
    assert git(launcher, "log", "--format=%s", "origin/main..FETCH_HEAD").splitlines() == [
        "pi-extensible-workflows agent attempt"] * 2 + ["pi-extensible-workflows runtime snapshot"]
    for checkout in (launcher, clone_a, clone_b):
        assert git(checkout, "status", "--porcelain") == "", "no checkout's working tree was written"
        assert (checkout / "calc.py").read_text().endswith("a - b\n")
        assert len(git(checkout, "worktree", "list").splitlines()) == 1, "no worktree left behind"


def test_a_worker_refuses_a_clone_that_is_not_there(tmp_path: Path) -> None:
    from isolation import isolated_environment

    env = isolated_environment(tmp_path, tmp_path / "home", tmp_path / "agent")
    done = subprocess.run([sys.executable, "-m", "piflow", "worker", "--worktrees", str(tmp_path / "missing")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert f"names {tmp_path / 'missing'}, which is not a directory" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
