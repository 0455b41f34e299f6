"""Budget merging, relaxation and exhaustion (spec H) beyond the recorded validator cases."""

from __future__ import annotations

import json

import pytest

from piflow.analysis.budget import (
    Budget,
    budget_exhausted_dimensions,
    budget_relaxed,
    exhausted_message,
    merge_budget,
    resume_budget_allowed,
    validate_budget,
    validate_budget_patch,
)
from piflow.errors import WorkflowError


def budget(value: object) -> Budget:
    checked = validate_budget(value)
    assert checked is not None
    return checked


def test_budget_is_plain_json_data() -> None:
    checked = budget({"costUsd": {"hard": 2.5}, "tokens": {"soft": 10}})
    assert json.loads(json.dumps(checked)) == {"costUsd": {"hard": 2.5}, "tokens": {"soft": 10}}
    assert list(checked) == ["costUsd", "tokens"]
    assert checked.limit("costUsd", "hard") == 2.5 and checked.limit("tokens", "hard") is None


def test_unknown_limit_key_is_rejected() -> None:
    with pytest.raises(WorkflowError, match=r"^tokens budget has an unknown limit$"):
        validate_budget({"tokens": {"max": 1}})


def test_merge_overrides_removes_and_adds_in_dimension_order() -> None:
    current = budget({"agentLaunches": {"hard": 3}, "tokens": {"soft": 10, "hard": 100}})
    patch = validate_budget_patch(
        {"tokens": {"soft": None, "hard": 200}, "costUsd": {"hard": 1}, "agentLaunches": None}
    )
    assert merge_budget(current, patch).to_json() == {"tokens": {"hard": 200}, "costUsd": {"hard": 1}}


def test_merge_drops_dimensions_left_without_limits() -> None:
    merged = merge_budget(budget({"tokens": {"hard": 5}}), validate_budget_patch({"tokens": {"hard": None}}))
    assert merged == {}


def test_merge_revalidates_soft_below_hard() -> None:
    with pytest.raises(WorkflowError, match=r"^tokens.soft must be less than hard$"):
        merge_budget(budget({"tokens": {"soft": 50}}), validate_budget_patch({"tokens": {"hard": 10}}))


def test_merge_accepts_plain_dicts_and_no_budget() -> None:
    assert merge_budget(None, validate_budget_patch({"durationMs": {"hard": 60_000}})) == {
        "durationMs": {"hard": 60_000}
    }
    assert merge_budget({"tokens": {"hard": 1}}, {}) == {"tokens": {"hard": 1}}


@pytest.mark.parametrize(
    ("old", "new", "relaxed"),
    [
        ({"tokens": {"hard": 10}}, {"tokens": {"hard": 20}}, True),
        ({"tokens": {"hard": 10}}, {}, True),
        ({"tokens": {"soft": 5, "hard": 10}}, {"tokens": {"hard": 10}}, True),
        ({"tokens": {"hard": 10}}, {"tokens": {"hard": 5}}, False),
        ({}, {"tokens": {"hard": 5}}, False),
        ({"tokens": {"hard": 10}}, {"tokens": {"hard": 10}, "costUsd": {"hard": 1}}, False),
    ],
)
def test_relaxed_means_a_limit_removed_or_raised(old: object, new: object, relaxed: bool) -> None:
    assert budget_relaxed(budget(old), budget(new)) is relaxed


def test_no_budget_is_never_relaxed_from() -> None:
    assert not budget_relaxed(None, None)
    assert budget_relaxed(budget({"costUsd": {"soft": 1}}), None)


def test_exhausted_dimensions_are_those_at_or_over_hard() -> None:
    limits = budget({"tokens": {"hard": 100}, "costUsd": {"soft": 1}, "agentLaunches": {"hard": 2}})
    usage = {"tokens": 100, "costUsd": 5.0, "agentLaunches": 1}
    assert budget_exhausted_dimensions(limits, usage) == ["tokens"]
    assert not resume_budget_allowed(limits, usage)
    assert resume_budget_allowed(limits, {"tokens": 99})
    assert budget_exhausted_dimensions(None, usage) == []


def test_exhausted_message_uses_javascript_number_text() -> None:
    limits = budget({"tokens": {"hard": 100}, "costUsd": {"hard": 0.5}})
    message = exhausted_message(2, limits, {"tokens": 150, "costUsd": 0.75}, ["tokens", "costUsd"])
    assert message == "Budget version 2 exhausted: tokens usage=150 hard=100, costUsd usage=0.75 hard=0.5"


def test_patch_keeps_explicit_nulls_and_empty_dimensions() -> None:
    patch = validate_budget_patch({"tokens": {"soft": None}, "costUsd": {}})
    assert patch.to_json() == {"tokens": {"soft": None}, "costUsd": {}}
