"""Runtime budget accounting: soft/hard events, exhaustion messages, running-time clock (spec H)."""

from __future__ import annotations

import pytest

from piflow.engine.budgets import BudgetTracker, soft_instruction
from piflow.errors import WorkflowError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_soft_then_overrun_events_once_per_version() -> None:
    tracker = BudgetTracker({"tokens": {"soft": 100, "hard": 200}})
    tracker.add_usage(150, 0.0)
    tracker.add_usage(10, 0.0)
    assert [e["type"] for e in tracker.events] == ["soft_crossed"]
    tracker.add_usage(100, 0.0)
    assert [e["type"] for e in tracker.events] == ["soft_crossed", "hard_overrun"]
    assert tracker.events[1]["dimensions"] == ["tokens"]


def test_turn_check_exhausts_with_the_reference_message() -> None:
    tracker = BudgetTracker({"tokens": {"hard": 100}, "costUsd": {"hard": 1}})
    tracker.add_usage(100, 1.5)
    with pytest.raises(WorkflowError) as err:
        tracker.check_turn()
    assert err.value.code == "BUDGET_EXHAUSTED"
    assert err.value.message == "Budget version 1 exhausted: tokens usage=100 hard=100, costUsd usage=1.5 hard=1"
    assert tracker.hard_exhausted_now


def test_launch_limit_counts_every_attempt() -> None:
    tracker = BudgetTracker({"agentLaunches": {"hard": 2}})
    tracker.start_attempt()
    tracker.start_attempt()
    with pytest.raises(WorkflowError, match="agentLaunches usage=2 hard=2"):
        tracker.start_attempt()


def test_duration_counts_running_time_only() -> None:
    clock = Clock()
    tracker = BudgetTracker(None, now=clock)
    tracker.clock(True)
    clock.now = 1.5
    tracker.clock(False)  # paused
    clock.now = 10.0
    tracker.clock(True)
    clock.now = 10.25
    assert tracker.snapshot_usage()["durationMs"] == 1750


def test_new_version_can_emit_again_and_resume_rule() -> None:
    tracker = BudgetTracker({"tokens": {"soft": 1}})
    tracker.add_usage(5, 0)
    tracker.set_limits({"tokens": {"soft": 2, "hard": 10}}, 2)
    tracker.evaluate()
    assert [(e["type"], e["budgetVersion"]) for e in tracker.events] == [("soft_crossed", 1), ("soft_crossed", 2)]
    assert tracker.can_resume()


def test_soft_instruction_text() -> None:
    text = soft_instruction({"tokens": 5, "costUsd": 0.5, "durationMs": 10, "agentLaunches": 1})
    assert text == (
        "The workflow budget soft limit has been reached. Finish the requested output now, preserving any "
        'required output schema. Current usage: {"tokens":5,"costUsd":0.5,"durationMs":10,"agentLaunches":1}. '
        "Do not start additional model work unless it is required to produce the final requested result."
    )
