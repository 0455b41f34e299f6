"""The agent's working directory as a boundary: every path a tool touches must resolve inside it.

A path is resolved against the workspace root (its worktree when the agent has one), symlinks
included, and refused when the result lies outside: `../x`, an absolute path elsewhere and a
symlink pointing out all get the same tool error, which the model sees and can act on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class ToolError(Exception):
    """A tool call the model got wrong (bad path, missing text, failed command): its message is the reply."""


@dataclass(frozen=True)
class Workspace:
    """The directory an agent's tools are confined to (`root` is already resolved)."""

    root: Path

    @classmethod
    def at(cls, cwd: str) -> Workspace:
        root = Path(cwd).resolve()
        if not root.is_dir():
            raise ToolError(f"Working directory does not exist: {cwd}")
        return cls(root)

    def resolve(self, path: str | None) -> Path:
        """`path` (relative to the root, or absolute) as a real path inside the root.

        A path that does not exist yet (a file to write) is resolved through its nearest existing
        parent, so a symlinked parent cannot lead outside either.
        """
        text = (path or ".").strip() or "."
        if text.startswith("~"):
            text = os.path.expanduser(text)
        candidate = Path(text) if os.path.isabs(text) else self.root / text
        resolved = candidate.resolve()  # follows every symlink that exists; the rest is kept as written
        if not self.contains(resolved):
            raise ToolError(
                f"Path {path} is outside the working directory {self.root}: "
                "tools may only use files inside it (no `..`, absolute paths elsewhere or symlinks leading out)"
            )
        return resolved

    def contains(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def display(self, path: Path) -> str:
        """`path` as the model should write it: relative to the root."""
        return "." if path == self.root else str(path.relative_to(self.root))
