"""Trust: an untrusted project's piflow.toml cannot choose where piflow writes (the run store, and
beside it worktrees and transcripts) or what it reads as fixtures outside the project, and a store
file that is not piflow's is refused, never converted to WAL or migrated.

Real CLI subprocesses with an isolated HOME and a real `piflow serve` (pytest-lsp); each case
checks the clear error, that the foreign file is byte-identical (no `-wal`/`-shm` beside it), and
that a later command works.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient

from isolation import isolated_environment
from piflow.engine.store import RunStore
from piflow.engine.store.schema import APPLICATION_ID, MIGRATIONS, migrate

GOOD = 'const draft = await agent("Write a haiku", { label: "poet" });\nreturn { draft };\n'
TIMEOUT = 60


@dataclass
class World:
    tmp: Path
    project: Path
    user_config: Path
    env: dict[str, str]

    def piflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "piflow", *args],
            cwd=self.project, env=self.env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )

    def toml(self, text: str) -> Path:
        path = self.project / "piflow.toml"
        path.write_text('[piflow]\nbackend = "scripted"\n' + text)
        return path

    def run_good(self) -> subprocess.CompletedProcess[str]:
        return self.piflow("run", "good.workflow.js", "--json")


@pytest.fixture
def world(tmp_path: Path) -> World:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".pi" / "agent").mkdir(parents=True)
    project.mkdir()
    (project / "good.workflow.js").write_text(GOOD)
    user_config = tmp_path / "xdg" / "config" / "piflow" / "config.toml"
    user_config.parent.mkdir(parents=True)
    env = isolated_environment(tmp_path, home, home / ".pi" / "agent")
    world = World(tmp_path, project, user_config, env)
    world.toml("")
    return world


def foreign_database(path: Path) -> bytes:
    """Another application's SQLite database (rollback journal, one table, one row); its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO users (name) VALUES ('ada')")
    connection.commit()
    connection.close()
    return path.read_bytes()


def assert_untouched(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()


def assert_completed(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "completed"


# -- paths an untrusted project may not choose -----------------------------------------------------
def test_an_untrusted_project_cannot_put_the_store_on_another_apps_database(world: World) -> None:
    target = world.tmp / "elsewhere" / "app.db"
    before = foreign_database(target)
    toml = world.toml(f'store = "{target}"\n')
    for command in (("run", "good.workflow.js"), ("runs",), ("check", "good.workflow.js")):
        result = world.piflow(*command)
        assert result.returncode == 2, (command, result.stdout)
        assert f'{toml}:3: piflow.store = "{target}" is outside the project {world.project}' in result.stderr
        assert f'add "{world.project}" to trusted_projects in {world.user_config}' in result.stderr
        assert "Traceback" not in result.stderr
    assert_untouched(target, before)
    world.toml("")
    assert_completed(world.run_good())


def test_a_relative_path_or_a_symlink_out_of_the_project_is_outside_too(world: World) -> None:
    outside = world.tmp / "outside"
    outside.mkdir()
    (world.project / "state").symlink_to(outside)
    for setting in ("../outside/runs.db", "state/runs.db"):
        world.toml(f'store = "{setting}"\n')
        result = world.piflow("run", "good.workflow.js")
        assert result.returncode == 2
        assert f"is outside the project {world.project} (resolved: {outside / 'runs.db'})" in result.stderr
    assert list(outside.iterdir()) == []


def test_an_untrusted_project_cannot_read_fixtures_from_outside(world: World) -> None:
    secret = world.tmp / "secret.json"
    secret.write_text('{"responses": []}')
    world.toml(f'\n[scripted]\nfixtures = "{secret}"\n')
    result = world.piflow("run", "good.workflow.js")
    assert result.returncode == 2
    assert f'piflow.toml:5: scripted.fixtures = "{secret}" is outside the project' in result.stderr


def test_a_project_cannot_trust_itself_into_writing_elsewhere(world: World) -> None:
    target = world.tmp / "elsewhere" / "runs.db"
    world.toml(f'trust_project = true\nstore = "{target}"\n')
    result = world.piflow("run", "good.workflow.js")
    assert result.returncode == 2 and "is outside the project" in result.stderr
    assert not target.parent.exists()


def test_a_project_the_user_trusts_may_keep_its_store_elsewhere(world: World) -> None:
    target = world.tmp / "elsewhere" / "runs.db"
    world.toml(f'store = "{target}"\n')
    world.user_config.write_text(f'trusted_projects = ["{world.project}"]\n')
    assert_completed(world.run_good())
    assert target.exists()


def test_the_user_config_may_choose_any_store(world: World) -> None:
    target = world.tmp / "mine" / "runs.db"
    world.user_config.write_text(f'[piflow]\nstore = "{target}"\n')
    assert_completed(world.run_good())
    assert target.exists()


def test_a_store_inside_the_project_is_allowed_without_trust(world: World) -> None:
    world.toml('store = ".piflow/runs.db"\n')
    assert_completed(world.run_good())
    assert (world.project / ".piflow" / "runs.db").exists()


# -- store files that are not piflow's ----------------------------------------------------------------
def test_a_foreign_database_inside_the_project_is_refused_untouched(world: World) -> None:
    target = world.project / "app.db"
    before = foreign_database(target)
    world.toml('store = "app.db"\n')
    for command in (("run", "good.workflow.js"), ("runs",)):
        result = world.piflow(*command)
        assert result.returncode == 2
        assert f"{target} is not a piflow run store: it is a SQLite database of another application" in result.stderr
    assert_untouched(target, before)


def test_a_trusted_project_still_cannot_migrate_a_foreign_database(world: World) -> None:
    target = world.tmp / "elsewhere" / "app.db"
    before = foreign_database(target)
    world.toml(f'store = "{target}"\n')
    world.user_config.write_text(f'trusted_projects = ["{world.project}"]\n')
    result = world.piflow("run", "good.workflow.js")
    assert result.returncode == 2 and "is not a piflow run store" in result.stderr
    assert_untouched(target, before)


def test_a_store_path_that_is_not_sqlite_is_refused_untouched(world: World) -> None:
    target = world.project / "notes.txt"
    target.write_text("my notes\n" * 100)
    world.toml('store = "notes.txt"\n')
    result = world.piflow("run", "good.workflow.js")
    assert result.returncode == 2
    assert f"{target} is not a piflow run store: it is not a SQLite database" in result.stderr
    assert target.read_text() == "my notes\n" * 100


def test_a_store_from_before_the_marker_still_opens_and_is_marked(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    connection = sqlite3.connect(path, isolation_level=None)
    migrate(connection, str(path), MIGRATIONS[:1])  # what piflow wrote before stores carried a mark
    connection.close()
    with RunStore.open(path) as store:
        assert store.list_runs() == []
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    connection.close()


# -- the language server ----------------------------------------------------------------------------
@pytest.fixture
def hostile(world: World) -> tuple[Path, bytes]:
    """A project whose piflow.toml points the store at another application's database (before the server starts)."""
    target = world.tmp / "elsewhere" / "app.db"
    before = foreign_database(target)
    world.toml(f'store = "{target}"\n')
    return target, before


async def test_opening_and_running_a_hostile_projects_script_leaves_the_database_alone(
    world: World, hostile: tuple[Path, bytes], client: LanguageClient
) -> None:
    target, before = hostile
    uri = from_fs_path(str(world.project / "good.workflow.js"))
    assert uri is not None
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "javascript", 1, GOOD))
    )
    lens_params = types.CodeLensParams(types.TextDocumentIdentifier(uri))
    lenses = await asyncio.wait_for(client.text_document_code_lens_async(lens_params), TIMEOUT)
    assert lenses is not None  # the server answers the editor
    params = types.ExecuteCommandParams("piflow.run", [{"uri": uri}])
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(client.workspace_execute_command_async(params), TIMEOUT)
    assert f'piflow.store = "{target}" is outside the project' in str(raised.value)
    assert_untouched(target, before)
    hover = await asyncio.wait_for(
        client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(0, 21))),
        TIMEOUT,
    )
    assert hover is not None  # and keeps answering
