"""The file tools as a model uses them: pi's arguments, line-numbered reads, exact edits, caps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from piflow.engine.tools import ToolResult, ToolRuntime

ALL = ("read", "ls", "find", "grep", "edit", "write", "bash")


async def call(root: Path, tool: str, **arguments: object) -> ToolResult:
    return await ToolRuntime.for_names(ALL, str(root), None).call(tool, json.dumps(arguments))


async def test_read_numbers_lines_and_continues_from_an_offset(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))

    first = await call(tmp_path, "read", path="notes.txt", limit=3)
    rest = await call(tmp_path, "read", path="notes.txt", offset=9)

    assert first.text == "1\tline 1\n2\tline 2\n3\tline 3\n\n[7 more lines in file. Use offset=4 to continue.]"
    assert rest.text == " 9\tline 9\n10\tline 10"


async def test_read_of_a_long_file_is_capped_with_a_notice(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"{n}\n" for n in range(1, 3001)))

    result = await call(tmp_path, "read", path="big.txt")

    lines = result.text.split("\n")
    assert lines[1999] == "2000\t2000"
    assert lines[-1] == "[Showing lines 1-2000 of 3000. Use offset=2001 to continue.]"


async def test_read_errors_say_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")

    missing = await call(tmp_path, "read", path="nope.txt")
    beyond = await call(tmp_path, "read", path="a.txt", offset=5)
    no_path = await call(tmp_path, "read")

    assert (missing.is_error, missing.text) == (True, "File not found: nope.txt")
    assert beyond.text == "Offset 5 is beyond end of file (1 lines total)"
    assert no_path.text == "Argument path of read must be a string"


async def test_edit_replaces_exact_unique_text(tmp_path: Path) -> None:
    source = tmp_path / "calc.py"
    source.write_text("def add(a, b):\n    return a - b\n")

    result = await call(tmp_path, "edit", path="calc.py", edits=[{"oldText": "a - b", "newText": "a + b"}])

    assert result == ToolResult("Successfully replaced 1 block(s) in calc.py.", False)
    assert source.read_text() == "def add(a, b):\n    return a + b\n"


async def test_edit_accepts_the_older_single_replacement_shape(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("red\n")

    await call(tmp_path, "edit", path="a.txt", oldText="red", newText="blue")

    assert (tmp_path / "a.txt").read_text() == "blue\n"


async def test_edit_refuses_missing_ambiguous_and_overlapping_text(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\ny = 2\n")

    missing = await call(tmp_path, "edit", path="a.txt", edits=[{"oldText": "z = 3", "newText": "z = 4"}])
    twice = await call(tmp_path, "edit", path="a.txt", edits=[{"oldText": "x = 1", "newText": "x = 5"}])
    overlap = await call(tmp_path, "edit", path="a.txt",
                         edits=[{"oldText": "1\ny", "newText": "1\nw"}, {"oldText": "y = 2", "newText": "y = 3"}])

    assert missing.text == ("Could not find the exact text in a.txt. The old text must match exactly including "
                            "all whitespace and newlines.")
    assert twice.text == ("Found 2 occurrences of the text in a.txt. The text must be unique. Please provide more "
                          "context to make it unique.")
    assert overlap.text == ("edits[0] and edits[1] overlap in a.txt. Merge them into one edit or target "
                            "disjoint regions.")
    assert (missing.is_error, twice.is_error, overlap.is_error) == (True, True, True)
    assert (tmp_path / "a.txt").read_text() == "x = 1\nx = 1\ny = 2\n"


async def test_write_creates_parent_directories(tmp_path: Path) -> None:
    result = await call(tmp_path, "write", path="src/pkg/mod.py", content="print('hi')\n")

    assert result.text == "Successfully wrote 12 bytes to src/pkg/mod.py"
    assert (tmp_path / "src" / "pkg" / "mod.py").read_text() == "print('hi')\n"


async def test_ls_sorts_marks_directories_and_shows_dotfiles(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "B.txt").write_text("")
    (tmp_path / ".env").write_text("")
    (tmp_path / "a.txt").write_text("")

    assert (await call(tmp_path, "ls")).text == ".env\na.txt\nB.txt\nsrc/"
    limited = await call(tmp_path, "ls", limit=2)
    assert limited.text == ".env\na.txt\n\n[2 entries limit reached. Use limit=4 for more]"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


async def test_find_and_grep_honour_gitignore_in_a_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import os\nTODO = 1\n")
    (tmp_path / "src" / "app_test.py").write_text("# TODO test\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "app.py").write_text("TODO generated\n")

    found = await call(tmp_path, "find", pattern="**/*.py")
    matches = await call(tmp_path, "grep", pattern="TODO")
    by_glob = await call(tmp_path, "grep", pattern="todo", ignoreCase=True, glob="*_test.py")

    assert found.text == "src/app.py\nsrc/app_test.py"
    assert matches.text == "src/app.py:2: TODO = 1\nsrc/app_test.py:1: # TODO test"
    assert by_glob.text == "src/app_test.py:1: # TODO test"


async def test_grep_shows_context_and_stops_at_its_limit(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("a\nhit 1\nb\nhit 2\nhit 3\n")

    around = await call(tmp_path, "grep", pattern="hit 1", context=1)
    limited = await call(tmp_path, "grep", pattern="hit", limit=2)
    none = await call(tmp_path, "grep", pattern="absent")
    bad = await call(tmp_path, "grep", pattern="(")

    assert around.text == "log.txt-1- a\nlog.txt:2: hit 1\nlog.txt-3- b"
    assert limited.text == "log.txt:2: hit 1\nlog.txt:4: hit 2\n\n[2 matches limit reached. Use limit=4 for more]"
    assert none.text == "No matches found"
    assert bad.is_error and bad.text.startswith("Invalid regular expression '('")


async def test_arguments_that_are_not_json_are_a_tool_error(tmp_path: Path) -> None:
    runtime = ToolRuntime.for_names(ALL, str(tmp_path), None)

    result = await runtime.call("read", "{not json")

    assert result.is_error and result.text.startswith("Arguments of read are not valid JSON")


def test_the_runtime_offers_exactly_the_allowed_tools_in_order(tmp_path: Path) -> None:
    runtime = ToolRuntime.for_names(("grep", "read", "agent", "grep"), str(tmp_path), None)

    assert [d["function"]["name"] for d in runtime.definitions()] == ["grep", "read"]
    assert runtime.summary("grep", '{"pattern": "TODO", "path": "src"}') == "grep TODO src"
