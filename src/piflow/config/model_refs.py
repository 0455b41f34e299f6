"""Model references `provider/model[:thinking]`, aliases and bare ids (spec B.3)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from piflow.errors import WorkflowError

THINKING_LEVELS: Final[tuple[str, ...]] = ("off", "minimal", "low", "medium", "high", "xhigh", "max")

_SPEC = re.compile(r"^([^/:\s]+)/([^:\s]+)(?::(.*))?$", re.DOTALL)


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference; `name` is the `provider/model` the registry knows."""

    provider: str
    model: str
    thinking: str | None = None

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    def __str__(self) -> str:
        return self.name if self.thinking is None else f"{self.name}:{self.thinking}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.thinking is not None:
            data["thinking"] = self.thinking
        return data


def parse_model_reference(value: str) -> ModelRef:
    """Parse `provider/model[:thinking]`; any other shape is `UNKNOWN_MODEL`."""
    match = _SPEC.match(value) if isinstance(value, str) else None
    if match is None:
        raise WorkflowError("UNKNOWN_MODEL", f"Invalid model spec: {value}")
    provider, model, thinking = match.groups()
    if thinking is not None:
        if thinking == "" or ":" in thinking or any(ch.isspace() for ch in thinking):
            raise WorkflowError("UNKNOWN_MODEL", f"Invalid model spec: {value}")
        if thinking not in THINKING_LEVELS:
            raise WorkflowError("UNKNOWN_MODEL", f"Invalid thinking level: {thinking}")
    return ModelRef(provider, model, thinking)


def _model_part(known: str) -> str:
    """The part of a known `provider/model` a bare id is compared with (all of it without a `/`)."""
    return known.partition("/")[2] if "/" in known else known


def _settings_suffix(settings_path: str | None) -> str:
    return f" (settings: {settings_path})" if settings_path else ""


def unknown_alias_error(alias: str, target: str, settings_path: str | None) -> WorkflowError:
    """The reference's error for an alias whose target is unusable (unparsable or unavailable)."""
    return WorkflowError(
        "UNKNOWN_MODEL", f"Unknown model alias {alias} resolved to {target}{_settings_suffix(settings_path)}"
    )


def resolve_model_reference(
    value: str,
    aliases: Mapping[str, str] | None = None,
    known_models: Iterable[str] | None = None,
    settings_path: str | None = None,
) -> ModelRef:
    """Resolve an alias, a `provider/model` spec or a bare id unique among known models."""
    aliases = aliases or {}
    if value in aliases:
        target = aliases[value]
        try:
            return parse_model_reference(target)
        except WorkflowError:
            raise unknown_alias_error(value, target, settings_path) from None
    if "/" in value:
        return parse_model_reference(value)
    bare, sep, thinking = value.partition(":")
    unknown = WorkflowError("UNKNOWN_MODEL", f"Unknown model {value}{_settings_suffix(settings_path)}")
    if sep and thinking not in THINKING_LEVELS:
        raise unknown
    matches = [known for known in (known_models or ()) if _model_part(known) == bare]
    if len(matches) != 1:
        raise unknown
    return parse_model_reference(f"{matches[0]}:{thinking}" if sep else matches[0])
