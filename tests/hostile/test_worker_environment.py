"""The sandboxed worker starts with a minimal environment: provider keys and tokens never reach it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from piflow.engine.worker.client import WorkerProcess


async def test_the_worker_process_never_holds_the_hosts_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-the-host")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    seen: dict[str, str] = {}
    worker = WorkerProcess()

    def answer(call: dict[str, Any]) -> Any:
        # While the script waits on this call, read the worker's environment as the kernel has it.
        process = worker._process
        assert process is not None
        raw = Path(f"/proc/{process.pid}/environ").read_bytes()
        seen.update(item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)
        return "answered"

    await worker.start(body='return await agent("look around")')
    assert await worker.serve(answer) == "answered"
    assert "OPENAI_API_KEY" not in seen
    assert "GITHUB_TOKEN" not in seen
    assert seen["PATH"] == os.environ["PATH"]
    assert "PYTHONPATH" in seen
