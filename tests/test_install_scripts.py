"""The install steps of the repository's scripts behave on a shared machine (issue: the first hour)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shell_scripts() -> list[Path]:
    """Every tracked file that starts with a bash or sh shebang."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    scripts = []
    for name in listed.splitlines():
        path = ROOT / name
        if path.is_file() and "node_modules" not in path.parts:
            with path.open("rb") as handle:
                if re.match(rb"#!\s*/(usr/)?bin/(env\s+)?(ba)?sh\b", handle.readline()):
                    scripts.append(path)
    return scripts


def test_every_apt_get_waits_for_the_package_lock() -> None:
    """apt-get fails at once when another apt holds the lock (a desktop updater, a parallel CI job);
    every call waits for it instead."""
    calls = []
    for script in shell_scripts():
        for number, line in enumerate(script.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"\bapt-get\s", code) and "echo" not in code:
                calls.append((script.relative_to(ROOT), number, code.strip()))
    assert calls, "no apt-get call found: the scan itself is broken"
    waiting = [call for call in calls if "DPkg::Lock::Timeout=" in call[2]]
    assert waiting == calls
