"""Files that never end: piflow reads only regular files, with a size cap, and bytes that are not
UTF-8 are an error at their line and column (issue: hostile input never crashes a process).

Every case uses real files — FIFOs made with os.mkfifo, symbolic links to /dev/zero, files over
the cap — against the real `piflow` command (a subprocess with its own HOME) and a real
`piflow serve` driven by pytest-lsp. Each asserts the clear error, that nothing hung (every call
has a timeout, so a regression fails instead of hanging), and that a later command still works.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient

from isolation import isolated_environment
from piflow.config.files import CONFIG_LIMIT, SCRIPT_LIMIT, FileRefused, InvalidUtf8, read_bytes, read_text

GOOD = 'const draft = await agent("Write a haiku", { label: "poet" });\nreturn { draft };\n'
NOT_UTF8 = b'phase("draft");\nconst s = "caf\xe9";\nreturn s;\n'
"""Latin-1 `é` at line 2, column 15 (1-based): what an editor saving in the wrong encoding leaves."""
TIMEOUT = 60


@dataclass
class World:
    """An isolated home (pi agent dir, XDG dirs) and a project with a good script."""

    home: Path
    agent: Path
    project: Path
    env: dict[str, str]

    def piflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "piflow", *args],
            cwd=self.project, env=self.env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )

    @property
    def settings(self) -> Path:
        return self.agent / "pi-extensible-workflows" / "settings.json"

    @property
    def user_config(self) -> Path:
        return Path(self.env["XDG_CONFIG_HOME"]) / "piflow" / "config.toml"


@pytest.fixture
def world(tmp_path: Path) -> World:
    home, project = tmp_path / "home", tmp_path / "project"
    agent = home / ".pi" / "agent"
    (agent / "pi-extensible-workflows" / "roles").mkdir(parents=True)
    project.mkdir()
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\n')
    (project / "good.workflow.js").write_text(GOOD)
    env = isolated_environment(tmp_path, home, agent)
    (tmp_path / "xdg" / "config" / "piflow").mkdir(parents=True)
    return World(home, agent, project, env)


def fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def zero(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/zero")


ENDLESS: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (fifo, "is a FIFO (named pipe), not a regular file"),
    "dev-zero": (zero, "is a character device, not a regular file"),
}


def assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr


def assert_still_runs(world: World) -> None:
    """A later command in the same setup works: the good script runs to completion."""
    result = world.piflow("run", "good.workflow.js", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "completed"


# -- scripts ------------------------------------------------------------------------------------
def test_check_and_run_report_invalid_utf8_at_the_same_line_and_column(world: World) -> None:
    (world.project / "latin1.workflow.js").write_bytes(NOT_UTF8)
    described = "Invalid UTF-8: byte 0xE9 (invalid continuation byte); save the file as UTF-8"
    check = world.piflow("check", "latin1.workflow.js")
    assert check.returncode == 1
    assert check.stdout.splitlines()[0] == f"latin1.workflow.js:2:15: error INVALID_SYNTAX {described}"
    run = world.piflow("run", "latin1.workflow.js")
    assert run.returncode == 2
    assert run.stderr.strip().endswith(f"piflow: INVALID_SYNTAX: latin1.workflow.js:2:15: {described}")
    assert_clean(run)
    assert "No workflow runs" in world.piflow("runs").stdout  # refused before any run existed
    assert_still_runs(world)


def test_check_json_places_the_encoding_finding_on_the_bad_byte(world: World) -> None:
    (world.project / "latin1.workflow.js").write_bytes(NOT_UTF8)
    result = world.piflow("check", "--format", "json", "latin1.workflow.js")
    finding = json.loads(result.stdout)["files"][0]["findings"][0]
    assert finding["code"] == "INVALID_SYNTAX"
    assert finding["range"]["start"] == {"line": 1, "character": 14}
    assert finding["range"]["end"] == {"line": 1, "character": 15}


@pytest.mark.parametrize("kind", sorted(ENDLESS))
def test_a_script_that_never_ends_is_refused_by_check_and_run(world: World, kind: str) -> None:
    make, what = ENDLESS[kind]
    make(world.project / "endless.workflow.js")
    for command in ("check", "run"):
        result = world.piflow(command, "endless.workflow.js")
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.strip() == f"piflow {command}: endless.workflow.js {what}; give a workflow script"
    assert_still_runs(world)


def test_a_directory_scan_skips_what_is_not_a_regular_file(world: World) -> None:
    fifo(world.project / "pipe.workflow.js")
    zero(world.project / "zero.workflow.js")
    result = world.piflow("check", ".")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "No problems found in 1 file."


def test_a_script_over_the_size_cap_is_refused(world: World) -> None:
    huge = world.project / "huge.workflow.js"
    with huge.open("wb") as file:
        file.truncate(SCRIPT_LIMIT + 1)
    result = world.piflow("run", "huge.workflow.js")
    assert result.returncode == 2
    assert result.stderr.strip() == "piflow run: huge.workflow.js is larger than 10 MiB; give a workflow script"
    assert_still_runs(world)


# -- configuration files ------------------------------------------------------------------------
CONFIG_FILES: dict[str, Callable[[World], Path]] = {
    "models.json": lambda world: world.agent / "models.json",
    "settings.json": lambda world: world.settings,
    "piflow.toml": lambda world: world.project / "piflow.toml",
    "user config.toml": lambda world: world.user_config,
}


@pytest.mark.parametrize("kind", sorted(ENDLESS))
@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_a_configuration_file_that_never_ends_is_a_configuration_error(world: World, name: str, kind: str) -> None:
    path = CONFIG_FILES[name](world)
    path.unlink(missing_ok=True)
    make, what = ENDLESS[kind]
    make(path)
    for command in (("check", "good.workflow.js"), ("run", "good.workflow.js")):
        result = world.piflow(*command)
        assert result.returncode == 2, result.stderr
        assert f"{path} {what}" in result.stderr
        assert "CONFIG_ERROR" in result.stderr or "configuration error" in result.stderr
        assert_clean(result)
    path.unlink()
    assert_still_runs(world)


def test_an_oversized_model_registry_is_a_configuration_error(world: World) -> None:
    registry = world.agent / "models.json"
    registry.write_text('{"providers": {}, "pad": "' + "x" * CONFIG_LIMIT + '"}')
    result = world.piflow("check", "good.workflow.js")
    assert result.returncode == 2
    assert f"{registry} is larger than 4 MiB" in result.stderr
    registry.unlink()
    assert_still_runs(world)


def test_a_role_file_that_is_a_fifo_is_skipped_like_any_non_regular_entry(world: World) -> None:
    fifo(world.agent / "pi-extensible-workflows" / "roles" / "pipe.md")
    result = world.piflow("check", "good.workflow.js")
    assert result.returncode == 0, result.stderr
    assert_still_runs(world)


def test_piflow_toml_that_is_not_utf8_names_line_and_column(world: World) -> None:
    toml = world.project / "piflow.toml"
    toml.write_bytes(b'[piflow]\nbackend = "scripted"\n# caf\xe9\n')
    result = world.piflow("run", "good.workflow.js")
    assert result.returncode == 2
    assert f"{toml}:3:6: Invalid UTF-8: byte 0xE9 (invalid continuation byte)" in result.stderr
    assert_clean(result)


# -- the reader itself --------------------------------------------------------------------------
def test_invalid_utf8_is_located_in_lsp_lines_and_utf16_columns(tmp_path: Path) -> None:
    path = tmp_path / "mixed.js"
    path.write_bytes("é\r\nab\r  ü😀".encode() + b"\xff")
    with pytest.raises(InvalidUtf8) as raised:
        read_text(path, SCRIPT_LIMIT)
    # Lines break at \r\n, \r and \n as in the LSP; the emoji counts two UTF-16 units.
    assert (raised.value.line, raised.value.column, raised.value.offset) == (3, 6, 11)


def test_a_symlink_is_followed_to_a_regular_file_and_refused_to_anything_else(tmp_path: Path) -> None:
    target = tmp_path / "real.js"
    target.write_text("return 1;\n")
    (tmp_path / "link.js").symlink_to(target)
    assert read_bytes(tmp_path / "link.js", 100) == b"return 1;\n"
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "to-pipe.js").symlink_to(tmp_path / "pipe")
    with pytest.raises(FileRefused, match="is a FIFO"):
        read_bytes(tmp_path / "to-pipe.js", 100)


# -- the language server ------------------------------------------------------------------------
async def run(client: LanguageClient, uri: str) -> object:
    params = types.ExecuteCommandParams("piflow.run", [{"uri": uri}])
    return await asyncio.wait_for(client.workspace_execute_command_async(params), TIMEOUT)


async def test_the_server_refuses_to_run_files_that_never_end_and_keeps_running_scripts(
    world: World, client: LanguageClient
) -> None:
    fifo(world.project / "pipe.workflow.js")
    (world.project / "latin1.workflow.js").write_bytes(NOT_UTF8)
    refusals = {
        "file:///dev/zero": "/dev/zero is a character device, not a regular file",
        from_fs_path(str(world.project / "pipe.workflow.js")): "pipe.workflow.js is a FIFO (named pipe)",
        from_fs_path(str(world.project / "latin1.workflow.js")): "latin1.workflow.js:2:15: Invalid UTF-8: byte 0xE9",
    }
    for uri, message in refusals.items():
        assert uri is not None
        with pytest.raises(JsonRpcException) as raised:
            await run(client, uri)
        assert message in str(raised.value), raised.value
    good = from_fs_path(str(world.project / "good.workflow.js"))
    assert good is not None
    started = await run(client, good)
    assert isinstance(started, dict) and started.get("runId")
