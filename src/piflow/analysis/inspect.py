"""`inspect_script()`: the static picture of a script's workflow calls, for editors (spec B.5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import extensible
from piflow.analysis.document import ScriptDocument
from piflow.analysis.expressions import (
    UNKNOWN,
    effective_property,
    json_value,
    option_keys,
    static_string,
    static_value,
)
from piflow.analysis.facts import CallFact, Execution, Placed, StructureScope
from piflow.analysis.jsliterals import js_object
from piflow.analysis.rules import RuleContext
from piflow.errors import WorkflowError

_NOT_SET: Any = object()


@dataclass(frozen=True, slots=True)
class StaticCall:
    """One direct workflow call. Offsets are UTF-16 code units into the body (header removed)."""

    execution: Execution
    structure: tuple[StructureScope, ...]
    kind: str
    start: int
    end: int
    name: str | None
    prompt: str | None
    model: str | None
    role: str | None
    label: Any = _NOT_SET
    retries: Any = _NOT_SET
    output_schema: Any = _NOT_SET
    options: Any = _NOT_SET
    option_keys: Any = _NOT_SET

    def to_json(self) -> dict[str, Any]:
        """The reference's record, fields in its order and present only when it sets them."""
        data: dict[str, Any] = {
            "execution": self.execution,
            "structure": [scope.to_json() for scope in self.structure],
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "name": self.name,
            "prompt": self.prompt,
            "model": self.model,
        }
        if self.label is not _NOT_SET:
            data["label"] = self.label
        data["role"] = self.role
        if self.retries is not _NOT_SET:
            data["retries"] = self.retries
        if self.output_schema is not _NOT_SET:
            data["outputSchema"] = self.output_schema
        if self.options is not _NOT_SET:
            data["options"] = self.options
            data["optionKeys"] = list(self.option_keys)
        return data


def inspect_script(script: str) -> list[StaticCall]:
    """The workflow calls of a script in start order; raise `INVALID_SYNTAX` as the reference does."""
    document = ScriptDocument(script)
    facts = document.facts(extensible.DIALECT.walk)
    context = RuleContext(document, facts, Capabilities(), preflight=True, compile=True)
    first = next(iter(extensible.check_syntax(context)), None)
    if first is not None:
        raise WorkflowError(first.code, first.message)
    return inspect_document(document)


def inspect_document(document: ScriptDocument) -> list[StaticCall]:
    """The calls of an already parsed document (no syntax check)."""
    return [_record(document, call) for call in document.facts(extensible.DIALECT.walk).calls]


def _record(document: ScriptDocument, call: Placed[CallFact]) -> StaticCall:
    fact = call.fact
    first, options = fact.arg(0), fact.arg(1)
    start, end = document.body_offset(call.at(fact.start)), document.body_offset(call.at(fact.end))
    placement = (fact.execution, fact.structure, fact.kind, start, end)
    if fact.kind in ("agent", "conversation"):
        extra: dict[str, Any] = {}
        retries = static_value(effective_property(options, "retries"))
        if isinstance(retries, (int, float)) and not isinstance(retries, bool):
            extra["retries"] = retries
        schema = static_value(effective_property(options, "outputSchema"))
        if isinstance(schema, dict):
            extra["output_schema"] = schema
        keys = option_keys(options)
        if keys:
            known = []
            for key in keys:
                value = static_value(effective_property(options, key))
                if value is not UNKNOWN and json_value(value):
                    known.append((key, value))
            extra["options"] = js_object(known)
            extra["option_keys"] = tuple(keys)
        return StaticCall(
            *placement,
            name=static_string(first) if fact.kind == "conversation" else None,
            prompt=None if fact.kind == "conversation" else static_string(first),
            model=static_string(effective_property(options, "model")),
            role=static_string(effective_property(options, "role")),
            label=static_string(effective_property(options, "label")),
            **extra,
        )
    if fact.kind == "checkpoint":
        return StaticCall(
            *placement,
            name=static_string(effective_property(first, "name")),
            prompt=static_string(effective_property(first, "prompt")),
            model=None,
            role=None,
        )
    return StaticCall(*placement, name=static_string(first), prompt=None, model=None, role=None)
