"""Faults of the owner process over the real CLI: Ctrl-C, SIGTERM and a full disk end a run cleanly
(recorded `interrupted`, lease released, no traceback) and `piflow resume` finishes it without
re-running journaled agents; damaged store rows never break `piflow runs` / `show`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import AGENTS, Project, first_line, make_project, poll


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _resume_finishes_without_rerunning(project: Project, run_id: str, done_before: list[str]) -> None:
    known = len(project.labels(run_id))
    resumed = project.piflow("resume", run_id[:8])
    assert resumed.returncode == 0, resumed.stderr
    assert 'Result: "done"' in resumed.stdout
    assert "RUN_OWNED" not in resumed.stderr
    started_again = set(project.labels(run_id)[known:]) & set(done_before)
    assert not started_again, "journaled agents replay: they are never started again"
    assert sorted(set(project.completed_labels(run_id)), key=lambda x: int(x[1:])) == [f"s{i}" for i in range(AGENTS)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_a_foreground_run_is_a_clean_resumable_interruption(project: Project, signum: int) -> None:
    owner = project.start("run", "slow.workflow.js")
    run_id = first_line(owner)
    poll(lambda: len(project.completed_labels(run_id)) >= 3, what="three agents to complete")
    workers = _children(owner.pid)
    assert workers, "the owner runs its script in a worker subprocess"
    owner.send_signal(signum)
    _, stderr = owner.communicate(timeout=90)
    assert owner.returncode == 128 + signum
    assert "Traceback" not in stderr
    assert f"interrupted ({signal.Signals(signum).name}): run {run_id[:8]} is interrupted" in stderr
    assert f"piflow resume {run_id[:8]}" in stderr
    assert project.state(run_id) == "interrupted"  # recorded by the owner itself, not by a later recovery
    assert project.leases(run_id) == 0
    assert not any(_alive(pid) for pid in workers)
    _resume_finishes_without_rerunning(project, run_id, project.completed_labels(run_id))


def test_sigterm_to_a_detached_owner_records_interrupted_and_releases_the_lease(project: Project) -> None:
    started = project.piflow("run", "slow.workflow.js", "--detach")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    poll(lambda: len(project.completed_labels(run_id)) >= 2, what="two agents to complete")
    pid = project.query("SELECT pid FROM leases WHERE run_id = ?", run_id)[0][0]
    os.kill(pid, signal.SIGTERM)
    poll(lambda: project.state(run_id) == "interrupted" and project.leases(run_id) == 0,
         what="the detached owner to record the interruption")
    poll(lambda: not _alive(pid), what="the owner to exit")
    _resume_finishes_without_rerunning(project, run_id, project.completed_labels(run_id))


def test_ctrl_c_while_resuming_interrupts_again_and_a_second_resume_finishes(project: Project) -> None:
    owner = project.start("run", "slow.workflow.js")
    run_id = first_line(owner)
    poll(lambda: len(project.completed_labels(run_id)) >= 2, what="two agents to complete")
    owner.send_signal(signal.SIGINT)
    owner.communicate(timeout=90)
    resumer = project.start("resume", run_id[:8])
    before = len(project.completed_labels(run_id))
    poll(lambda: len(project.completed_labels(run_id)) >= before + 2, what="the resumed run to make progress")
    resumer.send_signal(signal.SIGINT)
    _, stderr = resumer.communicate(timeout=90)
    assert resumer.returncode == 130 and "Traceback" not in stderr
    assert project.state(run_id) == "interrupted" and project.leases(run_id) == 0
    _resume_finishes_without_rerunning(project, run_id, project.completed_labels(run_id))


# -- a full disk ------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs for the run store (root only: `mount` is the real thing, no simulation)."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_mid_run_is_a_clear_error_and_resume_completes_after_freeing_space(
    tmp_path: Path, small_disk: Path
) -> None:
    project = make_project(tmp_path / "p")
    project.env["XDG_STATE_HOME"] = str(small_disk)
    owner = project.start("run", "slow.workflow.js")
    run_id = first_line(owner)
    poll(lambda: len(project.completed_labels(run_id)) >= 3, what="three agents to complete")
    filler = _fill(small_disk)
    try:
        _, stderr = owner.communicate(timeout=120)
    finally:
        filler.unlink()
    assert owner.returncode == 1
    assert "Traceback" not in stderr
    assert "database or disk is full" in stderr
    assert "Everything committed before the failure is saved" in stderr
    assert f"piflow resume {run_id[:8]}" in stderr
    kept = project.completed_labels(run_id)
    assert len(kept) >= 3
    _resume_finishes_without_rerunning(project, run_id, kept)


# -- damaged rows ---------------------------------------------------------------------------------


def _two_runs(project: Project) -> tuple[str, str]:
    ids = []
    for _ in range(2):
        completed = project.piflow("run", "quick.workflow.js")
        assert completed.returncode == 0, completed.stderr
        ids.append(completed.stdout.splitlines()[0])
    return ids[0], ids[1]


def _damage(project: Project, sql: str, *params: str) -> None:
    import sqlite3

    with sqlite3.connect(project.store) as connection:
        connection.execute(sql, params)


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("UPDATE runs SET usage = '{not json' WHERE id = ?", "column usage is not valid JSON"),
        ("UPDATE runs SET state = 'exploded' WHERE id = ?", "Invalid run state: 'exploded'"),
        ("UPDATE agents SET tools = '[1,' WHERE run_id = ?", "column tools is not valid JSON"),
    ],
    ids=["bad-json", "unknown-state", "damaged-agent"],
)
def test_a_damaged_row_is_shown_as_damaged_and_other_runs_are_listed(project: Project, sql: str,
                                                                     problem: str) -> None:
    damaged, healthy = _two_runs(project)
    _damage(project, sql, damaged)
    listed = project.piflow("runs", "--all")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    lines = listed.stdout.splitlines()
    assert any(line.startswith(healthy[:8]) and "completed" in line for line in lines)
    assert any(line.startswith(damaged[:8]) and "damaged" in line and problem in line for line in lines)
    as_json = json.loads(project.piflow("runs", "--all", "--json").stdout)
    by_id = {entry["runId"]: entry for entry in as_json}
    assert by_id[healthy]["state"] == "completed"
    assert by_id[damaged]["state"] == "damaged" and problem in by_id[damaged]["damage"]
    shown = project.piflow("show", damaged[:8])
    assert shown.returncode == 1
    assert "Traceback" not in shown.stderr and problem in shown.stderr
    assert "Other runs are not affected" in shown.stderr
    assert project.piflow("show", healthy[:8]).returncode == 0
    again = project.piflow("run", "quick.workflow.js")  # the store still takes new runs
    assert again.returncode == 0, again.stderr
