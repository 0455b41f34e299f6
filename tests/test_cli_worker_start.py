"""`piflow run` spawns its run's worker before it validates the launch: a launch it refuses must not
leave that worker behind (over the real CLI, in a subprocess with its own HOME and XDG dirs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from isolation import isolated_environment


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds `marker` (the workers of the command under test)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_refused_launch_leaves_no_worker_process(tmp_path: Path) -> None:
    marker = tmp_path / "tmp-of-this-test"  # TMPDIR is one of the few variables a worker inherits
    marker.mkdir()
    env = {**isolated_environment(tmp_path, tmp_path / "home", tmp_path / "agent"), "TMPDIR": str(marker)}
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.workflow.js").write_text("const answer = ;\nreturn answer;\n")
    done = subprocess.run(
        [sys.executable, "-m", "piflow", "run", "bad.workflow.js"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "INVALID_SYNTAX" in done.stderr, done.stderr
    assert processes_with(str(marker)) == []
    assert not list(tmp_path.rglob(".starting-*.log"))
