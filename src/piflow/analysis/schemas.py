"""The JSON-Schema subset a workflow accepts for `outputSchema` and extra schemas (spec B.4)."""

from __future__ import annotations

from typing import Any, Final

from piflow.errors import WorkflowError
from piflow.jsvalues import is_plain_json

_SHAPE_KEYS: Final = ("$ref", "anyOf", "oneOf", "allOf", "const", "enum")


def schema_problem(value: Any, at: str) -> str | None:
    """The reference's message for the first problem of `value` as a schema at `at`, or None."""
    if not isinstance(value, dict) or not is_plain_json(value):
        return f"{at} must be a plain JSON-compatible Schema object"
    schema_type = value.get("type")
    if not isinstance(schema_type, (str, list)) and not any(key in value for key in _SHAPE_KEYS):
        return f"{at} has no JSON Schema shape"
    if "required" in value and not (
        isinstance(value["required"], list) and all(isinstance(item, str) for item in value["required"])
    ):
        return f"{at}.required must be an array of strings"
    if "properties" in value and not isinstance(value["properties"], dict):
        return f"{at}.properties must be an object"
    return None


def validate_schema(value: Any, at: str = "schema") -> dict[str, Any]:
    """`validateSchema(s, at)`: raise `INVALID_SCHEMA` or return the schema."""
    problem = schema_problem(value, at)
    if problem is not None:
        raise WorkflowError("INVALID_SCHEMA", problem)
    schema: dict[str, Any] = value
    return schema
