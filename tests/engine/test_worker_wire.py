"""The worker's wire on the paths a resume takes: journaled JSON text passed through, settle lines
handed to QuickJS unparsed, call lines decoded in batches, and a lean start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_worker_host import Host
from test_worker_process import fake_python

from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.command import worker_environment
from piflow.engine.worker.instrument import instrumented
from piflow.engine.worker.protocol import Settled
from piflow.errors import WorkflowError

CATCHING = "try { return await agent('a'); } catch (e) { return [e.code, e.message]; }"


async def answered(settled: Any) -> Any:
    """The script's result when its one agent call is answered by `settled(call_id)`."""
    worker = WorkerProcess()
    await worker.start(body=CATCHING)
    async for call in worker.calls():
        await worker.settle([settled(call.id)])
    return await worker.wait_done()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a":[1,"\\u00e9",{"b":null}],"n":1.5,"t":true}', {"a": [1, "é", {"b": None}], "n": 1.5, "t": True}),
        ('"\\ud83d\\ude00 done"', "😀 done"),  # an escaped surrogate pair: decoded on the way, still one value
        ("null", None),
    ],
)
async def test_a_journaled_value_given_as_text_reaches_the_script_as_that_value(text: str, value: Any) -> None:
    assert await answered(lambda call_id: Settled(call_id, text=text)) == value
    assert await answered(lambda call_id: Settled(call_id, value)) == value


async def test_a_journaled_lone_surrogate_fails_the_call_as_a_fresh_one_does() -> None:
    fresh = await answered(lambda call_id: Settled(call_id, "\ud800"))
    replayed = await answered(lambda call_id: Settled(call_id, text='"\\ud800"'))
    assert fresh == replayed == ["RPC_LIMIT_EXCEEDED", "RPC values must be JSON-compatible"]


def _drive(body: str, answer: bytes, calls: int = 1) -> dict[str, Any]:
    """Run `body` in a worker driven by hand: once it made `calls` calls, write `answer`; its `done`."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "piflow.engine.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env=worker_environment(os.environ),
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        compile_line = json.dumps({"t": "compile", "source": instrumented(body)}).encode()
        worker.stdin.write(b"%s\n%s\n" % (compile_line, b'{"t":"start"}'))
        worker.stdin.flush()
        seen = 0
        while True:
            message = json.loads(worker.stdout.readline())
            seen += message["t"] == "call"
            if message["t"] == "call" and seen == calls:
                worker.stdin.write(answer)
                worker.stdin.flush()
            elif message["t"] == "done":
                return dict(message)
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"t":"settle","results":[{"id":1,"ok":true,"value":nope}]}\n',
         {"code": "RPC_LIMIT_EXCEEDED", "message": "RPC values must be JSON-compatible"}),
        (b'{"t":"answer","results":[]}\n', {"code": "INTERNAL_ERROR", "message": "Malformed workflow worker message"}),
    ],
)
def test_a_settle_line_the_worker_cannot_use_ends_the_run_with_the_protocol_error(line: bytes, error: Any) -> None:
    done = _drive("return await agent('x')", line)
    assert done["ok"] is False
    assert {key: done["error"][key] for key in ("code", "message")} == error


def test_settle_lines_written_together_each_settle_their_calls() -> None:
    body = "const [a, b] = await Promise.all([agent('x'), agent('y')]); return [a, b];"
    answers = (b'{"t":"settle","results":[{"id":2,"ok":true,"value":"second"}]}\n'
               b'{"t":"settle","results":[{"id":1,"ok":true,"value":{"n":[1]}}]}\n')
    assert _drive(body, answers, calls=2) == {"t": "done", "ok": True, "value": [{"n": [1]}, "second"]}


async def test_a_malformed_line_among_calls_read_at_once_still_fails_the_run(tmp_path: Path) -> None:
    lines = [json.dumps({"t": "call", "id": number, "op": "phase", "name": f"p{number}"}) for number in (1, 2, 3)]
    written = "\n".join([*lines, "not json", ""])
    program = f"import sys\nsys.stdout.write({written!r})\nsys.stdout.flush()\nsys.stdin.read()\n"
    worker = WorkerProcess(python=fake_python(tmp_path, program))
    await worker.start(body="return 1")
    host = Host()
    with pytest.raises(WorkflowError) as caught:
        await worker.serve(host)
    assert (caught.value.code, caught.value.message) == ("INTERNAL_ERROR", "Malformed workflow worker message")
    assert host.calls == []  # the batch that carried the fault starts no work


def test_the_worker_starts_without_argparse_resources_or_the_typed_calls() -> None:
    """What a worker imports before it runs a script is on the path of every launch and resume."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "piflow.engine.worker"], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, env=worker_environment(os.environ), check=True, timeout=60,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "piflow.engine.worker.runtime" in imported  # the runtime was loaded (the probe is not vacuous)
    unwanted = {"argparse", "importlib.resources", "pathlib", "tempfile", "zipfile", "dukpy",
                "tree_sitter_javascript", "piflow.engine.worker.protocol"}
    assert imported & unwanted == set()
