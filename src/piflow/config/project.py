"""piflow's own settings: `piflow.toml` at a project root and the user's `config.toml`.

These hold what pi's files do not: which backend runs agents, which files are workflow
scripts, where the run store lives, and whether a project's `.pi/` files are trusted. Both
files share one schema (`piflow_toml`, pydantic, unknown keys rejected); the user file may also list
trusted projects. Every problem is a CONFIG_ERROR `<file>:<line>: <what>`, with the line of
the offending key so editors and terminals can jump to it.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from piflow.config.files import CONFIG_LIMIT, FileRefused, InvalidUtf8, read_text
from piflow.config.paths import PROJECT_CONFIG_NAME, expand_home, user_config_path
from piflow.errors import WorkflowError
from piflow.lazy import export_lazily

if TYPE_CHECKING:
    from piflow.config.piflow_toml import PiflowFile

__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_SCRIPT_GLOBS",
    "BackendName",
    "PiflowFile",
    "ProjectConfig",
    "find_project_root",
    "load_project_config",
    "matches_globs",
    "read_piflow_file",
]

BackendName = Literal["scripted", "openai", "pi"]
DEFAULT_BACKEND: Final[BackendName] = "scripted"
DEFAULT_SCRIPT_GLOBS: Final = ("**/*.workflow.js",)

export_lazily(__name__, {"PiflowFile": "piflow.config.piflow_toml"})  # pydantic only when a file is read


@dataclass(frozen=True)
class ProjectConfig:
    """The effective piflow settings for one project: project file over user file over defaults."""

    project_root: Path
    project_file: Path | None = None
    user_file: Path | None = None
    backend: BackendName = DEFAULT_BACKEND
    model: str | None = None
    provider_backends: dict[str, BackendName] = field(default_factory=dict)
    scripts: tuple[str, ...] = DEFAULT_SCRIPT_GLOBS
    store: Path | None = None
    fixtures: Path | None = None
    model_aliases: dict[str, str] = field(default_factory=dict)
    """`[model_aliases]` of the user file, overridden by the project file's (defaults under pi's)."""
    trusted: bool = False
    trust_reason: str = "no piflow.toml or user setting trusts this project"
    executor: str = "embedded"
    temporal: dict[str, Any] = field(default_factory=dict)
    """`[temporal]` settings set in the project file, else the user file (key → value)."""
    dialects: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """`[dialects]`: dialect name → globs, each from the project file, else the user file."""

    def backend_for(self, provider: str) -> BackendName:
        """The backend for a model provider (`[backends.<provider>]`, else `[piflow] backend`)."""
        return self.provider_backends.get(provider, self.backend)

    def dialect_for(self, path: Path | str | None) -> str | None:
        """The dialect whose `[dialects]` globs name this file (None: none does, or no path)."""
        for dialect, globs in self.dialects.items():
            if path is not None and matches_globs(self.project_root, path, globs):
                return dialect
        return None


def matches_globs(root: Path, path: Path | str, globs: Sequence[str]) -> bool:
    """Whether project-relative globs name a file (`**/` also matches at the root); outside: never."""
    try:
        relative = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return False
    return any(fnmatch.fnmatchcase(relative, variant) for glob in globs for variant in _zero_directory_forms(glob))


def _zero_directory_forms(glob: str) -> Iterator[str]:
    """The glob, and its forms with any `**/` matching no directory (fnmatch's `*` spans `/` already)."""
    head, found, tail = glob.partition("**/")
    if not found:
        yield glob
        return
    for rest in _zero_directory_forms(tail):
        yield head + found + rest
        yield head + rest


def find_project_root(start: Path | str) -> Path | None:
    """The nearest directory at or above `start` (a file or directory) holding `piflow.toml`.

    Any `piflow.toml` counts, not only a regular file: reading a FIFO or a device there is then
    a clear error instead of the project silently losing its settings.
    """
    current = Path(start).resolve()
    if not current.is_dir():
        current = current.parent
    for directory in (current, *current.parents):
        if (directory / PROJECT_CONFIG_NAME).exists():
            return directory
    return None


_SYNTAX_POSITION: Final = re.compile(r"\s*\(at line (\d+), column \d+\)|\s*\(at end of document\)")


def read_piflow_file(path: Path, allow_trusted_projects: bool) -> PiflowFile | None:
    """Parse and validate one piflow TOML file; None when it does not exist."""
    read = _read_piflow_file(path, allow_trusted_projects)
    return read[0] if read else None


def _read_piflow_file(path: Path, allow_trusted_projects: bool) -> tuple[PiflowFile, str] | None:
    """The validated file and its text (for the lines of later errors); None when missing."""
    try:
        text = read_text(path, CONFIG_LIMIT)
    except FileNotFoundError:
        return None
    except InvalidUtf8 as error:
        raise WorkflowError("CONFIG_ERROR", str(error)) from None
    except FileRefused as error:
        raise WorkflowError("CONFIG_ERROR", f"{path}:1: cannot read: {error}") from None
    except OSError as error:
        raise WorkflowError("CONFIG_ERROR", f"{path}:1: cannot read: {error.strerror or error}") from None
    import tomllib  # a file to validate: only now pay for the parser and pydantic

    from pydantic import ValidationError

    from piflow.config.piflow_toml import PiflowFile

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        match = _SYNTAX_POSITION.search(message)
        line = int(match.group(1)) if match and match.group(1) else max(text.count("\n"), 1)
        what = _SYNTAX_POSITION.sub("", message)
        raise WorkflowError("CONFIG_ERROR", f"{path}:{line}: invalid TOML: {what}") from None
    if not allow_trusted_projects and "trusted_projects" in data:
        line = _key_line(text, ("trusted_projects",))
        raise WorkflowError(
            "CONFIG_ERROR",
            f"{path}:{line}: trusted_projects belongs in the user config, not in {PROJECT_CONFIG_NAME}",
        )
    try:
        parsed = PiflowFile.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        location = tuple(first["loc"])
        line = _key_line(text, location)
        raise WorkflowError("CONFIG_ERROR", f"{path}:{line}: {_describe(first, location)}") from None
    from piflow.config.settings import validate_model_aliases  # after the spawn: an owner needs only the store's place

    for name, target in parsed.model_aliases.items():
        try:
            validate_model_aliases({name: target}, str(path))
        except WorkflowError as error:
            line = _key_line(text, ("model_aliases", name))
            what = error.message.removesuffix(f" (settings: {path})")
            raise WorkflowError("CONFIG_ERROR", f"{path}:{line}: {what}") from None
    return parsed, text


def _describe(error: Mapping[str, Any], location: Sequence[Any]) -> str:
    dotted = ".".join(str(step) for step in location if not isinstance(step, int)) or "file"
    if error["type"] == "extra_forbidden":
        return f"unknown key {dotted}"
    if error["type"] == "literal_error":
        choices = ", ".join(f'"{choice}"' for choice in re.findall(r"'([^']*)'", error["ctx"]["expected"]))
        return f"{dotted} must be one of {choices}"
    message = str(error["msg"])
    return f"{dotted}: {message[:1].lower()}{message[1:]}"


_TABLE: Final = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY: Final = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_KEY_PART: Final = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _key_parts(text: str) -> tuple[str, ...]:
    return tuple(part.strip("\"'") for part in _KEY_PART.findall(text))


def _key_line(text: str, location: Sequence[Any]) -> int:
    """The 1-based line where the key at `location` (or its nearest parent) is written."""
    wanted = tuple(str(step) for step in location if not isinstance(step, int))
    best_line, best_depth = 1, -1
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            table = _key_parts(header.group(1))
            path = table
        else:
            key = _KEY.match(line)
            if not key:
                continue
            path = table + _key_parts(key.group(1))
        depth = len(path)
        if wanted[:depth] == path and depth > best_depth:
            best_line, best_depth = number, depth
            if depth == len(wanted):
                break
    return best_line


_PATH_KEYS: Final = {"store": ("piflow", "store"), "fixtures": ("scripted", "fixtures")}
"""The keys that choose where piflow writes (the store, and beside it worktrees and transcripts)
or what it reads as fixtures: a project file may point them outside the project only when the
user trusts the project."""


def _resolve_against(file: Path, value: str, environ: Mapping[str, str] | None) -> Path:
    expanded = Path(expand_home(value, environ))
    return (expanded if expanded.is_absolute() else file.parent / expanded).resolve()


def _outside_project(
    file: Path, text: str, key: str, setting: str, resolved: Path, root: Path, user_path: Path
) -> WorkflowError:
    dotted = ".".join(_PATH_KEYS[key])
    return WorkflowError(
        "CONFIG_ERROR",
        f"{file}:{_key_line(text, _PATH_KEYS[key])}: {dotted} = {json.dumps(setting)} is outside the project "
        f"{root} (resolved: {resolved}); a project's piflow.toml may choose paths outside the project only "
        f"when you trust it: add {json.dumps(str(root))} to trusted_projects in {user_path}",
    )


def _trusted_paths(user: tuple[PiflowFile, str] | None, user_path: Path) -> list[Path]:
    if user is None:
        return []
    paths = []
    for entry in user[0].trusted_projects or []:
        expanded = Path(expand_home(entry))
        if not expanded.is_absolute():
            line = _key_line(user[1], ("trusted_projects",))
            raise WorkflowError(
                "CONFIG_ERROR", f"{user_path}:{line}: trusted_projects entries must be absolute paths"
            )
        paths.append(expanded.resolve())
    return paths


def load_project_config(
    start: Path | str,
    environ: Mapping[str, str] | None = None,
    user_file: Path | None = None,
) -> ProjectConfig:
    """Gather piflow's settings for the project containing `start` (a file or directory).

    The project root is the nearest directory with `piflow.toml`, else `start` itself.
    Trust: a project is trusted when the user config lists it in `trusted_projects`, or its
    own piflow.toml says `trust_project = true`, or — when its piflow.toml says nothing —
    the user config's `[piflow] trust_project = true`. Otherwise it is not trusted. Paths the
    project file chooses (store, fixtures) must be inside the project unless the user config
    trusts it (`trusted_projects`, or `trust_project = true` there).
    """
    start_path = Path(start).resolve()
    found = find_project_root(start_path)
    root = found or (start_path if start_path.is_dir() else start_path.parent)
    project_path = root / PROJECT_CONFIG_NAME if found else None
    user_path = user_file if user_file is not None else user_config_path(environ)
    project_read = _read_piflow_file(project_path, allow_trusted_projects=False) if project_path else None
    user_read = _read_piflow_file(user_path, allow_trusted_projects=True)
    project = project_read[0] if project_read else None
    user = user_read[0] if user_read else None

    sources = [(file, path) for file, path in ((project, project_path), (user, user_path)) if file and path]

    def first(get: Callable[[PiflowFile], Any]) -> tuple[Any, Path] | None:
        """The first value set in the project file, then the user file, with the file it is in."""
        for file, path in sources:
            value = get(file)
            if value is not None:
                return value, path
        return None

    trusted, reason = False, "no piflow.toml or user setting trusts this project"
    listed = root in _trusted_paths(user_read, user_path)
    if listed:
        trusted, reason = True, f"listed in trusted_projects of {user_path}"
    elif project is not None and project.piflow.trust_project is not None:
        trusted = project.piflow.trust_project
        reason = f"trust_project = {str(trusted).lower()} in {project_path}"
    elif user is not None and user.piflow.trust_project is not None:
        trusted = user.piflow.trust_project
        reason = f"trust_project = {str(trusted).lower()} in {user_path}"

    backend = first(lambda file: file.piflow.backend)
    model = first(lambda file: file.piflow.model)
    scripts = first(lambda file: file.piflow.scripts)
    # A project's own `trust_project = true` covers its .pi/ files, which live inside it; only
    # the user can let it choose paths outside it.
    user_trusted = listed or (user is not None and user.piflow.trust_project is True)

    def place(key: str, value: tuple[str, Path] | None) -> Path | None:
        """A path setting resolved against its file (symbolic links too), confined to the project
        when it comes from the project file of a project the user does not trust."""
        if value is None:
            return None
        setting, file = value
        resolved = _resolve_against(file, setting, environ)
        if project_read is None or file != project_path or user_trusted or resolved.is_relative_to(root):
            return resolved
        raise _outside_project(file, project_read[1], key, setting, resolved, root, user_path)

    store = place("store", first(lambda file: file.piflow.store))
    fixtures = place("fixtures", first(lambda file: file.scripted.fixtures))
    backends: dict[str, BackendName] = {}
    aliases: dict[str, str] = {}
    for file, _ in reversed(sources):
        backends.update({name: entry.backend for name, entry in file.backends.items()})
        aliases.update(file.model_aliases)
    executor = first(lambda file: file.piflow.executor)
    temporal: dict[str, Any] = {}
    for key in ("address", "namespace", "task_queue", "tls", "api_key_env", "worktrees"):
        setting = first(lambda file, key=key: getattr(file.temporal, key))  # type: ignore[misc]
        if setting is not None:
            temporal[key] = setting[0]
    dialects: dict[str, tuple[str, ...]] = {}
    for key, name in (("pi_subagents", "pi-subagents"), ("pi_extensible_workflows", "pi-extensible-workflows")):
        globs = first(lambda file, key=key: getattr(file.dialects, key))  # type: ignore[misc]
        if globs is not None:
            dialects[name] = tuple(globs[0])
    return ProjectConfig(
        dialects=dialects,
        executor=executor[0] if executor else "embedded",
        temporal=temporal,
        project_root=root,
        project_file=project_path,
        user_file=user_path if user is not None else None,
        backend=backend[0] if backend else DEFAULT_BACKEND,
        model=model[0] if model else None,
        provider_backends=backends,
        scripts=tuple(scripts[0]) if scripts else DEFAULT_SCRIPT_GLOBS,
        store=store,
        fixtures=fixtures,
        model_aliases=aliases,
        trusted=trusted,
        trust_reason=reason,
    )


def schema_text() -> str:
    """`schemas/piflow.toml.schema.json` as it must read (a test fails when the file drifts).

    Regenerate with `python -c "from piflow.config.project import schema_text; print(schema_text(), end='')"`.
    """
    from piflow.config.piflow_toml import generated_schema

    return json.dumps(generated_schema(), indent=2, ensure_ascii=False) + "\n"
