"""Run budgets (spec H): validating limits and patches, merging, and the exhaustion checks.

These are pure functions over JSON-like values so the tool parameters, `/workflow resume`
patches and the engine's resume rule all agree. Key order follows the reference (input
order, or the canonical dimension order for merged budgets) because it shows in messages
and in the recorded budget events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from piflow.errors import WorkflowError
from piflow.jsvalues import UNDEFINED, is_js_integer, is_json_number, js_number_string, js_object_entries

__all__ = [
    "BUDGET_DIMENSIONS",
    "Budget",
    "BudgetPatch",
    "budget_exhausted_dimensions",
    "budget_relaxed",
    "exhausted_message",
    "merge_budget",
    "resume_budget_allowed",
    "validate_budget",
    "validate_budget_patch",
]

BUDGET_DIMENSIONS: Final = ("tokens", "costUsd", "durationMs", "agentLaunches")
LIMIT_KEYS: Final = ("soft", "hard")
Number = int | float


def _fail(message: str) -> WorkflowError:
    return WorkflowError("INVALID_METADATA", message)


class Budget(dict[str, dict[str, Number]]):
    """Validated limits `{dimension: {soft?, hard?}}` in the reference's key order.

    A dict (so it serialises and compares like the reference's frozen object); only
    dimensions with at least one limit are present.
    """

    def limit(self, dimension: str, key: str) -> Number | None:
        """The `soft` or `hard` limit of a dimension, None when unset."""
        limits = self.get(dimension)
        return None if limits is None else limits.get(key)

    def to_json(self) -> dict[str, dict[str, Number]]:
        return {dimension: dict(limits) for dimension, limits in self.items()}


class BudgetPatch(dict[str, dict[str, Number | None] | None]):
    """A validated patch. A dimension mapped to None is removed, a limit mapped to None is
    removed, and an absent limit key keeps the current value.
    """

    def to_json(self) -> dict[str, dict[str, Number | None] | None]:
        return {name: None if limits is None else dict(limits) for name, limits in self.items()}


BudgetLike = Mapping[str, Mapping[str, Number]]
PatchLike = Mapping[str, Mapping[str, Number | None] | None]


def _valid_limit(dimension: str, value: Any) -> bool:
    if dimension == "costUsd":
        return is_json_number(value) and value >= 0
    return is_js_integer(value) and value >= 0


def _check_limit(dimension: str, key: str, value: Any) -> None:
    if value is not UNDEFINED and not _valid_limit(dimension, value):
        kind = "finite number" if dimension == "costUsd" else "integer"
        raise _fail(f"{dimension}.{key} must be a non-negative {kind}")


def _check_order(dimension: str, soft: Any, hard: Any) -> None:
    present = all(limit is not UNDEFINED and limit is not None for limit in (soft, hard))
    if present and soft >= hard:
        raise _fail(f"{dimension}.soft must be less than hard")


def _entries(value: Any, message: str) -> dict[str, Any]:
    entries = js_object_entries(value)
    if entries is None:
        raise _fail(message)
    return entries


def _check_dimension(dimension: str) -> None:
    if dimension not in BUDGET_DIMENSIONS:
        raise _fail(f"Unknown budget dimension: {dimension}")


def validate_budget(value: Any) -> Budget | None:
    """Validate a `budget` parameter; `UNDEFINED` (not given) gives None. INVALID_METADATA on error."""
    if value is UNDEFINED:
        return None
    limits: dict[str, dict[str, Number]] = {}
    for dimension, raw in _entries(value, "budget must be an object").items():
        _check_dimension(dimension)
        entries = _entries(raw, f"{dimension} budget must be an object")
        if any(key not in LIMIT_KEYS for key in entries):
            raise _fail(f"{dimension} budget has an unknown limit")
        soft, hard = entries.get("soft", UNDEFINED), entries.get("hard", UNDEFINED)
        _check_limit(dimension, "soft", soft)
        _check_limit(dimension, "hard", hard)
        _check_order(dimension, soft, hard)
        checked: dict[str, Number] = {}
        if soft is not UNDEFINED:
            checked["soft"] = soft
        if hard is not UNDEFINED:
            checked["hard"] = hard
        if checked:
            limits[dimension] = checked
    return Budget(limits)


def validate_budget_patch(value: Any) -> BudgetPatch:
    """Validate a budget patch (`workflow_resume`): `null` removes a dimension or a limit."""
    patch = BudgetPatch()
    for dimension, raw in _entries(value, "budget patch must be an object").items():
        _check_dimension(dimension)
        if raw is None:
            patch[dimension] = None
            continue
        entries = js_object_entries(raw)
        if entries is None or any(key not in LIMIT_KEYS for key in entries):
            raise _fail(f"{dimension} budget patch must contain only soft and hard")
        limits: dict[str, Number | None] = {}
        for key in LIMIT_KEYS:
            if key not in entries:
                continue
            limit = entries[key]
            if limit is None:
                limits[key] = None
            elif limit is not UNDEFINED:
                _check_limit(dimension, key, limit)
                limits[key] = limit
        _check_order(dimension, limits.get("soft"), limits.get("hard"))
        patch[dimension] = limits
    return patch


def merge_budget(budget: BudgetLike | None, patch: PatchLike) -> Budget:
    """Apply a patch: removals and overrides per limit, emptied dimensions dropped, re-validated."""
    merged = {dimension: dict(limits) for dimension, limits in (budget or {}).items()}
    for dimension in BUDGET_DIMENSIONS:
        if dimension not in patch:
            continue
        change = patch[dimension]
        if change is None:
            merged.pop(dimension, None)
            continue
        limits = dict(merged.get(dimension, {}))
        for key in LIMIT_KEYS:
            if key in change:
                limit = change[key]
                if limit is None:
                    limits.pop(key, None)
                else:
                    limits[key] = limit
        if limits:
            merged[dimension] = limits
        else:
            merged.pop(dimension, None)
    result = validate_budget(merged)
    assert result is not None
    return result


def budget_relaxed(previous: BudgetLike | None, next_budget: BudgetLike | None) -> bool:
    """True when some existing soft or hard limit is removed or raised (needs approval)."""
    for dimension in BUDGET_DIMENSIONS:
        old = (previous or {}).get(dimension)
        new = (next_budget or {}).get(dimension)
        for key in LIMIT_KEYS:
            old_limit = old.get(key) if old else None
            new_limit = new.get(key) if new else None
            if old_limit is not None and (new_limit is None or new_limit > old_limit):
                return True
    return False


def _usage(usage: Mapping[str, Number], dimension: str) -> Number:
    return usage.get(dimension, 0)


def budget_exhausted_dimensions(budget: BudgetLike | None, usage: Mapping[str, Number]) -> list[str]:
    """Dimensions whose usage reached the hard limit (in the budget's key order)."""
    return [
        dimension
        for dimension, limits in (budget or {}).items()
        if limits.get("hard") is not None and _usage(usage, dimension) >= limits["hard"]
    ]


def resume_budget_allowed(budget: BudgetLike | None, usage: Mapping[str, Number]) -> bool:
    """A run may resume when every hard limit is above the usage already retained."""
    return not budget_exhausted_dimensions(budget, usage)


def exhausted_message(
    version: int, budget: BudgetLike, usage: Mapping[str, Number], dimensions: Iterable[str]
) -> str:
    """`Budget version <v> exhausted: <dim> usage=<u> hard=<h>[, …]` (the BUDGET_EXHAUSTED text)."""
    details = []
    for dimension in dimensions:
        hard = budget.get(dimension, {}).get("hard")
        shown_hard = "undefined" if hard is None else js_number_string(hard)
        details.append(f"{dimension} usage={js_number_string(_usage(usage, dimension))} hard={shown_hard}")
    return f"Budget version {version} exhausted: {', '.join(details)}"

