"""pi-extensible-workflows settings files (`settings.json`, spec D): load, validate, save aliases.

The files are pi's, so piflow reads them exactly as the reference does (same checks, order,
codes and messages) and, when it writes model aliases, keeps every other key untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from piflow.config.files import FileRefused, node_error_text, read_text_as_node
from piflow.config.json_text import JsonSyntaxError, parse_json_text
from piflow.config.model_refs import parse_model_reference
from piflow.config.resources import ResourcePolicy, validate_resource_policy
from piflow.errors import WorkflowError
from piflow.jsvalues import UNDEFINED, is_js_integer, js_object_entries, js_trim

__all__ = [
    "DEFAULT_CONCURRENCY",
    "WorkflowSettings",
    "load_settings",
    "save_model_aliases",
    "validate_model_aliases",
]

DEFAULT_CONCURRENCY: Final = 8
SETTINGS_KEYS: Final = ("concurrency", "modelAliases", "disabledAgentResources")
_ALIAS_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

@dataclass(frozen=True)
class WorkflowSettings:
    """A validated settings file. `to_json()` is the reference's `{concurrency, modelAliases?, ...}`."""

    concurrency: int = DEFAULT_CONCURRENCY
    model_aliases: dict[str, str] | None = None
    disabled_agent_resources: ResourcePolicy | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"concurrency": self.concurrency}
        if self.model_aliases is not None:
            data["modelAliases"] = dict(self.model_aliases)
        if self.disabled_agent_resources is not None:
            data["disabledAgentResources"] = self.disabled_agent_resources.to_json()
        return data


def _alias_error(message: str, settings_path: str) -> WorkflowError:
    return WorkflowError("CONFIG_ERROR", f"{message} (settings: {settings_path})")


def validate_model_aliases(value: Any, settings_path: str = "workflow settings") -> dict[str, str]:
    """Check a `modelAliases` object: names `^[A-Za-z][A-Za-z0-9_-]*$`, targets parseable specs."""
    entries = js_object_entries(value)
    if entries is None:
        raise _alias_error("modelAliases must be an object", settings_path)
    aliases: dict[str, str] = {}
    for name, target in entries.items():
        if not _ALIAS_NAME.fullmatch(name):
            raise _alias_error(f"Invalid model alias name: {name}", settings_path)
        if not isinstance(target, str) or not js_trim(target):
            raise _alias_error(f"Invalid model alias target for {name}", settings_path)
        try:
            parse_model_reference(target)
        except WorkflowError as error:
            message = f"Invalid model alias target for {name}: {error.message}"
            raise _alias_error(message, settings_path) from None
        aliases[name] = target
    return aliases


def _read_settings_json(path: str) -> Any:
    """The parsed JSON of a settings file, UNDEFINED when the file is missing."""
    try:
        text = read_text_as_node(path)
    except (OSError, FileRefused) as error:
        detail = node_error_text(error, path)
        raise WorkflowError("CONFIG_ERROR", f"Invalid workflow settings JSON at {path}: {detail}") from None
    if text is None:
        return UNDEFINED
    try:
        return parse_json_text(text)
    except JsonSyntaxError as error:
        message = f"Invalid workflow settings JSON at {path}: {error.message}"
        raise WorkflowError("CONFIG_ERROR", message) from None


def load_settings(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> WorkflowSettings:
    """Load and validate a settings file; a missing file gives the defaults (`{concurrency: 8}`).

    `environ` only matters for `~` in extension selectors (defaults to the process environment).
    """
    path_text = os.fspath(path)
    parsed = _read_settings_json(path_text)
    if parsed is UNDEFINED:
        return WorkflowSettings()
    entries = parsed if isinstance(parsed, dict) else None
    if entries is None:
        raise WorkflowError("INVALID_SETTINGS", f"Workflow settings at {path_text} must be an object")
    for key in entries:
        if key not in SETTINGS_KEYS:
            raise WorkflowError("INVALID_SETTINGS", f"Unknown workflow setting at {path_text}: {key}")
    concurrency = entries.get("concurrency", DEFAULT_CONCURRENCY)
    if not is_js_integer(concurrency) or not 1 <= concurrency <= 16:
        raise WorkflowError("INVALID_SETTINGS", f"{path_text}.concurrency must be an integer from 1 to 16")
    aliases_value = entries.get("modelAliases", UNDEFINED)
    aliases = None if aliases_value is UNDEFINED else validate_model_aliases(aliases_value, path_text)
    resources = validate_resource_policy(
        entries.get("disabledAgentResources", UNDEFINED), path_text, "INVALID_SETTINGS", environ
    )
    return WorkflowSettings(int(concurrency), aliases, resources)


def save_model_aliases(path: str | os.PathLike[str], aliases: Mapping[str, str]) -> None:
    """Replace `modelAliases` in a settings file, keeping its other keys (spec D).

    The aliases and the existing file are validated first (errors propagate; a missing file is
    fine). The file is written as 2-space JSON plus a newline through a private temp file
    (`<path>.<pid>.<uuid>.tmp`, mode 0600) renamed into place, so readers never see half a file.
    """
    path_text = os.fspath(path)
    normalized = validate_model_aliases(dict(aliases), path_text)
    load_settings(path_text)
    existing = _read_settings_json(path_text)
    document: dict[str, Any] = dict(existing) if isinstance(existing, dict) else {}
    document["modelAliases"] = normalized
    Path(path_text).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path_text, js_json_dumps(document, indent=2) + "\n")


def atomic_write_text(path: str, text: str, mode: int = 0o600) -> None:
    """Write `text` to `path` through a temp file in the same directory and an atomic rename."""
    import uuid  # loads `platform`: only a write pays for it, not every launch and resume reading settings

    temp = f"{path}.{os.getpid()}.{uuid.uuid4()}.tmp"
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


_LONE_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


def js_json_dumps(value: Any, indent: int | None = None) -> str:
    """`JSON.stringify(value, null, indent)` for plain JSON data (lone surrogates escaped)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
