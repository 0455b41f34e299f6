"""The commands that read or control runs without owning one: runs, show, pause, stop, approve and
reject, and the helpers every run command shares (the store's lookup and failures, a run's state in
words, `piflow show`'s text).

They read the store, build views and write control requests: nothing here imports anyio, the
engine that executes runs (`engine.engine`, `engine.runs`) or the analysis, which cost these
commands ~50 ms of their start. Following a run (`show --follow`, a run's owner) is `cli_follow`;
what `run`, `resume` and `budget` do in their run's owner is `cli_owning`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from piflow.cli_errors import UsageError
from piflow.engine import control
from piflow.engine.environment import project_root, store_path
from piflow.engine.lifecycle import DecisionState, RunState
from piflow.engine.store import AttemptSetup, DamagedRecord, RunStore, StoreError, known_store_paths
from piflow.engine.store.store import MIN_RUN_PREFIX
from piflow.engine.subagents.progress import host_words, stage_words
from piflow.engine.views import (
    AgentView,
    RunView,
    attention_key,
    observed_run,
    run_summary,
    run_view,
)
from piflow.errors import WorkflowError
from piflow.executors import add_executor_option, executor_for
from piflow.view_wire import outcome_json, run_json, summary_json

if TYPE_CHECKING:
    from piflow.engine.agent_details import AgentDetailView
    from piflow.engine.subagents.views import SubagentsView

_FINISHED_STATES = frozenset({RunState.COMPLETED, RunState.STOPPED, RunState.FAILED})
_RECENT_FINISHED: Final = 10
_STATE_WORDS: Final = {
    RunState.QUEUED: "queued, about to start",
    RunState.RUNNING: "running",
    RunState.PAUSING: "pausing: running agents finish first",
    RunState.PAUSED: "paused: continue with `piflow resume {id}`",
    RunState.AWAITING_INPUT: "waiting for a checkpoint answer: `piflow approve|reject {id} NAME`",
    RunState.COMPLETED: "completed",
    RunState.FAILED: "failed",
    RunState.STOPPED: "stopped (final: a stopped run cannot be resumed; start it again with `piflow run`)",
    RunState.INTERRUPTED: "interrupted (its process ended): continue with `piflow resume {id}`",
    RunState.BUDGET_EXHAUSTED: "stopped at its budget: raise it with `piflow resume {id} --budget PATCH`",
}


def store_failure_text(error: StoreError, run_id: str | None = None) -> str:
    """What a failed run store means for the user, and what to do next."""
    if isinstance(error, DamagedRecord):
        return f"piflow: {error.message}\nOther runs are not affected: `piflow runs` lists them."
    then = f"continue the run with `piflow resume {run_id[:8]}`" if run_id else "try again"
    return (f"piflow: {error.message}\nEverything committed before the failure is saved. "
            f"Free some disk space (or fix what the message names), then {then}.")


def silence_stdout() -> None:
    """Send the rest of our output to /dev/null once its reader has gone (`piflow runs | head`),
    so neither later writes nor the interpreter's final flush raise `BrokenPipeError` again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def write_on(out: TextIO, text: str) -> None:
    """Write while a run goes on: when the reader has gone (`| head`), the run goes on without one."""
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        silence_stdout()


def state_in_words(state: RunState, run_id: str) -> str:
    """A run state as a sentence, with the command that moves it on where there is one."""
    return _STATE_WORDS[state].format(id=run_id[:8])


def existing_store(cwd: str) -> RunStore:
    """The project's run store for commands that read or control runs (they never create one)."""
    path = store_path(cwd)
    if not path.exists():
        raise UsageError(f"no workflow runs in the project {cwd} yet (no run store at {path})")
    return RunStore.open(path)


def resolve_run(store: RunStore, text: str, cwd: str) -> str:
    """The id of the run `text` names (a full id or a prefix of 8+ characters), or a usage error
    that says where piflow looked and how to list the runs that exist."""
    matches = store.match_run_ids(text)
    if matches and (len(text) >= MIN_RUN_PREFIX or matches == [text]):
        if len(matches) == 1:
            return matches[0]
        raise UsageError(f"the run id prefix {text} matches several runs ({', '.join(m[:13] for m in matches)}…): "
                         "give more characters")
    short = f" (a run id prefix needs at least {MIN_RUN_PREFIX} characters)" if len(text) < MIN_RUN_PREFIX else ""
    raise UsageError(f"no run {text} in the project {cwd}{short}; `piflow runs --all` lists its runs")


def _control(args: argparse.Namespace, action: str) -> int:
    """pause, stop, approve, reject: requests on the store, which the run's owner carries out."""
    cwd = project_root(os.getcwd())
    if (executor := executor_for(cwd, args)) is not None:
        return executor.control(args, action)
    with existing_store(cwd) as store:
        record = control.find(store, resolve_run(store, args.run, cwd))
        if action == "pause":
            print(f"{control.pause(store, record)}")
        elif action == "stop":
            print(json.dumps(outcome_json(control.stop(store, record))))
        elif action in ("approve", "reject"):
            reply, _ = control.answer_checkpoint(store, record, args.name, action == "approve")
            print("Checkpoint response accepted." if reply.accepted else "Checkpoint is not awaiting a response.")
            return 0 if reply.accepted else 1
    return 0


def _runs(args: argparse.Namespace) -> int:
    cwd = project_root(os.getcwd())
    if (executor := executor_for(cwd, args)) is not None:
        return executor.runs(args)
    path = store_path(cwd)
    summaries: list[dict[str, Any]] = []
    damaged: list[DamagedRecord] = []
    damaged_runs: dict[str, str] = {}
    if path.exists():
        with RunStore.open(path) as store, store.consistent_read():
            for record in store.list_runs(damaged=damaged):
                try:
                    summaries.append(summary_json(run_summary(observed_run(store, record), store.agents(record.id))))
                except DamagedRecord as exc:  # one of its agents
                    damaged_runs[record.id] = exc.message
    damaged_runs.update((d.key, d.message) for d in damaged)
    summaries += [{"runId": run_id, "state": "damaged", "damage": message, "updatedAt": 0.0}
                  for run_id, message in damaged_runs.items()]
    hidden = 0
    if not args.all:
        finished = [s for s in summaries if s["state"] in _FINISHED_STATES]
        hidden = max(0, len(finished) - _RECENT_FINISHED)
        summaries = [s for s in summaries if s["state"] not in _FINISHED_STATES] + finished[:_RECENT_FINISHED]
    summaries.sort(key=lambda s: attention_key(s["state"], s["updatedAt"]))
    if args.json:
        print(json.dumps(summaries, indent=2))
        return 0
    if not summaries:
        print(f"No workflow runs in the project {cwd} (run store {path}).")
        _print_other_projects(path)
    for s in summaries:
        if s["state"] == "damaged":
            print(f"{s['runId'][:8]}  damaged: {s['damage']}")
            continue
        agents = f"{s['agents']['settled']}/{s['agents']['total']} agents"
        cost = f"  ${s['costUsd']:.4f}" if s["costUsd"] else ""
        print(f"{s['runId'][:8]}  {s['workflowName']:<20} {s['state']:<16} {s['phase'] or '-':<12} {agents}{cost}")
    if hidden:
        print(f"({hidden} older finished runs not shown: `piflow runs --all` lists every run)")
    return 0


def _print_other_projects(current: Path) -> None:
    """Where runs are, when none are here: each project with runs in the other known stores."""
    projects: Counter[str] = Counter()
    for path in known_store_paths():
        if path == current:
            continue
        try:
            with RunStore.open(path) as store:
                projects.update(run.cwd for run in store.list_runs())
        except WorkflowError:
            continue  # a damaged or newer store is not this command's business
    if projects:
        print("Runs of other projects (each project has its own runs; run `piflow runs` in it):")
    for project, count in projects.most_common(5):
        print(f"  {project}  {count} run{'s' if count > 1 else ''}   cd {project} && piflow runs")


def _show(args: argparse.Namespace) -> int:
    cwd = project_root(os.getcwd())
    if (executor := executor_for(cwd, args)) is not None:
        return executor.show(args)
    with existing_store(cwd) as store:
        run_id = resolve_run(store, args.run, cwd)
        if args.follow:
            from piflow.cli_follow import follow_events  # anyio and the change feed: only --follow runs them

            return follow_events(store.location, run_id)
        try:
            view = run_view(store, run_id, details=True)
        except DamagedRecord as exc:
            print(f"piflow show: run {run_id} cannot be shown.\n{store_failure_text(exc)}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(run_json(view), indent=2, ensure_ascii=False))
        return 0
    print(format_run(view))
    return 0


def format_run(view: RunView) -> str:
    """`piflow show`: the run's state in words, each agent's outcome, then the result or error."""
    summary = view.summary
    lines = [
        f"Run {summary.run_id}: {summary.workflow_name}",
        f"Script: {summary.script_path or '(inline)'}",
        f"State: {state_in_words(summary.state, summary.run_id)}",
    ]
    if summary.phase:
        lines.append(f"Phase: {summary.phase}")
    usage = view.budget.usage
    lines.append(f"Usage: {usage.get('tokens', 0)} tokens, ${usage.get('costUsd', 0):.4f}, "
                 f"{usage.get('agentLaunches', 0)} agent launches")
    if view.budget.limits:
        lines.append(f"Budget: {json.dumps(view.budget.limits)}")
    if view.agent_list:
        lines.append("Agents:")
    for number, depth, detail in _ownership_order(view.agent_list):
        agent = detail if isinstance(detail, AgentView) else detail.agent
        attempts = agent.attempts
        pad = "  " * depth
        lines.append(
            f"  {pad}#{number} {agent.label}: {agent.state}, {attempts} attempt{'s' if attempts != 1 else ''}, "
            f"{agent.tokens} tokens, ${agent.cost_usd:.4f}, model {agent.model}"
        )
        if agent.error:
            lines.append(f"     {pad}error: {agent.error['code']}: {agent.error['message']}")
        elif not isinstance(detail, AgentView) and detail.output.preview is not None:
            lines.append(f"     {pad}output: {detail.output.preview}")
        if isinstance(detail, AgentView):
            continue
        for attempt in detail.attempt_list[:-1]:  # earlier attempts only say why they were retried
            if attempt.error is not None:
                lines.append(f"     {pad}attempt {attempt.number}: {attempt.error.code}: {attempt.error.message}")
        if detail.transcript_path:
            lines.append(f"     {pad}transcript: {detail.transcript_path}")
        if detail.attempt_list and (setup := detail.attempt_list[-1].setup) is not None:
            lines.append(f"     {pad}ran with: {setup_in_words(setup)}")
    for checkpoint in view.checkpoints:
        lines.append(f"Checkpoint {checkpoint.name}: {checkpoint.state} ({checkpoint.prompt})")
    for worktree in view.worktrees:
        lines.append(f"Worktree {worktree.owner}: branch {worktree.branch} at {worktree.path}")
    if view.subagents is not None:
        lines.extend(format_subagents(view.subagents))
    for proposal in view.proposals:
        if proposal.state == DecisionState.PENDING:
            lines.append(f"Budget proposal {proposal.proposal_id}: {json.dumps(proposal.payload['proposed'])}: "
                         f"`piflow budget approve|reject {summary.run_id[:8]} {proposal.proposal_id}`")
    if view.error:
        lines.append(f"Error: {WorkflowError.from_json(view.error).headline()}")
    if view.has_result:
        lines.append(f"Result: {json.dumps(view.result, ensure_ascii=False)}")
    return "\n".join(lines)


def setup_in_words(setup: AttemptSetup) -> str:
    """One line of an attempt's set-up: model, thinking, tools, prompt fingerprint, policy."""
    words = [f"model {setup.model}", f"thinking {setup.thinking or 'default'}",
             f"tools {', '.join(setup.tools) or '(none)'}"]
    if setup.system_prompt_sha256 is not None and setup.system_prompt is not None:
        words.append(f"system prompt {setup.system_prompt_sha256[:12]} ({len(setup.system_prompt)} chars)")
    if setup.disabled_resources:
        disabled = [*setup.disabled_resources.skills, *setup.disabled_resources.extensions]
        words.append(f"disabled resources {', '.join(disabled)}")
    return "; ".join(words)


def _ownership_order(
    agent_list: Sequence[AgentDetailView | AgentView],
) -> list[tuple[int, int, AgentDetailView | AgentView]]:
    """The agents as an ownership tree (spec J.5): each child right under its parent, one level
    deeper; `(number in launch order, depth, agent)`."""
    numbered = list(enumerate(agent_list, start=1))
    ids = {(d if isinstance(d, AgentView) else d.agent).id for d in agent_list}
    children: dict[str | None, list[tuple[int, AgentDetailView | AgentView]]] = {}
    for number, detail in numbered:
        parent = (detail if isinstance(detail, AgentView) else detail.agent).parent_id
        children.setdefault(parent if parent in ids else None, []).append((number, detail))
    ordered: list[tuple[int, int, AgentDetailView | AgentView]] = []

    def visit(parent: str | None, depth: int) -> None:
        for number, detail in children.get(parent, []):
            ordered.append((number, depth, detail))
            visit((detail if isinstance(detail, AgentView) else detail.agent).id, depth + 1)

    visit(None, 0)
    return ordered


def format_subagents(view: SubagentsView) -> list[str]:
    """`piflow show` of a pi-subagents run: children, host steps, lane boards, emits, console lines."""
    lines: list[str] = []
    if view.children:
        lines.append("Children:")
    for child in view.children:
        line = f"  {child.key} ({child.agent}): {child.state}, {child.tokens} tokens, ${child.cost_usd:.4f}"
        if child.output_reference:
            line += f", output {child.output_reference}"
        lines.append(line)
        if child.error:
            lines.append(f"     error: {child.error}")
    if view.host_steps:
        lines.append("Host steps:")
    lines.extend(f"  {host_words(h.key, h.state, h.command, h.exit_code, h.duration_ms, h.output_path)}"
                 for h in view.host_steps)
    for board in view.boards:
        lines.append(f"Lanes (runs.lanes #{board.call}):")
        for lane in board.lanes:
            stages = ", ".join(stage_words(s.key, s.state, s.verdict, s.error) for s in lane.stages)
            lines.append(f"  {lane.key} {lane.state}: {stages}")
    if view.emits:
        lines.append("Emits:")
    lines.extend(f"  {json.dumps(value, ensure_ascii=False)}" for value in view.emits)
    if view.console:
        lines.append("Console:")
    lines.extend(f"  [{line.level}] {line.message}" for line in view.console)
    return lines


def register(commands: Any) -> None:
    """Add runs, show, pause, stop, approve and reject to the `piflow` argument parser's subcommands."""
    runs = commands.add_parser("runs", help="list this project's runs")
    runs.add_argument("--all", action="store_true")
    runs.add_argument("--json", action="store_true")
    add_executor_option(runs)
    runs.set_defaults(handler=_runs)

    show = commands.add_parser("show", help="show a run")
    show.add_argument("run")
    show.add_argument("--json", action="store_true")
    show.add_argument("--follow", action="store_true", help="print the run's events as they happen until it ends")
    add_executor_option(show)
    show.set_defaults(handler=_show)

    for action in ("pause", "stop"):
        sub = commands.add_parser(action, help=f"{action} a run")
        sub.add_argument("run")
        add_executor_option(sub)
        sub.set_defaults(handler=lambda a, action=action: _control(a, action))
    for action in ("approve", "reject"):
        sub = commands.add_parser(action, help=f"{action} a checkpoint")
        sub.add_argument("run")
        sub.add_argument("name", help="checkpoint label (ship, ship#2, ...)")
        add_executor_option(sub)
        sub.set_defaults(handler=lambda a, action=action: _control(a, action))
