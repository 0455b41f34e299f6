"""Workflow metadata `{name, description?}` (spec B.1 step 1)."""

from __future__ import annotations

from typing import Any

from piflow.analysis.jsliterals import js_blank, js_trim
from piflow.errors import WorkflowError
from piflow.jsvalues import UNDEFINED


def metadata_problem(value: Any) -> str | None:
    """The reference's message for invalid metadata, or None."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or js_blank(value["name"]):
        return "Workflow metadata requires a non-empty name"
    description = value.get("description", UNDEFINED)
    if description is not UNDEFINED and (not isinstance(description, str) or js_blank(description)):
        return "Workflow description must be a non-empty string when provided"
    if any(key not in ("name", "description") for key in value):
        return "Unknown workflow metadata"
    return None


def validate_workflow_metadata(value: Any) -> dict[str, str]:
    """Validate and trim metadata; raise `INVALID_METADATA` like the reference."""
    problem = metadata_problem(value)
    if problem is not None:
        raise WorkflowError("INVALID_METADATA", problem)
    result = {"name": js_trim(value["name"])}
    if isinstance(value.get("description"), str):
        result["description"] = js_trim(value["description"])
    return result
