"""Process-level latency of the commands a user waits for, as the user runs them (a fresh `piflow` each time).

Prints the median wall time (and CPU time) of: `piflow --version` (start-up alone), `piflow check` of a
one-agent script, `piflow run` of that script to completion (scripted backend), `piflow runs` (the
project's finished one-agent runs) and `piflow show` of one of them, and `piflow resume` of an
interrupted run of an N-agent fan-out (its owner killed with SIGKILL at a checkpoint) until the run
has completed again — every journaled agent replayed, none re-run. Then the floor under `run` and
`resume`: how long a worker takes from its spawn to a trivial script's result (its interpreter,
imports and QuickJS start-up), which they overlap with their own start-up but wait for when it is
longer.

Each command starts a new Python process, so import time counts, as it
does for a user. Targets (issue: speed): check <= 0.25 s, run <= 0.35 s, resume of 100 agents <=
0.18 s and of 10,000 agents <= 2 s; and for the commands that only read the store or answer at once
(import only what they run): --version <= 0.05 s, runs and show <= 0.10 s.

On a loaded machine compare two trees in one run: `--against DIR` (a copy of an older `src/`)
alternates every sample between that tree and this one, so both see the same load; each line
then gives the median and the minimum of both. `--instructions` counts what the command's own
process executes instead (valgrind's callgrind, millions of instructions; its worker not
included): a load the machine is under does not change it, so a change of a few milliseconds shows.

Run: `.venv/bin/python bench/cli.py [--runs N] [--agents 100 10000] [--against DIR] [--instructions]`.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine import fan_out_script  # bench/engine.py: the same N-agent fan-out with a final checkpoint

PIFLOW = [sys.executable, "-m", "piflow"]
ONE_AGENT = 'const answer = await agent("Say hello", { label: "hello" });\nreturn answer;\n'


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (the command's process and the workers it waited for) of one command."""
    began = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([*PIFLOW, *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"piflow {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def counted(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """`--instructions`: millions of instructions the command's process ran (callgrind; the worker it
    starts is not followed), as a (count, count) sample."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    command = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *PIFLOW, *argv]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode not in (0, 1) or found is None:
        raise SystemExit(f"piflow {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    millions = int(found.group(1)) / 1e6
    return millions, millions


WORKER_READY = """
import resource, time, anyio
from piflow.engine.worker.client import WorkerProcess
async def ready() -> float:
    began = time.perf_counter()
    worker = WorkerProcess()
    await worker.spawn()
    await worker.start(body="return 1;")
    async for _ in worker.calls():
        pass
    assert await worker.wait_done() == 1
    return time.perf_counter() - began
wall = anyio.run(ready)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, used.ru_utime + used.ru_stime)
"""


def worker_ready(env: dict[str, str]) -> tuple[float, float]:
    """A worker's spawn -> a trivial script's result (wall, timed by the process that spawned it)
    and the worker's CPU time."""
    done = subprocess.run([sys.executable, "-c", WORKER_READY], env=env, capture_output=True, text=True, check=True)
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def finished_run(project: Path, env: dict[str, str]) -> str:
    """The id of a one-agent run started and finished for the purpose (`piflow show` shows it)."""
    done = subprocess.run([*PIFLOW, "run", "one.workflow.js", "--json"], cwd=project, env=env, capture_output=True,
                          text=True, check=True)
    run_id: str = json.loads(done.stdout.splitlines()[-1])["runId"]
    return run_id


def interrupted_run(project: Path, script: str, env: dict[str, str]) -> str:
    """Start `script`, wait until it awaits its checkpoint, SIGKILL its owner: an interrupted run's id.

    `--json`: the owner prints its run id and then nothing until the end. Its progress lines, unread,
    would fill the pipe and block a big run's owner mid-fan-out (at ~2,600 of 10,000 agents), and
    the "resume" timed would then run the rest instead of replaying them.
    """
    owner = subprocess.Popen(
        [*PIFLOW, "run", script, "--json"], cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True,
    )
    assert owner.stdout is not None
    run_id = ""
    while not run_id:
        line = owner.stdout.readline()
        if not line:
            raise SystemExit("piflow run ended before printing its run id")
        run_id = line.strip() if len(line.strip()) == 36 else ""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        shown = subprocess.run(
            [*PIFLOW, "show", run_id, "--json"], cwd=project, env=env, capture_output=True, text=True, check=False
        )
        view = json.loads(shown.stdout or "{}")
        if any(c.get("state") == "awaiting" for c in view.get("checkpoints", [])):
            break
        time.sleep(0.2)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    return run_id


def report(what: str, target: str, samples: dict[str, list[tuple[float, float]]], instructions: bool = False) -> None:
    """One line: the median wall time (and, when comparing trees, the minimum) of each tree's samples,
    and the median CPU time, which a loaded machine inflates far less than the wall time; with
    `instructions`, the median (and minimum) millions of instructions."""

    def figures(values: list[tuple[float, float]], least: bool) -> str:
        walls = [wall for wall, _ in values]
        if instructions:
            return f"{statistics.median(walls):7.1f} M instructions (min {min(walls):.1f})"
        cpu = statistics.median(cpu for _, cpu in values)
        low = f" (min {min(walls):.3f})" if least else ""
        return f"{statistics.median(walls):6.3f}{low} s, cpu {cpu:.3f} s"

    if len(samples) == 1:
        (values,) = samples.values()
        print(f"{what:<38} {figures(values, False)} (target {target})")
        return
    shown = "  ".join(f"{tree} {figures(values, True)}" for tree, values in samples.items())
    print(f"{what:<38} {shown} (target {target})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--agents", type=int, nargs="*", default=[100, 10_000])
    parser.add_argument("--against", type=Path, metavar="DIR", help="a baseline tree to alternate with (its src/)")
    parser.add_argument("--instructions", action="store_true",
                        help="count the command's instructions with callgrind instead of timing it")
    args = parser.parse_args()
    measure = counted if args.instructions else timed
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = dict(os.environ)
        env.update(HOME=str(root / "home"), XDG_STATE_HOME=str(root / "state"), XDG_CONFIG_HOME=str(root / "config"))
        env.pop("PI_CODING_AGENT_DIR", None)
        trees = {"now": env}
        # A tree's bytecode may be stale (edited since, or a copy), and with PYTHONDONTWRITEBYTECODE
        # each changed module would be recompiled at every start: compile it once, as an installed
        # tree is.
        compileall.compile_dir(Path(__file__).resolve().parents[1] / "src", quiet=1)
        if args.against is not None:
            compileall.compile_dir(args.against, quiet=1)
            # Each tree its own run store: the trees' store schemas may differ.
            baseline = {"PYTHONPATH": str(args.against.resolve()), "XDG_STATE_HOME": str(root / "state-baseline")}
            trees = {"baseline": {**env, **baseline}, "now": env}
        project = root / "project"
        project.mkdir()
        (project / "one.workflow.js").write_text(ONE_AGENT)
        commands = {
            "piflow --version:": (["--version"], "0.05 s"),
            "piflow check, one agent:": (["check", "one.workflow.js"], "0.25 s"),
            "piflow run, one agent, to completion:": (["run", "one.workflow.js", "--json"], "0.35 s"),
            "piflow runs, finished one-agent runs:": (["runs"], "0.10 s"),
            "piflow show, a finished one-agent run:": (["show", "{run}"], "0.10 s"),
        }
        shown: dict[str, str] = {}  # each tree's run to show (each tree has its own store)
        for what, (argv, target) in commands.items():
            if "{run}" in argv and not shown:
                shown = {tree: finished_run(project, tree_env) for tree, tree_env in trees.items()}
            samples: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
            for _ in range(args.runs):
                for tree, tree_env in trees.items():
                    command = [arg.replace("{run}", shown.get(tree, "")) for arg in argv]
                    samples[tree].append(measure(command, project, tree_env))
            report(what, target, samples, args.instructions)
        for n in args.agents:
            script = f"fan-{n}.workflow.js"
            (project / script).write_text(fan_out_script(n))
            samples = {tree: [] for tree in trees}
            for _ in range(max(1, args.runs // 3) if n > 1000 else args.runs):
                for tree, tree_env in trees.items():
                    run_id = interrupted_run(project, script, tree_env)
                    resume = ["resume", run_id, "--answer", "done=approve", "--json"]
                    samples[tree].append(measure(resume, project, tree_env))
            report(f"piflow resume, {n:>6} agents:", "0.18 s" if n <= 100 else "2 s", samples, args.instructions)
        if args.instructions:
            return 0
        samples = {tree: [worker_ready(tree_env) for _ in range(args.runs)] for tree in trees}
        report("worker spawn -> first result:", "the floor", samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
