"""Agent roles: Markdown files with YAML frontmatter that fix an agent's model, thinking and tools.

Role files are pi's (spec E). Frontmatter is YAML 1.2 as pi reads it with the `yaml` package,
so `thinking: off` and `yes` stay strings (PyYAML's YAML 1.1 would turn them into booleans and
reject valid roles). Loading keeps each role's file and whether the project defined it, which
go-to-definition and the launch snapshot's `projectRoles` need.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from piflow.config.files import CONFIG_LIMIT, FileRefused, node_error_text, read_bytes
from piflow.config.model_refs import THINKING_LEVELS
from piflow.config.resources import ResourcePolicy, validate_resource_policy
from piflow.errors import WorkflowError
from piflow.jsvalues import JS_WHITESPACE, UNDEFINED, js_trim, utf16_length

if TYPE_CHECKING:  # ruamel.yaml (~15 ms) is imported only once a role has YAML frontmatter
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.resolver import VersionedResolver

__all__ = ["RoleDefinition", "RoleSet", "load_roles", "parse_role_markdown"]

_TIMESTAMP_TAG: Final = "tag:yaml.org,2002:timestamp"
_NON_STRICT_LINE: Final = re.compile(r"(model|thinking|tools|description)\s*:\s*([^\n\r\u2028\u2029]+)")
_LEADING_DELIMITER: Final = re.compile(f"[{JS_WHITESPACE}]*---(?:\n|$)")


@dataclass(frozen=True)
class RoleDefinition:
    """One role. `to_json()` is the reference's `{prompt, description?, model?, thinking?, tools?, ...}`."""

    prompt: str
    description: str | None = None
    model: str | None = None
    thinking: str | None = None
    tools: tuple[str, ...] | None = None
    disabled_agent_resources: ResourcePolicy | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"prompt": self.prompt}
        if self.description is not None:
            data["description"] = self.description
        if self.model is not None:
            data["model"] = self.model
        if self.thinking is not None:
            data["thinking"] = self.thinking
        if self.tools is not None:
            data["tools"] = list(self.tools)
        if self.disabled_agent_resources is not None:
            data["disabledAgentResources"] = self.disabled_agent_resources.to_json()
        return data


def _fail(message: str) -> WorkflowError:
    return WorkflowError("INVALID_METADATA", message)


def _strip_quotes(text: str) -> str:
    # The reference strips one leading and one trailing quote of each kind, independently.
    text = re.sub(r"^'|'$", "", text)
    return re.sub(r'^"|"$', "", text)


def _parse_lenient(content: str) -> RoleDefinition:
    """The reference's non-strict reader: `key: value` lines, no YAML (used for inline roles)."""
    if not content.startswith("---\n"):
        return RoleDefinition(prompt=content)
    end = content.find("\n---", 4)
    if end < 0:
        return RoleDefinition(prompt=content)
    meta: dict[str, str] = {}
    for line in content[4:end].split("\n"):
        match = _NON_STRICT_LINE.fullmatch(js_trim(line))
        if match and match.group(2):
            meta[match.group(1)] = js_trim(match.group(2))
    tools: tuple[str, ...] | None = None
    if meta.get("tools"):
        listed = re.sub(r"^\[|\]$", "", meta["tools"]).split(",")
        tools = tuple(name for name in (_strip_quotes(js_trim(item)) for item in listed) if name)
    thinking = _strip_quotes(meta["thinking"]) if "thinking" in meta else None
    if thinking and thinking not in THINKING_LEVELS:
        raise _fail(f"Invalid role thinking level: {thinking}")
    prompt = content[end + 4 :]
    return RoleDefinition(
        prompt=prompt[1:] if prompt.startswith("\n") else prompt,
        description=_strip_quotes(meta["description"]) if meta.get("description") else None,
        model=_strip_quotes(meta["model"]) if meta.get("model") else None,
        thinking=thinking or None,
        tools=tools,
    )


@cache
def _core_schema_resolver() -> type[VersionedResolver]:
    """The resolver class, built on first use like every use of ruamel.yaml."""
    from ruamel.yaml.resolver import VersionedResolver

    class CoreSchemaResolver(VersionedResolver):
        """YAML 1.2 core schema as the `yaml` package reads it: no implicit timestamps."""

        def add_version_implicit_resolver(self, version: Any, tag: Any, regexp: Any, first: Any) -> None:
            if tag == _TIMESTAMP_TAG:
                return
            super().add_version_implicit_resolver(version, tag, regexp, first)

    return CoreSchemaResolver


def _yaml_loader() -> YAML:
    from ruamel.yaml import YAML

    loader = YAML(typ="safe", pure=True)
    loader.Resolver = _core_schema_resolver()
    return loader


def _split_frontmatter(content: str) -> tuple[str | None, str]:
    """pi's `parseFrontmatter` split: `(yaml text or None, body)` after newline/BOM normalisation."""
    normalized = content.replace("\r\n", "\n").replace("\r", "\n")
    normalized = normalized.removeprefix("\ufeff")
    leading = _LEADING_DELIMITER.match(normalized)
    if leading is None:
        return None, normalized
    end = normalized.find("\n---", leading.end())
    if end < 0:
        return None, normalized
    return normalized[leading.end() : end], js_trim(normalized[end + 4 :])


def _yaml_error_message(error: YAMLError, source: str) -> str:
    """A YAML error in the `yaml` package's shape: `<text> at line L, column C:\\n\\n<context>\\n^\\n`."""
    from ruamel.yaml.error import MarkedYAMLError

    if not isinstance(error, MarkedYAMLError) or error.problem_mark is None:
        return str(error)
    problem = str(error.problem or error.context or "Invalid YAML")
    mark = error.problem_mark
    if "duplicate key" in problem:
        text = "Map keys must be unique"
    elif "expected ',' or ']'" in problem:
        text = "Flow sequence in block collection must be sufficiently indented and end with a ]"
    elif "expected ',' or '}'" in problem:
        text = "Flow map in block collection must be sufficiently indented and end with a }"
    else:
        text = problem[:1].upper() + problem[1:]
    return text + _error_context(source, mark.line + 1, mark.column + 1)


def _error_context(source: str, line: int, column: int) -> str:
    """The `yaml` package's `prettifyError` suffix for a 1-based line and column."""
    lines = source.split("\n")
    if line > len(lines):
        line, column = len(lines), len(lines[-1]) + 1
    suffix = f" at line {line}, column {column}"
    pointer_column = column - 1
    text = lines[line - 1]
    if pointer_column >= 60 and len(text) > 80:
        trim_start = min(pointer_column - 39, len(text) - 79)
        text = "…" + text[trim_start:]
        pointer_column -= trim_start - 1
    if len(text) > 80:
        text = text[:79] + "…"
    if line > 1 and not text[:pointer_column].strip(" "):
        previous = lines[line - 2] + "\n"
        if len(previous) > 80:
            previous = previous[:79] + "…\n"
        text = previous + text
    if not text.strip(" "):
        return suffix
    return f"{suffix}:\n\n{text}\n{' ' * pointer_column}^\n"


def _parse_frontmatter(content: str) -> tuple[Any, str]:
    yaml_text, body = _split_frontmatter(content)
    if not yaml_text:
        return {}, body
    from ruamel.yaml.error import YAMLError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a redefined anchor, which YAML 1.2 allows
            value = _yaml_loader().load(yaml_text)
    except YAMLError as error:
        raise _fail(f"Invalid role frontmatter: {_yaml_error_message(error, yaml_text)}") from None
    except RecursionError:
        raise _fail("Invalid role frontmatter: the YAML is nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as error:
        raise _fail(f"Invalid role frontmatter: {error}") from None
    return ({} if value is None else value), body


def parse_role_markdown(content: str, strict: bool = False, role_path: str | None = None) -> RoleDefinition:
    """Parse a role file (spec E). Strict parsing (role files) reads the frontmatter as YAML and
    checks every field; non-strict parsing is the reference's lenient `key: value` reader.
    `role_path` names the file in resource-policy messages and anchors relative extension paths.
    """
    if not strict:
        return _parse_lenient(content)
    normalized = re.sub(r"\r\n?", "\n", content)
    if normalized.startswith("---\n") and normalized.find("\n---", 3) < 0:
        raise _fail("Role frontmatter is missing its closing delimiter")
    frontmatter, body = _parse_frontmatter(content)
    if not isinstance(frontmatter, dict):
        raise _fail("Role frontmatter must be an object")
    model = frontmatter.get("model", UNDEFINED)
    thinking = frontmatter.get("thinking", UNDEFINED)
    tools = frontmatter.get("tools", UNDEFINED)
    description = frontmatter.get("description", UNDEFINED)
    if model is not UNDEFINED and (not isinstance(model, str) or not js_trim(model)):
        raise _fail("Role model must be a non-empty string")
    if thinking is not UNDEFINED and (not isinstance(thinking, str) or thinking not in THINKING_LEVELS):
        shown = thinking if isinstance(thinking, str) else _typeof(thinking)
        raise _fail(f"Invalid role thinking level: {shown}")
    if description is not UNDEFINED and (
        not isinstance(description, str)
        or not js_trim(description)
        or utf16_length(description) > 1024
        or "\r" in description
        or "\n" in description
    ):
        raise _fail("Role description must be a non-empty single-line string of at most 1024 characters")
    if tools is not UNDEFINED and (
        not isinstance(tools, list) or any(not isinstance(tool, str) or not js_trim(tool) for tool in tools)
    ):
        raise _fail("Role tools must be an array of non-empty strings")
    resources = validate_resource_policy(
        frontmatter.get("disabledAgentResources", UNDEFINED), role_path or "<role>", "INVALID_METADATA"
    )
    return RoleDefinition(
        prompt=body,
        description=js_trim(description) if isinstance(description, str) else None,
        model=js_trim(model) if isinstance(model, str) else None,
        thinking=thinking if isinstance(thinking, str) else None,
        tools=tuple(js_trim(tool) for tool in tools) if isinstance(tools, list) else None,
        disabled_agent_resources=resources,
    )


def _typeof(value: Any) -> str:
    """JavaScript `typeof` of a YAML value."""
    if value is None or isinstance(value, (dict, list)):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "object"


@dataclass(frozen=True)
class RoleSet:
    """All roles of a launch: global roles overridden by trusted project roles of the same name.

    `paths` maps each effective role to its file; `project_names` are the roles a project file
    defines (the launch snapshot's `projectRoles`).
    """

    roles: dict[str, RoleDefinition] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    project_names: frozenset[str] = frozenset()

    @property
    def names(self) -> list[str]:
        return list(self.roles)

    def __contains__(self, name: object) -> bool:
        return name in self.roles

    def get(self, name: str) -> RoleDefinition | None:
        return self.roles.get(name)

    @property
    def project_roles(self) -> dict[str, RoleDefinition]:
        return {name: role for name, role in self.roles.items() if name in self.project_names}

    def to_json(self) -> dict[str, Any]:
        return {name: role.to_json() for name, role in self.roles.items()}


def _read_role_dir(directory: Path) -> dict[str, tuple[RoleDefinition, Path]]:
    """Parse every `*.md` regular file of `directory` strictly, in name order; missing dir is empty.

    Like the reference (`Dirent.isFile()`), symbolic links and other non-regular entries are
    skipped, and a hidden file named exactly `.md` is not a role.
    """
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return {}
    except OSError as error:
        detail = node_error_text(error, str(directory))
        raise WorkflowError("CONFIG_ERROR", f"Cannot read role directory {directory}: {detail}") from None
    roles: dict[str, tuple[RoleDefinition, Path]] = {}
    for entry in entries:
        if not entry.is_file(follow_symlinks=False) or not entry.name.endswith(".md") or entry.name == ".md":
            continue
        path = Path(entry.path)
        try:
            content = read_bytes(path, CONFIG_LIMIT).decode("utf-8", errors="replace")
        except (OSError, FileRefused) as error:
            detail = node_error_text(error, str(path))
            raise WorkflowError("CONFIG_ERROR", f"Cannot read role file {path}: {detail}") from None
        roles[entry.name[: -len(".md")]] = (parse_role_markdown(content, True, str(path)), path)
    return roles


def load_roles(global_dir: Path | str, project_dir: Path | str | None = None) -> RoleSet:
    """Load global roles and, when `project_dir` is given (a trusted project), project roles.

    Every file is parsed strictly; the first malformed file raises its INVALID_METADATA.
    A project role replaces a global role of the same name.
    """
    merged: dict[str, RoleDefinition] = {}
    paths: dict[str, Path] = {}
    for name, (role, path) in _read_role_dir(Path(global_dir)).items():
        merged[name], paths[name] = role, path
    project: dict[str, tuple[RoleDefinition, Path]] = {}
    if project_dir is not None:
        project = _read_role_dir(Path(project_dir))
        for name, (role, path) in project.items():
            merged[name], paths[name] = role, path
    return RoleSet(merged, paths, frozenset(project))

