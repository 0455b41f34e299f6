"""pi-subagents agent definitions (SUBAGENTS_SPEC B): discovery, `agentOverrides`, model resolution.

The API the engine, the analysis and the editor share:

- `load_subagent_settings(agent_dir, project_root, trusted=...)` reads the `subagents` section of
  pi's `settings.json` (`<agentDir>/settings.json`, and `<project>/.pi/settings.json` when the
  project is trusted; project values win): `agentOverrides`, `agentScope`, `defaultModel` and the
  capacity limits. pi's settings file holds much else, so other keys are ignored; a bad value of
  a key read here is a `problem` and its default applies.
- `load_agent_catalog(project_root, agent_dir=..., trusted=..., settings=...)` -> `AgentCatalog`.
  Layers, lowest precedence first: the builtins (`builtin_agents/*.md` in this package: scout,
  researcher, worker, reviewer, oracle alias advisor, delegate), `<agentDir>/agents/**/*.md`,
  then — only for a trusted project — `<project>/.agents/**/*.md` (legacy) and
  `<project>/.pi/agents/**/*.md`. A later layer replaces a definition of the same name. An agent
  is a Markdown file whose YAML frontmatter has `name` and `description`; `SKILL.md` files (skills
  under `.agents/skills/`) are not agents. A malformed file is skipped and becomes a `problem`
  with its file and line. Package-manifest agents (`pi-subagents.agents` in package.json) are not
  read. `agentOverrides.<name>` fill fields the definition leaves unset (the spec's precedence
  is per-run, frontmatter, agentOverrides, defaultModel, parent); `disabled: true` moves the agent
  to `catalog.disabled`.
- `AgentCatalog.get(name)` finds an enabled agent by name or alias.
- `resolve_child_model(requested, definition, catalog=..., availability=...)` -> `ChildModel`
  (provider/id, thinking, where it came from, resolved `fallbackModels`), or a `WorkflowError`
  `UNKNOWN_MODEL` with the spec's message. `resolve_subagent_model(...)` resolves one model string.
- `is_provider_failure(message)`: whether an attempt's error is a provider failure, the only
  failures `fallbackModels` apply to (quota, rate limit, overload, auth, unavailable, connection,
  HTTP 5xx) — never task failures, context overflow or timeouts.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from piflow.config.availability import ModelAvailability
from piflow.config.files import CONFIG_LIMIT, FileRefused, node_error_text, read_bytes, read_text_as_node
from piflow.config.json_text import JsonDocument, JsonSyntaxError, parse_json_document
from piflow.config.model_refs import THINKING_LEVELS
from piflow.config.paths import SETTINGS_FILE_NAME
from piflow.config.roles import _parse_frontmatter
from piflow.errors import WorkflowError

__all__ = [
    "BUILTIN_AGENTS_DIR",
    "DEFAULT_MAX_SPAWNS_PER_RUN",
    "AgentCatalog",
    "AgentDefinition",
    "AgentOverride",
    "AgentProblem",
    "ChildModel",
    "SubagentSettings",
    "is_provider_failure",
    "load_agent_catalog",
    "load_subagent_settings",
    "resolve_child_model",
    "resolve_subagent_model",
]

AgentSource = Literal["builtin", "user", "project"]
AgentScope = Literal["user", "project", "both"]
ModelSource = Literal["run", "agent", "override", "default", "parent"]

BUILTIN_AGENTS_DIR: Final = Path(__file__).with_name("builtin_agents")
DEFAULT_MAX_SPAWNS_PER_RUN: Final = 64
_MAX_FILES_PER_ROOT: Final = 2000
INHERIT: Final = "inherit"
EXTRA_FIELDS: Final = frozenset(
    {
        "package", "extensions", "subagentOnlyExtensions", "systemPromptMode", "inheritProjectContext",
        "inheritGlobalContext", "inheritSkills", "skills", "skillPath", "defaultContext", "output", "outputMode",
        "defaultReads", "defaultProgress", "async", "timeoutMs", "toolTimeoutMs", "toolBudget", "acceptance",
        "acceptanceRole", "completionGuard", "maxSubagentDepth", "memory", "permission", "permissions", "runner",
        "allowNestedSubagents", "fast",
    }
)  # fmt: skip
"""Frontmatter fields of spec B kept as read in `AgentDefinition.extra` (the engine interprets them)."""
OVERRIDE_FIELDS: Final = ("model", "thinking", "maxThinking", "tools", "fallbackModels", "description")


@dataclass(frozen=True)
class AgentProblem:
    """An agent file or setting piflow could not use: where (0-based line) and what to do."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line + 1}: {self.message}"


@dataclass(frozen=True)
class AgentDefinition:
    """One agent. `model` is as written (`"inherit"` allowed; None = inherit), `tools` None = the
    default tools; `line` is the 0-based line of `name:` (go-to-definition). `overridden` names the
    fields `agentOverrides` filled in."""

    name: str
    description: str | None
    system_prompt: str
    model: str | None
    thinking: str | None
    tools: tuple[str, ...] | None
    fallback_models: tuple[str, ...]
    source: AgentSource
    path: Path | None
    line: int = 0
    aliases: tuple[str, ...] = ()
    max_thinking: str | None = None
    overridden: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentOverride:
    """`subagents.agentOverrides.<name>`: fields filling the definition's unset ones, or `disabled`."""

    disabled: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SubagentSettings:
    """The `subagents` section of pi's settings that piflow reads (None: not set, the default applies)."""

    agent_overrides: Mapping[str, AgentOverride] = field(default_factory=dict)
    agent_scope: AgentScope = "both"
    default_model: str | None = None
    max_subagent_spawns_per_run: int = DEFAULT_MAX_SPAWNS_PER_RUN
    max_subagent_spawns_per_session: int | None = None
    global_concurrency_limit: int | None = None
    max_active_async_runs_per_session: int | None = None
    files: tuple[Path, ...] = ()
    problems: tuple[AgentProblem, ...] = ()


@dataclass(frozen=True)
class AgentCatalog:
    """The agents a project's children may use: enabled `definitions` by name (project > user >
    builtin), `disabled` names (their definitions stay in `discovered` for doctor and hover)."""

    definitions: Mapping[str, AgentDefinition]
    disabled: frozenset[str] = frozenset()
    problems: tuple[AgentProblem, ...] = ()
    discovered: Mapping[str, AgentDefinition] = field(default_factory=dict)
    settings: SubagentSettings = field(default_factory=SubagentSettings)

    def get(self, name: str) -> AgentDefinition | None:
        """The enabled agent called `name` or aliased so; None when unknown or disabled."""
        found = self.definitions.get(name)
        if found is not None:
            return found
        return next((agent for agent in self.definitions.values() if name in agent.aliases), None)

    def is_disabled(self, name: str) -> bool:
        return self.get(name) is None and (
            name in self.disabled
            or any(name in agent.aliases for key, agent in self.discovered.items() if key in self.disabled)
        )

    @property
    def names(self) -> tuple[str, ...]:
        """Every name and alias an enabled agent answers to."""
        return tuple(
            dict.fromkeys(name for agent in self.definitions.values() for name in (agent.name, *agent.aliases))
        )


# -- settings ------------------------------------------------------------------------------------


def _json_line(document: JsonDocument | None, path: tuple[str | int, ...]) -> int:
    location = document.location(path) if document is not None else None
    return location.line - 1 if location is not None else 0


def _read_settings_section(path: Path, problems: list[AgentProblem]) -> tuple[dict[str, Any], JsonDocument | None]:
    try:
        text = read_text_as_node(str(path))
    except (OSError, FileRefused) as error:
        problems.append(AgentProblem(path, 0, f"cannot read: {node_error_text(error, str(path))}"))
        return {}, None
    if text is None:
        return {}, None
    try:
        document = parse_json_document(text)
    except JsonSyntaxError as error:
        line = error.location.line - 1 if error.location else 0
        problems.append(AgentProblem(path, line, f"invalid JSON: {error.message}; pi-subagents settings ignored"))
        return {}, None
    section = document.value.get("subagents") if isinstance(document.value, dict) else None
    if section is None:
        return {}, document
    if not isinstance(section, dict):
        problems.append(AgentProblem(path, _json_line(document, ("subagents",)), "subagents must be an object"))
        return {}, document
    return section, document


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def load_subagent_settings(agent_dir: Path, project_root: Path | None, *, trusted: bool) -> SubagentSettings:
    """The `subagents` settings of the user and (trusted) project; never raises for bad content."""
    problems: list[AgentProblem] = []
    files = [agent_dir / SETTINGS_FILE_NAME]
    if trusted and project_root is not None:
        files.append(project_root / ".pi" / SETTINGS_FILE_NAME)
    overrides: dict[str, AgentOverride] = {}
    values: dict[str, Any] = {}
    read: list[Path] = []
    for path in files:
        section, document = _read_settings_section(path, problems)
        if document is not None:
            read.append(path)

        def problem(key: tuple[str | int, ...], message: str, path: Path = path, document: Any = document) -> None:
            problems.append(AgentProblem(path, _json_line(document, ("subagents", *key)), message))

        checks: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
            ("agentScope", lambda v: v in ("user", "project", "both"), "'user', 'project' or 'both'"),
            ("defaultModel", lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty model string"),
            ("maxSubagentSpawnsPerRun", _positive_int, "a positive integer"),
            ("maxSubagentSpawnsPerSession", _positive_int, "a positive integer"),
            ("globalConcurrencyLimit", _positive_int, "a positive integer"),
            ("maxActiveAsyncRunsPerSession", _positive_int, "a positive integer"),
        )
        for key, check, what in checks:
            if key in section:
                if check(section[key]):
                    values[key] = section[key]
                else:
                    problem((key,), f"subagents.{key} must be {what}; the default applies")
        raw = section.get("agentOverrides", {})
        if not isinstance(raw, dict):
            problem(("agentOverrides",), "subagents.agentOverrides must be an object of agent name -> fields")
            continue
        for name, entry in raw.items():
            if not isinstance(entry, dict):
                problem(("agentOverrides", name), f"subagents.agentOverrides.{name} must be an object")
                continue
            disabled = entry.get("disabled", False)
            if not isinstance(disabled, bool):
                problem(("agentOverrides", name, "disabled"), f"subagents.agentOverrides.{name}.disabled must be "
                        "true or false")
                disabled = False
            fields = {key: entry[key] for key in OVERRIDE_FIELDS if key in entry}
            previous = overrides.get(name, AgentOverride())
            overrides[name] = AgentOverride(
                disabled if "disabled" in entry else previous.disabled, {**previous.fields, **fields}
            )
    return SubagentSettings(
        agent_overrides=overrides,
        agent_scope=values.get("agentScope", "both"),
        default_model=values.get("defaultModel"),
        max_subagent_spawns_per_run=values.get("maxSubagentSpawnsPerRun", DEFAULT_MAX_SPAWNS_PER_RUN),
        max_subagent_spawns_per_session=values.get("maxSubagentSpawnsPerSession"),
        global_concurrency_limit=values.get("globalConcurrencyLimit"),
        max_active_async_runs_per_session=values.get("maxActiveAsyncRunsPerSession"),
        files=tuple(read),
        problems=tuple(problems),
    )


# -- agent files ---------------------------------------------------------------------------------


class _Invalid(Exception):
    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.message, self.key = message, key


def _names(value: Any, what: str, key: str) -> tuple[str, ...]:
    """A list of names written as a YAML list or a comma-separated string."""
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise _Invalid(f"{what} must be a list of names or a comma-separated string", key)
    if not all(isinstance(item, str) for item in items):
        raise _Invalid(f"{what} must contain only strings", key)
    return tuple(name for name in (item.strip() for item in items) if name)


def _optional_text(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{key} must be a non-empty string", key)
    return value.strip()


def _thinking(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if value not in THINKING_LEVELS:
        raise _Invalid(f"{key} must be one of {', '.join(THINKING_LEVELS)} (got {value!r})", key)
    return str(value)


def _key_line(content: str, key: str) -> int:
    """The 0-based line of a top-level frontmatter `key:` (0 when not found)."""
    for number, line in enumerate(content.replace("\r\n", "\n").split("\n")):
        if number > 0 and line.rstrip() == "---":
            break
        if re.match(rf"{re.escape(key)}\s*:", line):
            return number
    return 0


def _definition(content: str, path: Path | None, source: AgentSource) -> AgentDefinition:
    try:
        meta, body = _parse_frontmatter(content)
    except WorkflowError as error:
        raise _Invalid(error.message.removeprefix("Invalid role frontmatter: ").split("\n")[0]) from None
    if not isinstance(meta, dict) or not meta:
        raise _Invalid("no YAML frontmatter with name and description; not an agent")
    name = meta.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Invalid("frontmatter needs a non-empty name", "name")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _Invalid(f"agent {name.strip()} needs a non-empty description", "description")
    tools = _names(meta["tools"], "tools", "tools") if meta.get("tools") is not None else None
    return AgentDefinition(
        name=name.strip(),
        description=description.strip(),
        system_prompt=body,
        model=_optional_text(meta, "model"),
        thinking=_thinking(meta, "thinking"),
        tools=tools,
        fallback_models=_names(meta.get("fallbackModels") or [], "fallbackModels", "fallbackModels"),
        source=source,
        path=path,
        line=_key_line(content, "name"),
        aliases=_names(meta.get("aliases") or [], "aliases", "aliases"),
        max_thinking=_thinking(meta, "maxThinking"),
        extra={key: value for key, value in meta.items() if key in EXTRA_FIELDS},
    )


def _markdown_files(root: Path, problems: list[AgentProblem]) -> Iterator[Path]:
    """`root/**/*.md` in a stable order, directory links not followed, capped per root."""
    if not root.is_dir():
        return
    found: list[Path] = []
    for directory, subdirectories, files in os.walk(root, onerror=None):
        subdirectories.sort()
        found.extend(Path(directory) / name for name in sorted(files) if name.endswith(".md") and name != ".md")
        if len(found) > _MAX_FILES_PER_ROOT:
            problems.append(AgentProblem(root, 0, f"more than {_MAX_FILES_PER_ROOT} Markdown files; the rest are "
                                                  "not read as agents"))
            break
    yield from sorted(found)[:_MAX_FILES_PER_ROOT]


def _read_layer(root: Path, source: AgentSource, problems: list[AgentProblem]) -> dict[str, AgentDefinition]:
    layer: dict[str, AgentDefinition] = {}
    for path in _markdown_files(root, problems):
        if path.name == "SKILL.md":
            continue
        try:
            content = read_bytes(path, CONFIG_LIMIT).decode("utf-8", errors="replace")
        except (OSError, FileRefused) as error:
            problems.append(AgentProblem(path, 0, f"cannot read: {node_error_text(error, str(path))}"))
            continue
        try:
            agent = _definition(content, path, source)
        except _Invalid as error:
            line = _key_line(content, error.key) if error.key else 0
            problems.append(AgentProblem(path, line, f"{error.message}; this file is skipped"))
            continue
        earlier = layer.get(agent.name)
        if earlier is not None:
            problems.append(AgentProblem(path, agent.line, f"agent {agent.name} is also defined in {earlier.path}; "
                                                           "this file is skipped (rename one of them)"))
            continue
        layer[agent.name] = agent
    return layer


def _apply_override(agent: AgentDefinition, override: AgentOverride | None) -> AgentDefinition:
    """Fill the fields the definition leaves unset from `agentOverrides` (spec B precedence)."""
    if override is None or not override.fields:
        return agent
    values: dict[str, Any] = {}
    filled: list[str] = []
    try:
        for key, value in override.fields.items():
            attribute = {"maxThinking": "max_thinking", "fallbackModels": "fallback_models"}.get(key, key)
            if getattr(agent, attribute) not in (None, ()):
                continue
            if key in ("thinking", "maxThinking"):
                values[attribute] = _thinking({key: value}, key)
            elif key in ("tools", "fallbackModels"):
                values[attribute] = _names(value, key, key)
            else:
                values[attribute] = _optional_text({key: value}, key)
            filled.append(key)
    except _Invalid:
        return agent
    return replace(agent, **values, overridden=tuple(filled))


def _override_problems(settings: SubagentSettings) -> Iterator[AgentProblem]:
    where = settings.files[-1] if settings.files else Path(SETTINGS_FILE_NAME)
    for name, override in settings.agent_overrides.items():
        for key, value in override.fields.items():
            try:
                if key in ("thinking", "maxThinking"):
                    _thinking({key: value}, key)
                elif key in ("tools", "fallbackModels"):
                    _names(value, key, key)
                else:
                    _optional_text({key: value}, key)
            except _Invalid as error:
                yield AgentProblem(where, 0, f"subagents.agentOverrides.{name}: {error.message}; the override is "
                                             "ignored")
                break


def load_agent_catalog(
    project_root: Path, *, agent_dir: Path, trusted: bool, settings: SubagentSettings | None = None
) -> AgentCatalog:
    """Every agent this project's children may use (see the module docstring); never raises for
    a bad file: it is skipped and reported in `problems`."""
    settings = settings if settings is not None else load_subagent_settings(agent_dir, project_root, trusted=trusted)
    problems: list[AgentProblem] = list(settings.problems)
    merged = _read_layer(BUILTIN_AGENTS_DIR, "builtin", problems)
    roots: list[tuple[Path, AgentSource]] = []
    if settings.agent_scope in ("user", "both"):
        roots.append((agent_dir / "agents", "user"))
    if trusted and settings.agent_scope in ("project", "both"):
        roots += [(project_root / ".agents", "project"), (project_root / ".pi" / "agents", "project")]
    for root, source in roots:
        merged.update(_read_layer(root, source, problems))
    problems.extend(_override_problems(settings))
    discovered = {name: _apply_override(agent, settings.agent_overrides.get(name)) for name, agent in merged.items()}
    disabled = frozenset(
        name for name in discovered if (override := settings.agent_overrides.get(name)) and override.disabled
    )
    enabled = {name: agent for name, agent in discovered.items() if name not in disabled}
    return AgentCatalog(enabled, disabled, tuple(problems), discovered, settings)


# -- model resolution ----------------------------------------------------------------------------

_DATE_STAMP: Final = re.compile(r"[-_.@]?(?:\d{8}|\d{4}-\d{2}-\d{2})$")
_WORD: Final = re.compile(r"[A-Za-z]+")


def _normalized(model_id: str) -> str:
    """A model id for bare matching: case, separators and a trailing date stamp ignored."""
    return re.sub(r"[^a-z0-9]", "", _DATE_STAMP.sub("", model_id.lower()))


@dataclass(frozen=True)
class ChildModel:
    """The model a child runs with: `model` is `provider/id`; `source` says which setting chose it."""

    model: str
    thinking: str | None
    source: ModelSource
    fallback_models: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.model if self.thinking is None else f"{self.model}:{self.thinking}"


def _unknown(requested: str, alternative: str | None, detail: str = "") -> WorkflowError:
    message = f"Unknown subagent model '{requested}' in the active Pi model registry."
    if alternative:
        message += f" Did you mean '{alternative}'?"
    return WorkflowError("UNKNOWN_MODEL", message + detail)


def _closest(wanted: str, known: Collection[str]) -> str | None:
    """A did-you-mean: the same id on another provider, else the closest known model."""
    model_id = wanted.partition("/")[2] or wanted
    same = sorted(ref for ref in known if _normalized(ref.partition("/")[2]) == _normalized(model_id))
    if same:
        return same[0]
    close = difflib.get_close_matches(wanted, sorted(known), n=1, cutoff=0.6) or difflib.get_close_matches(
        model_id, sorted(ref.partition("/")[2] for ref in known), n=1, cutoff=0.6
    )
    if not close:
        return None
    return close[0] if close[0] in known else next(ref for ref in sorted(known) if ref.endswith("/" + close[0]))


def split_thinking(value: str, known: Collection[str] = ()) -> tuple[str, str | None]:
    """`(model, thinking)` of `model[:level]`; an exact known id containing `:` is kept whole. A
    word suffix that is no thinking level is an error naming the seven levels."""
    if value in known or ":" not in value:
        return value, None
    model, _, suffix = value.rpartition(":")
    if suffix in THINKING_LEVELS:
        return model, suffix
    if _WORD.fullmatch(suffix):
        raise WorkflowError(
            "UNKNOWN_MODEL",
            f"Invalid thinking level '{suffix}' in subagent model '{value}'; use one of {', '.join(THINKING_LEVELS)}.",
        )
    return value, None


def resolve_subagent_model(
    value: str,
    *,
    known: Collection[str] | None,
    current_provider: str | None = None,
    agent_names: Collection[str] = (),
) -> tuple[str, str | None]:
    """`(provider/id, thinking)` for a model string of a child (spec B), or `UNKNOWN_MODEL`.

    `known` is None without a model registry: a qualified id is then taken as written, and a bare
    id is qualified with the current provider.
    """
    model, thinking = split_thinking(value.strip(), known or ())
    known_set = frozenset(known or ())
    if model in known_set:
        return model, thinking
    if "/" not in model and model in agent_names:
        raise _unknown(
            value, None, f" '{model}' is an agent name, not a model id: copy an exact provider/id from the "
            "registry (piflow doctor lists them).",
        )
    if known is None:
        if "/" in model:
            return model, thinking
        if current_provider:
            return f"{current_provider}/{model}", thinking
        raise _unknown(value, None, " Use an exact provider/id.")
    if "/" in model:
        provider, _, model_id = model.partition("/")
        same = [ref for ref in known_set if ref.startswith(provider + "/")
                and _normalized(ref.partition("/")[2]) == _normalized(model_id)]  # fmt: skip
        if len(same) == 1:
            return same[0], thinking
        raise _unknown(value, _closest(model, known_set - {model}))
    exact = [ref for ref in known_set if ref.partition("/")[2] == model]
    matches = exact or [ref for ref in known_set if _normalized(ref.partition("/")[2]) == _normalized(model)]
    if len(matches) == 1:
        return matches[0], thinking
    on_current = [ref for ref in matches if current_provider and ref.startswith(current_provider + "/")]
    if len(on_current) == 1:
        return on_current[0], thinking
    if matches:
        listed = ", ".join(f"'{ref}'" for ref in sorted(matches))
        raise WorkflowError(
            "UNKNOWN_MODEL",
            f"Ambiguous subagent model '{value}' in the active Pi model registry: it matches {listed}. "
            "Use an exact provider/id.",
        )
    raise _unknown(value, _closest(model, known_set))


def _cap(thinking: str | None, ceiling: str | None) -> str | None:
    if thinking is None or ceiling is None:
        return thinking
    return THINKING_LEVELS[min(THINKING_LEVELS.index(thinking), THINKING_LEVELS.index(ceiling))]


def resolve_child_model(
    requested: str | None,
    definition: AgentDefinition | None,
    *,
    catalog: AgentCatalog,
    availability: ModelAvailability,
    parent_model: str | None = None,
) -> ChildModel:
    """The model and thinking of one child (spec B).

    Precedence: the run's `model` param, the agent's frontmatter (`agentOverrides` already filled
    it when unset), `subagents.defaultModel`, then the parent's model (`parent_model`, default the
    launching model); `"inherit"` anywhere means the parent's. A `:level` suffix on the chosen
    string beats the agent's `thinking`; `maxThinking` caps the result.
    """
    parent = parent_model or availability.launch_model
    parent_name = split_thinking(parent, availability.known)[0]
    current_provider = parent_name.partition("/")[0] if "/" in parent_name else None
    known = availability.known if availability.verified else None
    overridden = definition is not None and "model" in definition.overridden
    candidates: list[tuple[str | None, ModelSource]] = [
        (requested, "run"),
        (definition.model if definition else None, "override" if overridden else "agent"),
        (catalog.settings.default_model, "default"),
    ]
    parent_source: ModelSource = "parent"
    chosen, source = next(((value, src) for value, src in candidates if value), (None, parent_source))

    def resolve(value: str) -> tuple[str, str | None]:
        return resolve_subagent_model(value, known=known, current_provider=current_provider,
                                      agent_names=catalog.names)  # fmt: skip

    if chosen is None or chosen.strip() == INHERIT:
        model, thinking = parent_name, None
    else:
        model, thinking = resolve(chosen)
    if thinking is None and definition is not None:
        thinking = definition.thinking
    fallbacks = tuple(resolve(item)[0] for item in (definition.fallback_models if definition else ()))
    return ChildModel(model, _cap(thinking, definition.max_thinking if definition else None), source, fallbacks)


_PROVIDER_FAILURE: Final = re.compile(
    r"\b(?:quota|rate[ _-]?limit(?:ed)?|too many requests|overloaded|overload|unauthori[sz]ed|authentication|"
    r"invalid api key|forbidden|401|403|429|5\d\d|service unavailable|unavailable|bad gateway|gateway timeout|"
    r"connection (?:refused|reset|error|failed)|econnrefused|econnreset|enotfound|network error|"
    r"internal server error)\b",
    re.IGNORECASE,
)
_NOT_PROVIDER: Final = re.compile(r"context (?:length|window|overflow)|maximum context|timed out|timeout|tool budget",
                                  re.I)


def is_provider_failure(message: str) -> bool:
    """Whether an attempt's error is a provider failure (the only case `fallbackModels` apply to)."""
    return _NOT_PROVIDER.search(message) is None and _PROVIDER_FAILURE.search(message) is not None
