"""Run store throughput: simulated agents per second, and the time to load a 10,000-entry journal.

Each simulated agent writes what the engine writes for one agent of a `parallel` fan-out with
the scripted backend: the agent row (queued), the launch (running, attempt 1, run usage), the
attempt row at its start and at its end, the journaled result with the completed agent row and
the run usage, and one `agent-state-changed` event per state change (as `engine/agents.py` does).

Two write patterns are measured:
- `per-agent`: every step is its own transaction (4 commits per agent: the floor when the engine
  groups nothing);
- `batched`:  the steps of `--group` agents share one transaction (`with store.batch():`), as
  when the engine settles many finished calls at once.

Usage: `.venv/bin/python bench/store.py [--sizes 1000,10000,50000] [--group 100]`
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from piflow.engine.store import AgentRecord, AttemptRecord, RunRecord, RunStore

RESULT = {"summary": "The module is consistent; two call sites need a null check. " * 2, "ok": True}


def _new_run(store: RunStore) -> RunRecord:
    run = RunRecord(
        id=str(uuid.uuid4()),
        workflow_name="fanout",
        cwd="/home/user/project",
        state="running",
        concurrency=16,
        backend="scripted",
        script_path="/home/user/project/fanout.workflow.js",
    )
    store.create_run(run, "const r = await parallel('all', tasks); return r;", {"identityVersion": 3})
    return run


def _event(run: RunRecord, agent: AgentRecord, state: str, previous: str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "runId": run.id,
        "workflowName": run.workflow_name,
        "cwd": run.cwd,
        "timestamp": time.time(),
        "agentId": agent.id,
        "displayLabel": agent.label or agent.name,
        "structuralPath": agent.structural_path,
        "state": state,
        "attempt": agent.attempts,
    }
    if previous is not None:
        payload["previousState"] = previous
    return payload


def _agents(store: RunStore, run: RunRecord, count: int, group: int | None) -> Iterator[None]:
    """Write `count` agents; yields after each agent so the caller can time or stop it."""
    usage = {"tokens": 0, "costUsd": 0.0, "durationMs": 0, "agentLaunches": 0}

    def step() -> AbstractContextManager[None]:
        return nullcontext() if group is not None else store.batch()

    for _ in range(count):
        n = store.next_agent_number(run.id)
        agent = AgentRecord(
            id=f"{run.id}:{n}",
            run_id=run.id,
            n=n,
            name=f"task-{n}",
            label=f"task-{n}",
            model="openai/gpt-5:low",
            tools=["read", "grep"],
            state="queued",
            structural_path=["all", f"task-{n}"],
            journal_path=f"agent/all/task-{n}/callsite%3A35%3A46/occurrence%3A1",
        )
        with step():
            store.put_agent(agent)
            store.append_event(run.id, "workflow:agent-state-changed", _event(run, agent, "queued", None))
        usage["agentLaunches"] += 1
        started = time.time()
        with step():
            store.update_agent(agent.id, state="running", attempts=1)
            store.append_event(
                run.id, "workflow:agent-state-changed", _event(run, agent, "running", "queued")
            )
            store.update_run(run.id, usage=usage)
        store.put_attempt(
            AttemptRecord(agent.id, 1, started, time.time(), None, 1200, 340, 0, 0, 0.0042, None, None)
        )
        usage["tokens"] += 1540
        usage["costUsd"] += 0.0042
        with step():
            store.journal_put(run.id, agent.journal_path or "", RESULT)
            store.update_agent(
                agent.id, state="completed", tokens_input=1200, tokens_output=340, cost_usd=0.0042
            )
            store.append_event(
                run.id, "workflow:agent-state-changed", _event(run, agent, "completed", "running")
            )
            store.update_run(run.id, usage=usage)
        yield


def _throughput(path: Path, count: int, group: int | None) -> float:
    with RunStore.open(path) as store:
        run = _new_run(store)
        started = time.perf_counter()
        agents = _agents(store, run, count, group)
        if group is None:
            for _ in agents:
                pass
        else:
            done = 0
            while done < count:
                with store.batch():
                    for _ in range(min(group, count - done)):
                        next(agents)
                        done += 1
        elapsed = time.perf_counter() - started
    return count / elapsed


def _journal_load(path: Path, entries: int) -> tuple[float, float]:
    """(first load, best of 5) in seconds for a journal of `entries` agent results."""
    with RunStore.open(path) as store:
        run = _new_run(store)
        with store.batch():
            for i in range(entries):
                store.journal_put(run.id, f"agent/all/task-{i}/callsite%3A35%3A46/occurrence%3A1", RESULT)
    times: list[float] = []
    for _ in range(5):
        with RunStore.open(path) as store:  # a resuming process opens the store cold
            started = time.perf_counter()
            journal = store.journal(run.id)
            times.append(time.perf_counter() - started)
            assert len(journal) == entries
    return times[0], min(times)


def _in_new_store(run: Callable[[Path], Any]) -> Any:
    with tempfile.TemporaryDirectory() as directory:
        return run(Path(directory) / "runs.db")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--group", type=int, default=100)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"run store benchmark (pid {os.getpid()}); agents/s, higher is better")
    print(f"{'agents':>8} {'per-agent':>12} {f'batched x{args.group}':>14}")
    for size in sizes:
        single = _in_new_store(partial(_throughput, count=size, group=None))
        grouped = _in_new_store(partial(_throughput, count=size, group=args.group))
        print(f"{size:>8} {single:>12,.0f} {grouped:>14,.0f}")
    first, best = _in_new_store(partial(_journal_load, entries=10_000))
    print(f"journal load, 10,000 entries: first {first * 1000:.1f} ms, best {best * 1000:.1f} ms")
    print("targets: engine >= 1,000 agents/s end to end; journal load <= 200 ms")


if __name__ == "__main__":
    main()
