"""▶ Run on a Temporal-backed project never holds up the language server's loop: the launch reads the
project's files and validates the script on a thread, and only starts the workflow on the loop (a
real dev server and worker; Python's audit hook sees which thread opens the project's files)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_temporal_editor import make_project

from isolation import isolated_environment
from piflow.engine.temporal.settings import TemporalSettings
from piflow.server.temporal_runs import TemporalHost
from temporal_cluster import Workers

_watched: list[tuple[Path, list[int]]] = []
"""The project whose file opens are being recorded, and the threads that opened them."""


def _record_opens(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _watched and isinstance(args[0], str | Path):
        root, threads = _watched[-1]
        if str(args[0]).startswith(str(root)):
            threads.append(threading.get_ident())


sys.addaudithook(_record_opens)  # audit hooks cannot be removed: it records only while `_watched` is set


async def test_a_launch_from_the_editor_reads_and_validates_the_project_off_the_loop(
    tmp_path: Path, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers.start(1)
    project = make_project(tmp_path, workers)
    for name, value in isolated_environment(tmp_path, tmp_path / "home", tmp_path / "agent").items():
        monkeypatch.setenv(name, value)
    host = TemporalHost(project, project, settings=TemporalSettings(address=workers.server.address,
                                                                    task_queue=workers.task_queue))
    script = project / "release.workflow.js"
    text = script.read_text()
    await host.runs()  # connected (the SDK imported on a thread too)
    opened: list[int] = []
    _watched.append((project, opened))
    try:
        run_id = await host.launch(str(script), text, str(project), {})
    finally:
        _watched.clear()
    assert opened, "the launch read none of the project's files (piflow.toml, settings)"
    assert threading.get_ident() not in opened  # the loop's thread opened none of them
    snapshot = await (await host.runs()).snapshot(run_id, timeout=60)
    assert snapshot.workflow_name == "release"
