"""The core `agent()` option checks (spec A.4), shared by the static rules and the engine's host checks."""

from __future__ import annotations

from typing import Any, Final

from piflow.analysis.jsliterals import js_blank
from piflow.analysis.schemas import schema_problem
from piflow.config.model_refs import THINKING_LEVELS
from piflow.jsvalues import is_js_integer

CORE_OPTION_KEYS: Final = ("label", "model", "thinking", "tools", "role", "outputSchema", "retries", "timeoutMs")
ROLE_CONFLICT: Final = "Role agents must not specify model, thinking, or tools"


def option_problem(key: str, value: Any) -> tuple[str, str] | None:
    """`(code, message)` when `value` is not acceptable for core option `key`, else None."""
    if key in ("label", "model", "role"):
        if not isinstance(value, str) or js_blank(value):
            return "INVALID_METADATA", f"agent {key} must be a non-empty string"
    elif key == "thinking":
        if not isinstance(value, str) or value not in THINKING_LEVELS:
            return "INVALID_METADATA", "agent thinking must be off, minimal, low, medium, high, xhigh, or max"
    elif key == "tools":
        if not isinstance(value, list) or not all(isinstance(tool, str) for tool in value):
            return "INVALID_METADATA", "agent tools must be an array of strings"
    elif key == "outputSchema":
        problem = schema_problem(value, "agent outputSchema")
        if problem is not None:
            return "INVALID_SCHEMA", problem
    elif key == "retries":
        if not (is_js_integer(value) and value >= 0):
            return "INVALID_METADATA", "agent retries must be a non-negative integer"
    elif key == "timeoutMs" and not (value is None or (is_js_integer(value) and value >= 1)):
        return "INVALID_METADATA", "agent timeoutMs must be null or a positive integer"
    return None
