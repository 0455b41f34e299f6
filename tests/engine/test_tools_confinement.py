"""Tools stay inside the agent's working directory: `..`, absolute paths and symlinks leading out are refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from piflow.engine.tools import ToolResult, ToolRuntime

ALL = ("read", "ls", "find", "grep", "edit", "write", "bash")


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace `work/` beside a `secret/` directory it must not reach."""
    work, secret = tmp_path / "work", tmp_path / "secret"
    work.mkdir()
    secret.mkdir()
    (secret / "key.txt").write_text("TOKEN=hunter2\n")
    (work / "inside.txt").write_text("fine\n")
    return work, secret


async def call(root: Path, tool: str, **arguments: object) -> ToolResult:
    return await ToolRuntime.for_names(ALL, str(root), None).call(tool, json.dumps(arguments))


def refused(result: ToolResult, path: str, root: Path) -> bool:
    return result.is_error and result.text.startswith(f"Path {path} is outside the working directory {root}")


@pytest.mark.parametrize("tool", ["read", "edit", "write", "ls", "find", "grep"])
async def test_dot_dot_is_refused_by_every_file_tool(layout: tuple[Path, Path], tool: str) -> None:
    work, _ = layout
    arguments = {"read": {"path": "../secret/key.txt"},
                 "edit": {"path": "../secret/key.txt", "edits": [{"oldText": "TOKEN", "newText": "X"}]},
                 "write": {"path": "../secret/new.txt", "content": "x"},
                 "ls": {"path": ".."},
                 "find": {"pattern": "*", "path": "../secret"},
                 "grep": {"pattern": "TOKEN", "path": ".."}}[tool]

    result = await call(work, tool, **arguments)

    assert refused(result, str(arguments["path"]), work), result.text
    assert sorted(p.name for p in (work.parent / "secret").iterdir()) == ["key.txt"]


async def test_an_absolute_path_elsewhere_is_refused_and_one_inside_works(layout: tuple[Path, Path]) -> None:
    work, secret = layout

    outside = await call(work, "read", path=str(secret / "key.txt"))
    inside = await call(work, "read", path=str(work / "inside.txt"))

    assert refused(outside, str(secret / "key.txt"), work)
    assert inside == ToolResult("1\tfine", False)


async def test_a_symlink_leading_out_is_refused(layout: tuple[Path, Path]) -> None:
    work, secret = layout
    os.symlink(secret / "key.txt", work / "link.txt")
    os.symlink(secret, work / "linkdir")

    read = await call(work, "read", path="link.txt")
    write = await call(work, "write", path="linkdir/planted.txt", content="x")
    listed = await call(work, "ls", path="linkdir")

    assert refused(read, "link.txt", work)
    assert refused(write, "linkdir/planted.txt", work)
    assert refused(listed, "linkdir", work)
    assert not (secret / "planted.txt").exists()


async def test_search_does_not_follow_symlinks_out(layout: tuple[Path, Path]) -> None:
    work, secret = layout
    os.symlink(secret / "key.txt", work / "link.txt")

    assert (await call(work, "grep", pattern="TOKEN")).text == "No matches found"
    assert (await call(work, "find", pattern="*.txt")).text == "inside.txt"


async def test_a_symlink_inside_the_workspace_is_followed(layout: tuple[Path, Path]) -> None:
    work, _ = layout
    os.symlink(work / "inside.txt", work / "alias.txt")

    assert (await call(work, "read", path="alias.txt")).text == "1\tfine"
