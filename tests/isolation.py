"""The environment of a piflow subprocess in a test: HOME, the XDG dirs and pi's agent dir under one
temporary root, so nothing of the real user's configuration or runs is read or written."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def isolated_environment(root: Path, home: Path, agent: Path) -> dict[str, str]:
    """`PATH` and an importable piflow, and every per-user location below `root`/`home`."""
    xdg = root / "xdg"
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_STATE_HOME": str(xdg / "state"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_CACHE_HOME": str(xdg / "cache"),
        "PI_CODING_AGENT_DIR": str(agent),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
