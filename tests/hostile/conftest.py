"""Shared fixtures of the hostile-input suite."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER_COMMAND = [sys.executable, "-m", "piflow", "serve", "--stdio"]


@pytest_asyncio.fixture
async def client(world: Any) -> AsyncIterator[LanguageClient]:
    """A real `piflow serve --stdio` (pytest-lsp) in the module's `world` (its `env` and `project`),
    initialized with the project as the workspace folder and shut down after the test."""
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=world.env)
    started = await config.start()
    assert isinstance(started, LanguageClient)
    root = from_fs_path(str(world.project)) or ""
    folders = [types.WorkspaceFolder(uri=root, name="project")]
    await started.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=root, workspace_folders=folders)
    )
    yield started
    try:
        await asyncio.wait_for(started.shutdown_session(), 20)
    finally:
        await started.stop()
