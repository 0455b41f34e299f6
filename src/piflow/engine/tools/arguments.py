"""A tool call's arguments, read with the checks a model's JSON needs (wrong types are tool errors)."""

from __future__ import annotations

import json
from typing import Any

from piflow.engine.tools.confinement import ToolError


class Arguments:
    """The parsed arguments of one call to tool `tool`."""

    def __init__(self, tool: str, values: dict[str, Any]) -> None:
        self.tool = tool
        self.values = values

    @classmethod
    def parse(cls, tool: str, text: str) -> Arguments:
        try:
            values = json.loads(text or "{}")
        except ValueError as error:
            raise ToolError(f"Arguments of {tool} are not valid JSON: {error}") from None
        if not isinstance(values, dict):
            raise ToolError(f"Arguments of {tool} must be a JSON object")
        return cls(tool, values)

    def _wrong(self, name: str, what: str) -> ToolError:
        return ToolError(f"Argument {name} of {self.tool} must be {what}")

    def string(self, name: str) -> str:
        value = self.values.get(name)
        if not isinstance(value, str):
            raise self._wrong(name, "a string")
        return value

    def optional_string(self, name: str) -> str | None:
        return None if self.values.get(name) is None else self.string(name)

    def optional_int(self, name: str, minimum: int = 0) -> int | None:
        value = self.values.get(name)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self._wrong(name, f"an integer of at least {minimum}")
        return value

    def flag(self, name: str) -> bool:
        value = self.values.get(name)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._wrong(name, "true or false")
        return value
