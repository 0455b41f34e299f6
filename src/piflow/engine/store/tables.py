"""How each record maps to its table: column lists, JSON columns and the SQL built from them.

Every table's columns carry the names of its record's fields, so encoding and decoding are
derived from the record class and no per-column code can drift out of step with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from piflow.config.resources import resource_policy_from_json
from piflow.engine.store.records import (
    AgentRecord,
    AttemptRecord,
    AttemptSetup,
    CheckpointRecord,
    DamagedRecord,
    DecisionRecord,
    EventRecord,
    RunRecord,
    WorktreeRecord,
)
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Compact, and ASCII-only: a JavaScript string may hold a lone surrogate, which SQLite's UTF-8
# binding would reject but a `\udXXX` escape carries intact. NaN and Infinity are not JSON.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_DECODE = json.JSONDecoder().decode


def encode_json(value: Any) -> str:
    """Compact JSON text of a stored value; a value JSON cannot carry is a programming error."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise WorkflowError("INTERNAL_ERROR", f"Run store values must be plain JSON: {exc}") from exc


def encode_optional(value: Any) -> str | None:
    """JSON text, with None stored as SQL NULL (it decodes back to None either way)."""
    return None if value is None else encode_json(value)


def decode_optional(text: str | None) -> Any:
    return None if text is None else _DECODE(text)


R = TypeVar("R", bound="DataclassInstance")


class Codec:
    """How a typed field travels in its JSON column: `to_json` before encoding, `from_json` after
    decoding (None stays None); `from_json` raises ValueError for a value that cannot be one."""

    def __init__(self, to_json: Callable[[Any], Any], from_json: Callable[[Any], Any]) -> None:
        self.to_json = to_json
        self.from_json = from_json

    def encode(self, value: Any) -> str | None:
        return None if value is None else encode_json(self.to_json(value))


PLAIN = Codec(lambda value: value, lambda value: value)


class Table(Generic[R]):
    """One table whose rows are the records of type `R`."""

    def __init__(
        self,
        name: str,
        record: type[R],
        key: tuple[str, ...],
        json_fields: frozenset[str] = frozenset(),
        bool_fields: frozenset[str] = frozenset(),
        codecs: Mapping[str, Codec] | None = None,
    ) -> None:
        """`codecs` names the JSON columns holding a typed value (plain JSON values need none)."""
        self.name = name
        self.record = record
        self.columns: tuple[str, ...] = tuple(f.name for f in fields(record))
        self.key = key
        self.json_fields = json_fields | frozenset(codecs or ())
        self._codecs = {name: (codecs or {}).get(name, PLAIN) for name in self.json_fields}
        self._values = attrgetter(*self.columns)
        self._json_indexes = tuple(i for i, name in enumerate(self.columns) if name in self.json_fields)
        self._bool_indexes = tuple(i for i, name in enumerate(self.columns) if name in bool_fields)
        self._updates: dict[tuple[str, ...], str] = {}
        self.select = f"SELECT {', '.join(self.columns)} FROM {name}"
        placeholders = ", ".join("?" for _ in self.columns)
        insert = f"INSERT INTO {name} ({', '.join(self.columns)}) VALUES ({placeholders})"
        self.insert_or_keep = f"{insert} ON CONFLICT ({', '.join(key)}) DO NOTHING"
        assignments = ", ".join(f"{c} = excluded.{c}" for c in self.columns if c not in key)
        self.upsert = f"{insert} ON CONFLICT ({', '.join(key)}) DO UPDATE SET {assignments}"

    def row(self, record: R) -> list[Any]:
        """The SQL parameters for `record`, JSON columns encoded."""
        values = list(self._values(record))
        for index in self._json_indexes:
            values[index] = self._codecs[self.columns[index]].encode(values[index])
        return values

    def decode(self, row: tuple[Any, ...]) -> R:
        """The record of `row`; a row that cannot be one (bad JSON, unknown state) is `DamagedRecord`."""
        values = list(row)
        column, shape = "", ""
        try:
            for index in self._json_indexes:
                column = self.columns[index]
                value = decode_optional(values[index])
                shape = column
                values[index] = None if value is None else self._codecs[column].from_json(value)
                shape = ""
            for index in self._bool_indexes:
                values[index] = bool(values[index])
            column = ""
            return self.record(**dict(zip(self.columns, values, strict=True)))
        except (ValueError, TypeError, RecursionError, WorkflowError) as exc:
            where = (f"column {shape} does not hold what it should" if shape
                     else f"column {column} is not valid JSON" if column else "it is not a valid record")
            detail = exc.message if isinstance(exc, WorkflowError) else str(exc).splitlines()[0]
            raise DamagedRecord(self.name, self._describe_key(row), f"{where} ({detail})") from None

    def _describe_key(self, row: tuple[Any, ...]) -> str:
        return "/".join(str(row[self.columns.index(name)]) for name in self.key)

    def encode_field(self, name: str, value: Any) -> Any:
        return self._codecs[name].encode(value) if name in self.json_fields else value

    def update_sql(self, names: tuple[str, ...]) -> str:
        """`UPDATE ... SET <names> WHERE <key>`, built once per set of names (the hot path)."""
        sql = self._updates.get(names)
        if sql is None:
            assignments = ", ".join(f"{name} = ?" for name in names)
            where = " AND ".join(f"{column} = ?" for column in self.key)
            sql = self._updates[names] = f"UPDATE {self.name} SET {assignments} WHERE {where}"
        return sql


RUNS = Table(
    "runs",
    RunRecord,
    ("id",),
    json_fields=frozenset({"error", "budget", "usage", "result", "warnings"}),
    bool_fields=frozenset({"has_result"}),
)
AGENTS = Table("agents", AgentRecord, ("id",), json_fields=frozenset({"tools", "structural_path", "error"}))

def stored_setup(setup: AttemptSetup) -> dict[str, Any]:
    """The `attempts.setup` column: the fields under their own names (also how a Temporal run's
    workflow keeps an attempt's set-up)."""
    return {
        "hook_names": list(setup.hook_names),
        "model": setup.model,
        "thinking": setup.thinking,
        "tools": list(setup.tools),
        "cwd": setup.cwd,
        "system_prompt": setup.system_prompt,
        "system_prompt_sha256": setup.system_prompt_sha256,
        "disabled_resources": None if setup.disabled_resources is None else setup.disabled_resources.to_json(),
    }


# Stores written before the set-up was typed keep these fields under their camelCase names.
_EARLIER_NAMES = {"hook_names": "hookNames", "system_prompt": "systemPrompt",
                  "system_prompt_sha256": "systemPromptSha256", "disabled_resources": "disabledAgentResources"}


def setup_from_stored(data: Any) -> AttemptSetup:
    if not isinstance(data, dict):
        raise ValueError("the attempt set-up is not an object")

    def get(name: str) -> Any:
        return data[name] if name in data else data.get(_EARLIER_NAMES.get(name, name))

    def text(name: str) -> str | None:
        value = get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"the attempt set-up's {name} is not a string")
        return value

    def names(name: str) -> tuple[str, ...]:
        value = get(name) or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"the attempt set-up's {name} is not a list of strings")
        return tuple(value)

    return AttemptSetup(
        hook_names=names("hook_names"),
        model=text("model"),
        thinking=text("thinking"),
        tools=names("tools"),
        cwd=text("cwd"),
        system_prompt=text("system_prompt"),
        system_prompt_sha256=text("system_prompt_sha256"),
        disabled_resources=resource_policy_from_json(get("disabled_resources")),
    )


ATTEMPTS = Table(
    "attempts",
    AttemptRecord,
    ("agent_id", "attempt"),
    json_fields=frozenset({"error"}),
    codecs={"setup": Codec(stored_setup, setup_from_stored)},
)
CHECKPOINTS = Table("checkpoints", CheckpointRecord, ("run_id", "label"), json_fields=frozenset({"context"}))
DECISIONS = Table("decisions", DecisionRecord, ("run_id", "proposal_id"), json_fields=frozenset({"payload"}))
EVENTS = Table("events", EventRecord, ("seq",), json_fields=frozenset({"payload"}))
WORKTREES = Table("worktrees", WorktreeRecord, ("run_id", "owner"))
