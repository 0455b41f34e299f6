"""Projects as the server sees them: configuration per project root, loaded off the loop, kept current.

A script belongs to the project `piflow run` would give it (the nearest `piflow.toml` directory,
else the script's directory), so the editor checks it against the same settings, roles and models
and shares the same run store. Configurations are loaded tolerantly (a broken file becomes a
problem to show, not an exception) in a worker thread, cached, and dropped when a file they were
read from changes: through `workspace/didChangeWatchedFiles` (registered dynamically where the
client allows it), through saves in the editor, and otherwise by polling the few files involved.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from piflow.analysis.capabilities import Capabilities
from piflow.config import PiflowConfig, RoleDefinition, load_config, resolve_model_reference
from piflow.config.json_text import JsonSyntaxError, parse_json_document
from piflow.config.paths import (
    PROJECT_CONFIG_NAME,
    WORKFLOWS_DIR_NAME,
    agent_dir,
    global_roles_dir,
    global_settings_path,
    models_registry_path,
    user_config_path,
)
from piflow.config.project import matches_globs
from piflow.engine.environment import project_root, store_path
from piflow.errors import WorkflowError
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.snapshot import DocumentKind

if TYPE_CHECKING:
    from piflow.server.documents import OpenDocument

log = logging.getLogger(__name__)

POLL_SECONDS: Final = 2.0
SCRIPT_SUFFIXES: Final = (".js", ".mjs", ".cjs")
"""Changes of these files concern the scripts on disk (see `workspace_problems`), not the configuration."""
_WATCH_ID: Final = "piflow-config-files"
_generations = itertools.count(1)
Signature = tuple[tuple[str, int, int], ...]
"""A watched file's (path, mtime_ns, size), or each of a directory's files'."""


@dataclass(frozen=True)
class ModelInfo:
    """A model reference as the project resolves it (`resolved` keeps a thinking suffix)."""

    requested: str
    resolved: str | None
    alias_target: str | None
    available: bool
    verified: bool
    """False when no model registry is configured: availability cannot be known."""
    error: str | None


@dataclass(frozen=True, eq=False)
class Project:
    """One project's configuration at one moment; `generation` changes whenever it is reloaded."""

    root: Path
    generation: int
    config: PiflowConfig | None
    capabilities: Capabilities
    problems: tuple[WorkflowError, ...] = ()
    store: Path | None = None
    watched: dict[Path, Signature] = field(default_factory=dict)
    """The signature of each of `watched_files(root)` taken just before the configuration was read:
    the baseline a polling server compares with, so a change made after the read is never missed."""

    def is_script(self, path: str | None) -> bool:
        """Whether `[piflow] scripts` (or `[dialects]`) globs of the project name this file a workflow script."""
        if path is None or self.config is None:
            return False
        project = self.config.project
        return matches_globs(self.root, path, project.scripts) or project.dialect_for(path) is not None

    def resolve_model(self, requested: str) -> ModelInfo:
        """What a `model:` string means here: its alias target, the model it resolves to, availability."""
        caps = self.capabilities
        alias = caps.model_aliases.get(requested)
        try:
            ref = resolve_model_reference(requested, caps.model_aliases, caps.resolvable_models, caps.settings_path)
        except WorkflowError as error:
            return ModelInfo(requested, None, alias, False, caps.verified_models, error.message)
        return ModelInfo(requested, str(ref), alias, ref.name in caps.models, caps.verified_models, None)

    def role(self, name: str) -> tuple[RoleDefinition, Path] | None:
        if self.config is None or name not in self.config.roles:
            return None
        role = self.config.roles.get(name)
        path = self.config.roles.paths.get(name)
        return (role, path) if role is not None and path is not None else None

    def alias_location(self, name: str) -> tuple[Path, int, int] | None:
        """Where an alias is defined in the settings file: path, 0-based line and UTF-16 column."""
        if self.config is None or name not in self.capabilities.model_aliases:
            return None
        path = self.config.settings_path
        try:
            document = parse_json_document(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, JsonSyntaxError):
            return None
        location = document.key_locations.get(("modelAliases", name))
        return None if location is None else (path, location.line - 1, location.column - 1)

    def model_location(self, ref: str) -> tuple[Path, int, int] | None:
        """Where a `provider/model` is configured in models.json."""
        registry = self.config.registry if self.config is not None else None
        if registry is None or registry.document is None or registry.path is None:
            return None
        provider_name, _, model_id = ref.partition("/")
        provider = registry.provider(provider_name)
        if provider is None:
            return None
        for position, model in enumerate(provider.models):
            if model.id == model_id:
                location = registry.document.location(("providers", provider_name, "models", position))
                if location is not None:
                    return registry.path, location.line - 1, location.column - 1
        return None


def watched_files(root: Path) -> list[Path]:
    """Files whose change makes a project's configuration stale (role directories are listed too)."""
    environ = os.environ
    agent = agent_dir(environ)
    return [
        root / PROJECT_CONFIG_NAME,
        user_config_path(environ),
        global_settings_path(agent),
        models_registry_path(agent),
        global_roles_dir(agent),
        root / ".pi" / WORKFLOWS_DIR_NAME / "settings.json",
        root / ".pi" / WORKFLOWS_DIR_NAME / "roles",
        agent / "extensions",  # pi extension tools (see config/pi_tools.py)
        root / ".pi" / "extensions",
    ]


def load_project(root: Path) -> Project:
    """Worker thread: read a project's configuration tolerantly (never raises for a broken file)."""
    generation = next(_generations)
    watched = _signatures(watched_files(root))
    try:
        config = load_config(root, tolerant=True)
    except WorkflowError as error:  # tolerant loads collect problems; this is a last resort
        return Project(root, generation, None, Capabilities.create(verified_models=False), (error,), watched=watched)
    try:
        store: Path | None = store_path(str(root), tolerant=True)
    except (WorkflowError, OSError):
        store = None
    from piflow.engine.extensions import installed_tool_names

    problems = config.problems
    try:
        tools = installed_tool_names()
    except WorkflowError as error:  # a broken extension fails every launch: say so, as for a broken file
        tools, problems = frozenset(), (*problems, error)
    return Project(root, generation, config, Capabilities.from_config(config, extension_tools=tools), problems, store,
                   watched)


@dataclass
class _Poll:
    seen: dict[Path, Signature] = field(default_factory=dict)
    """Each watched file's signature as last seen (first: as its project's configuration was read)."""
    task: asyncio.Task[None] | None = None


class Projects(LanguageFeature):
    """The configuration cache and the file watching that keeps it honest."""

    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._projects: dict[Path, asyncio.Future[Project]] = {}
        self._poll = _Poll()
        self._pi_probes: dict[Path, asyncio.Task[None]] = {}
        """Roots whose pi tools were probed since the last configuration change (a failing probe is
        retried only after one)."""

    def register(self) -> None:
        self.server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(handler(self._watched_files_changed))

    # -- lookups --------------------------------------------------------------------------------
    def root_for(self, path: str | None) -> Path:
        """The project root of a file (the same rule as `piflow run`)."""
        if path is None:
            return Path.cwd()
        return Path(project_root(os.path.dirname(path)))

    async def for_path(self, path: str | None) -> Project:
        return await self.get(self.root_for(path))

    async def get(self, root: Path) -> Project:
        """The project at `root`, loading it once (concurrent callers share the load)."""
        future = self._projects.get(root)
        if future is None:
            future = asyncio.ensure_future(self.server.run_in_thread(load_project, root))
            self._projects[root] = future
            future.add_done_callback(lambda done: self._loaded(root, done))
        return await asyncio.shield(future)

    def _loaded(self, root: Path, future: asyncio.Future[Project]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._projects.pop(root, None)  # try again next time
            return
        project = future.result()
        for path, signature in project.watched.items():
            self._poll.seen.setdefault(path, signature)  # a file seen before keeps what was seen then
        config = project.config
        if config is not None and config.project.backend == "pi" and root not in self._pi_probes and (
            config.pi_tools is None or not config.pi_tools.current
        ):
            self._pi_probes[root] = asyncio.ensure_future(self._probe_pi_tools(config))

    async def _probe_pi_tools(self, config: PiflowConfig) -> None:
        """Off the typing path: ask pi which tools it offers (the cache was stale), then check again."""
        from piflow.engine.backends.pi import current_pi_tools

        try:
            tools = await current_pi_tools(config.agent_dir, config.project_root, config.resource_policy, refresh=True)
        except WorkflowError as error:
            log.info("cannot ask pi for its tools: %s", error.message)
            return
        if config.pi_tools is None or tools.names != config.pi_tools.names:
            probes = dict(self._pi_probes)
            self.invalidate("pi's tools probed")
            self._pi_probes.update(probes)

    # -- invalidation ---------------------------------------------------------------------------
    def invalidate(self, reason: str) -> None:
        """Forget every configuration and check every open document (and the workspace) again."""
        from piflow.server.documents import DocumentTable

        log.info("configuration changed (%s): checking open documents again", reason)
        self._projects.clear()
        self._pi_probes.clear()
        documents = self.server.get_feature(DocumentTable)
        for document in documents:
            documents.recheck(document)
        self.server.dispatch("workspace_changed", None)

    def document_saved(self, document: OpenDocument) -> None:
        if document.kind not in (DocumentKind.SCRIPT, DocumentKind.OTHER):
            self.invalidate(f"saved {document.uri}")

    def _watched_files_changed(self, params: types.DidChangeWatchedFilesParams) -> None:
        """Configuration files reload the configuration; scripts on disk are the workspace's to check."""
        scripts = [change for change in params.changes if change.uri.endswith(SCRIPT_SUFFIXES)]
        configuration = [change for change in params.changes if not change.uri.endswith(SCRIPT_SUFFIXES)]
        if configuration:
            self.invalidate(", ".join(change.uri for change in configuration[:3]))
        paths = [path for change in scripts if (path := to_fs_path(change.uri))]
        if paths:
            self.server.dispatch("workspace_changed", paths)

    # -- watching -------------------------------------------------------------------------------
    def initialized(self) -> None:
        if self.server.client_supports("workspace.did_change_watched_files.dynamic_registration"):
            self.server.spawn(self._register_watchers())
        else:
            self._poll.task = self.server.spawn(self._poll_files())

    def _watchers(self) -> list[types.FileSystemWatcher]:
        environ = os.environ
        agent = agent_dir(environ)
        relative = self.server.client_supports("workspace.did_change_watched_files.relative_pattern_support")

        def watch(base: Path, pattern: str) -> types.FileSystemWatcher:
            if relative:
                uri = from_fs_path(str(base)) or str(base)
                return types.FileSystemWatcher(glob_pattern=types.RelativePattern(base_uri=uri, pattern=pattern))
            return types.FileSystemWatcher(glob_pattern=f"{base.as_posix()}/{pattern}")

        watchers = [
            watch(agent, f"{WORKFLOWS_DIR_NAME}/**"),
            watch(agent, "models.json"),
            watch(user_config_path(environ).parent, "config.toml"),
        ]
        watchers.append(types.FileSystemWatcher(glob_pattern=f"**/{PROJECT_CONFIG_NAME}"))
        watchers.append(types.FileSystemWatcher(glob_pattern=f"**/.pi/{WORKFLOWS_DIR_NAME}/**"))
        watchers.append(types.FileSystemWatcher(glob_pattern="**/*.{" + ",".join(s[1:] for s in SCRIPT_SUFFIXES) + "}"))
        return watchers

    async def _register_watchers(self) -> None:
        """Background task: the registration is a request to the client, never awaited by a handler."""
        registration = types.Registration(
            id=_WATCH_ID,
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=self._watchers()),
        )
        try:
            await self.server.client_register_capability_async(types.RegistrationParams([registration]))
        except Exception as error:  # the client refused: fall back to polling
            log.info("file watcher registration refused (%s); polling configuration files", error)
            self._poll.task = self.server.spawn(self._poll_files())

    async def _poll_files(self) -> None:
        """For clients that cannot watch files for us: compare the files' stat signatures."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            seen = dict(self._poll.seen)
            if not seen:
                continue
            now = await self.server.run_in_thread(_signatures, list(seen))
            self._poll.seen.update(now)
            if now != seen:
                self.invalidate("a configuration file changed on disk")

    async def shutdown(self) -> None:
        if self._poll.task is not None:
            self._poll.task.cancel()


def _signatures(paths: Iterable[Path]) -> dict[Path, Signature]:
    """Modification time and size of each file, and of each file in each directory."""
    found: dict[Path, Signature] = {}
    for path in paths:
        entries: list[tuple[str, int, int]] = []
        try:
            if path.is_dir():
                for child in sorted(path.iterdir()):
                    stat = child.stat()
                    entries.append((str(child), stat.st_mtime_ns, stat.st_size))
            else:
                stat = path.stat()
                entries.append((str(path), stat.st_mtime_ns, stat.st_size))
        except OSError:
            entries.append((str(path), -1, -1))
        found[path] = tuple(entries)
    return found
