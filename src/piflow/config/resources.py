"""Disabled agent resources (`disabledAgentResources`): validation and normalisation (spec D).

Settings files and role frontmatter share these rules; only the error code and the base of
the message differ. Extension selectors become canonical absolute paths, resolved relative to
the file that names them, so that the same extension named two ways is disabled once.
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from piflow.config.paths import expand_home
from piflow.errors import WorkflowError
from piflow.jsvalues import UNDEFINED, js_object_entries, js_trim

__all__ = [
    "RESOURCE_KINDS",
    "ResourcePolicy",
    "merge_resource_policies",
    "resource_policy_from_json",
    "validate_resource_policy",
]

RESOURCE_KINDS: Final = ("skills", "extensions")

# Characters WHATWG URL parsing forbids in a host (a file URL with one is "Invalid URL").
_BAD_HOST: Final = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
_BAD_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class ResourcePolicy:
    """Skills (names) and extensions (canonical paths) agents must not load."""

    skills: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"skills": list(self.skills), "extensions": list(self.extensions)}

    @property
    def empty(self) -> bool:
        return not self.skills and not self.extensions


def resource_policy_from_json(data: Any) -> ResourcePolicy | None:
    """A policy saved by `to_json` (a run's launch snapshot holds its roles' policies)."""
    if not isinstance(data, Mapping):
        return None
    return ResourcePolicy(tuple(data.get("skills") or ()), tuple(data.get("extensions") or ()))


def merge_resource_policies(*policies: ResourcePolicy | None) -> ResourcePolicy:
    """Union of policies, first occurrence order kept (global before project before role)."""
    skills = dict.fromkeys(skill for policy in policies if policy for skill in policy.skills)
    extensions = dict.fromkeys(ext for policy in policies if policy for ext in policy.extensions)
    return ResourcePolicy(tuple(skills), tuple(extensions))


def validate_resource_policy(
    value: Any,
    source_path: str,
    code: str = "INVALID_SETTINGS",
    environ: Mapping[str, str] | None = None,
) -> ResourcePolicy | None:
    """Validate a `disabledAgentResources` value named in `source_path` (a settings or role file).

    `UNDEFINED` (key absent) gives None. Messages use `<source_path>.disabledAgentResources`
    as their base; `code` is INVALID_SETTINGS for settings and INVALID_METADATA for roles.
    """
    if value is UNDEFINED:
        return None
    base = f"{source_path}.disabledAgentResources"
    entries = js_object_entries(value)
    if entries is None:
        raise WorkflowError(code, f"{base} must be an object")
    for key in entries:
        if key not in RESOURCE_KINDS:
            raise WorkflowError(code, f"{base}.{key} is not supported")
    normalized: dict[str, list[str]] = {"skills": [], "extensions": []}
    for kind in RESOURCE_KINDS:
        selectors = entries.get(kind, UNDEFINED)
        if selectors is UNDEFINED:
            continue
        if not isinstance(selectors, list):
            raise WorkflowError(code, f"{base}.{kind} must be an array")
        seen: set[str] = set()
        for index, entry in enumerate(selectors):
            if not isinstance(entry, str) or not js_trim(entry):
                raise WorkflowError(code, f"{base}.{kind}[{index}] must be a non-empty string")
            selector = js_trim(entry)
            if kind == "extensions":
                try:
                    selector = _extension_path(selector, source_path, environ)
                except ValueError as error:
                    message = f"{base}.{kind}[{index}] must be a valid path: {error}"
                    raise WorkflowError(code, message) from None
            if selector not in seen:
                seen.add(selector)
                normalized[kind].append(selector)
    return ResourcePolicy(tuple(normalized["skills"]), tuple(normalized["extensions"]))


def _extension_path(selector: str, source_path: str, environ: Mapping[str, str] | None) -> str:
    expanded = expand_home(selector, environ)
    if expanded.startswith("file://"):
        expanded = _file_url_to_path(expanded)
    resolved = _resolve(posixpath.dirname(source_path) or ".", expanded)
    try:
        return os.path.realpath(resolved, strict=True)
    except (OSError, ValueError):
        return resolved


def _resolve(directory: str, path: str) -> str:
    """Node's `path.resolve(directory, path)` on POSIX: absolute and normalised."""
    joined = path if posixpath.isabs(path) else posixpath.join(directory, path)
    if not posixpath.isabs(joined):
        joined = posixpath.join(os.getcwd(), joined)
    normalized = posixpath.normpath(joined)
    # POSIX normpath keeps a leading "//"; Node collapses it.
    return "/" + normalized.lstrip("/") if normalized.startswith("//") else normalized


def _file_url_to_path(url: str) -> str:
    """Node's `fileURLToPath` on POSIX, with its error texts."""
    parts = urlsplit(url.replace("\\", "/"))
    host = parts.netloc
    if host and _BAD_HOST.search(host):
        raise ValueError("Invalid URL")
    if host and host.lower() != "localhost":
        raise ValueError(f'File URL host must be "localhost" or empty on {_platform()}')
    pathname = parts.path or "/"
    if re.search(r"%2f", pathname, re.IGNORECASE):
        raise ValueError("File URL path must not include encoded / characters")
    if _BAD_PERCENT.search(pathname):
        raise ValueError("URI malformed")
    try:
        return unquote(pathname, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("URI malformed") from None


def _platform() -> str:
    return "linux" if sys.platform.startswith("linux") else sys.platform

