"""What a pi-subagents run tells its followers: its events, and the one line each reads as.

Children are agents (their state events are the first dialect's); these events add what agent
events do not carry: where a child's output goes, host steps starting and ending, the lane board
as it changes, and the script's `emit` values. Console lines are `piflow:log` events with a
`console` level. `piflow show --follow` and the editor print `event_line` for each; `piflow show`
and `piflow.showRun` fold them into the run view (`engine/views.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from piflow.engine.events import RUN_LOG

SUBAGENT_EMIT: Final = "piflow:subagents-emit"
"""An `emit(value)`: `{value}`."""
SUBAGENT_CHILD: Final = "piflow:subagents-child"
"""A child admitted and starting: `{key, agent, childRunId, outputReference}` (its state is its agent's)."""
SUBAGENT_HOST: Final = "piflow:subagents-host"
"""A host step started (`state: "running"`, `command`) or ended (its `runs.host` result, with `command`)."""
SUBAGENT_LANES: Final = "piflow:subagents-lanes"
"""The board of the `call`-th `runs.lanes` of the script, whole (`lanes`), each time a stage starts or
ends: `lane` and `stage` say which (the stage's board entry)."""
SUBAGENT_PROGRESS: Final = frozenset({SUBAGENT_EMIT, SUBAGENT_HOST, SUBAGENT_LANES})
"""The events a follower prints a line for (console lines are `piflow:log` events)."""

_PREVIEW: Final = 200


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def host_words(key: Any, state: Any, command: Any, exit_code: Any, duration_ms: Any, output_path: Any) -> str:
    """`host ci: passed (exit 0, 1.2 s), log …` — or `host ci: running: npm test`."""
    if state == "running":
        return f"host {key}: running: {command}"
    if state in ("stopped", "interrupted"):
        return f"host {key}: {state}: {command}"
    code = f"exit {exit_code}" if exit_code is not None else "no exit code"
    return f"host {key}: {state} ({code}, {(duration_ms or 0) / 1000:.1f} s), log {output_path}"


def stage_words(key: Any, state: Any, verdict: Any, error: Any) -> str:
    """A board stage in words: `review blocked (verdict blocked)`, `fix failed (<error>)`."""
    text = f"{key} {state}"
    if verdict:
        text += f" (verdict {verdict})"
    elif error and state not in ("completed", "blocked"):
        text += f" ({error})"
    return text


def event_line(kind: str, payload: Mapping[str, Any]) -> str | None:
    """The line a follower prints for a pi-subagents event, or None for other events."""
    if kind == SUBAGENT_EMIT:
        return f"emit: {_short(payload.get('value'))}"
    if kind == SUBAGENT_HOST:
        p = payload
        return host_words(p.get("key"), p.get("state"), p.get("command"), p.get("exitCode"), p.get("durationMs"),
                          p.get("outputPath"))
    if kind == SUBAGENT_LANES:
        stage = payload.get("stage") or {}
        words = stage_words(stage.get("key"), stage.get("state"), stage.get("verdict"), stage.get("error"))
        return f"lane {payload.get('lane')}: {words}"
    if kind == RUN_LOG and payload.get("console"):
        return f"console.{payload['console']}: {payload.get('message')}"
    return None
