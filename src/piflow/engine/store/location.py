"""Where a project's run store lives, and creating it private to the user (spec G.1 layout).

Runs hold prompts, results and launch snapshots, so every directory piflow creates on the way
is 0700 and the database file is 0600 (SQLite gives its `-wal` and `-shm` files the mode of the
database file).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from piflow.config.paths import state_dir

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_store_path(cwd: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/piflow/projects/<slug>-<sha256(resolved cwd)[:12]>/runs.db`.

    The slug keeps the directory readable; the hash keeps two projects with the same basename
    apart. A project reached through a symlink shares the store of its resolved path.
    """
    resolved = Path(cwd).resolve()
    slug = _UNSAFE.sub("_", resolved.name) or "root"
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:12]
    return state_dir(environ) / "projects" / f"{slug}-{digest}" / "runs.db"


def create_private_file(path: Path) -> None:
    """Create `path`'s missing directories (0700) and the file itself (0600) if absent.

    Existing directories and an existing file keep their modes: the user may have chosen them.
    """
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another process created it first
        os.chmod(directory, 0o700)  # the umask may have removed bits we want
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(descriptor)
    os.chmod(path, 0o600)


def known_store_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The run stores at the default location (one per project that has run something here).

    Stores a piflow.toml moved elsewhere (`[piflow] store`) are not among them.
    """
    return sorted((state_dir(environ) / "projects").glob("*/runs.db"))
