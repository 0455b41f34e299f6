"""The tools pi really offers a project (built-ins and extension tools), as last probed, and how to find pi.

pi has no command that lists its tools, so the `pi` backend asks a pi session (see
`engine/backends/pi.py`, `probe_pi_tools`) and the answer is cached in piflow's state dir
(`$XDG_STATE_HOME/piflow/pi-tools/<agent dir + project>.json`, never in pi's own files). The cache
is keyed by a fingerprint of what decides pi's tool list: the pi executable (path and mtime: an
upgrade rewrites it), pi's settings files and every file under its extension directories (agent
dir and project). A stale or missing cache reads as "unknown", and callers fall back to pi's
built-ins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from piflow.config.availability import PI_BUILTIN_TOOLS
from piflow.config.files import FileRefused, read_text
from piflow.config.paths import global_settings_path, project_settings_path, state_dir
from piflow.errors import WorkflowError

__all__ = [
    "PI_BUILTIN_TOOLS", "PI_PACKAGE", "PiCommand", "PiTool", "PiToolList", "cached_pi_tools", "find_pi",
    "pi_tools_fingerprint", "save_pi_tools",
]

PI_PACKAGE: Final = "@earendil-works/pi-coding-agent"
COMMAND_VARIABLE: Final = "PIFLOW_PI_COMMAND"
INSTALL_HINT: Final = (
    f"install it with `npm install -g {PI_PACKAGE}` (it needs Node.js 22.19 or newer) "
    f"or set {COMMAND_VARIABLE} to a command that runs it"
)
NPX_FALLBACK: Final = ("npx", "--no-install", f"--package={PI_PACKAGE}", "pi")
_CACHE_LIMIT: Final = 1024 * 1024
_MAX_WATCHED_FILES: Final = 5000
_SKIPPED_DIRS: Final = frozenset({"node_modules", ".git"})


@dataclass(frozen=True)
class PiCommand:
    """How to start pi; `via_npx` marks the fallback, whose failure to start means "not installed"."""

    argv: tuple[str, ...]
    via_npx: bool = False


def find_pi(environ: Mapping[str, str]) -> PiCommand:
    """`$PIFLOW_PI_COMMAND`, else `pi` on PATH, else npx's local or global install of pi."""
    configured = environ.get(COMMAND_VARIABLE, "").strip()
    if configured:
        return PiCommand(tuple(shlex.split(configured)))
    path = environ.get("PATH", os.defpath)
    found = shutil.which("pi", path=path)
    if found is not None:
        return PiCommand((found,))
    npx = shutil.which("npx", path=path)
    if npx is not None:
        return PiCommand((npx, *NPX_FALLBACK[1:]), via_npx=True)
    missing = f"The pi CLI was not found ({COMMAND_VARIABLE} is unset and neither pi nor npx is on PATH)"
    raise WorkflowError("CONFIG_ERROR", f"{missing}: {INSTALL_HINT}")


@dataclass(frozen=True)
class PiTool:
    """One tool of pi's: `source` is pi's `sourceInfo.source` (`builtin`, or where an extension came
    from), `path` its `sourceInfo.path` (the extension's file)."""

    name: str
    source: str
    path: str


@dataclass(frozen=True)
class PiToolList:
    """What a probe saw, and the fingerprint it is valid for; `current` is False when something changed since."""

    tools: tuple[PiTool, ...]
    fingerprint: str
    current: bool = True

    @property
    def names(self) -> frozenset[str]:
        return frozenset(tool.name for tool in self.tools)


def _cache_path(agent_dir: Path, project_root: Path, environ: Mapping[str, str] | None) -> Path:
    key = hashlib.sha256(os.fsencode(f"{agent_dir.resolve()}\0{project_root.resolve()}")).hexdigest()[:16]
    return state_dir(environ) / "pi-tools" / f"{key}.json"


def _watched_files(agent_dir: Path, project_root: Path) -> Iterator[Path]:
    """The files whose change can change pi's tools: settings, extension dirs, installed packages, and
    the workflow settings holding `disabledAgentResources` (the probe leaves disabled extensions out)."""
    yield global_settings_path(agent_dir)
    yield project_settings_path(project_root)
    for base in (agent_dir, project_root / ".pi"):
        yield base / "settings.json"
        for directory in (base / "extensions", base / "npm", base / "git"):
            yield directory
            for root, dirs, files in os.walk(directory):
                dirs[:] = sorted(name for name in dirs if name not in _SKIPPED_DIRS)
                yield from (Path(root) / name for name in sorted(files))
                yield from (Path(root) / name for name in dirs)


def _settings_extensions(agent_dir: Path, project_root: Path) -> Iterator[Path]:
    """Local paths settings.json's `extensions` lists (pi loads them besides the discovered ones)."""
    for base in (agent_dir, project_root / ".pi"):
        try:
            settings = json.loads(read_text(base / "settings.json", _CACHE_LIMIT))
        except (OSError, FileRefused, ValueError):
            continue
        entries = settings.get("extensions") if isinstance(settings, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, str):
                path = Path(os.path.expanduser(entry))
                yield path if path.is_absolute() else base / path


def pi_tools_fingerprint(command: PiCommand, agent_dir: Path, project_root: Path) -> str:
    """A digest of everything that decides which tools pi offers in `project_root` (see the module doc)."""
    digest = hashlib.sha256()
    executable = shutil.which(command.argv[0]) or command.argv[0]
    stamped = [Path(executable).resolve()]
    stamped += [*_watched_files(agent_dir, project_root), *_settings_extensions(agent_dir, project_root)]
    digest.update(json.dumps(command.argv).encode())
    for count, path in enumerate(stamped):
        if count > _MAX_WATCHED_FILES:
            break
        try:
            stat = path.stat()
        except OSError:
            continue
        digest.update(os.fsencode(path) + f"\0{stat.st_mtime_ns}\0{stat.st_size}\n".encode())
    return digest.hexdigest()


def cached_pi_tools(
    agent_dir: Path, project_root: Path, environ: Mapping[str, str] | None = None
) -> PiToolList | None:
    """The last probe's tools (`current` says whether they still hold), None without one.

    Checks use a stale list rather than the built-ins: it is the best knowledge until the next probe
    (`piflow doctor`, a launch on pi, the editor in the background), and usually still right.
    """
    env = os.environ if environ is None else environ
    try:
        data = json.loads(read_text(_cache_path(agent_dir, project_root, env), _CACHE_LIMIT))
        tools = tuple(PiTool(str(t["name"]), str(t["source"]), str(t["path"])) for t in data["tools"])
        saved = str(data["fingerprint"])
    except (OSError, FileRefused, ValueError, KeyError, TypeError):
        return None
    try:
        current = pi_tools_fingerprint(find_pi(env), agent_dir, project_root) == saved
    except WorkflowError:  # pi is gone: what it offered last is all there is to say
        current = False
    return PiToolList(tools, saved, current)


def save_pi_tools(
    tools: PiToolList, agent_dir: Path, project_root: Path, environ: Mapping[str, str] | None = None
) -> Path:
    """Cache a probe's answer (written whole, then renamed, so a reader never sees half a file)."""
    path = _cache_path(agent_dir, project_root, environ)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {"fingerprint": tools.fingerprint,
            "tools": [{"name": t.name, "source": t.source, "path": t.path} for t in tools.tools]}
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(data, indent=1), encoding="utf-8")
    partial.replace(path)
    return path
