"""The custom protocol is written once: schemas and docs are generated from the models and must match."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from piflow.server import protocol
from piflow.server.app import create_server

ROOT = Path(__file__).resolve().parents[2]
FIX = "regenerate with `.venv/bin/python -m piflow.server.protocol .`"


def test_schemas_match_the_models() -> None:
    directory = ROOT / "schemas" / "protocol"
    wanted = protocol.schema_files()
    present = {path.name: path.read_text(encoding="utf-8") for path in directory.glob("*.json")}
    assert sorted(present) == sorted(wanted), FIX
    for name, text in wanted.items():
        assert present[name] == text, f"schemas/protocol/{name} is stale: {FIX}"


def test_protocol_doc_matches_the_models() -> None:
    current = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert protocol.REFERENCE_BEGIN in current and protocol.REFERENCE_END in current
    assert protocol.render_document(current) == current, f"docs/protocol.md is stale: {FIX}"


def test_every_message_is_documented_in_the_prose_too() -> None:
    current = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    prose = current[: current.index(protocol.REFERENCE_BEGIN)]
    for command in protocol.COMMANDS:
        assert f"`{command.name}" in prose, command.name
    for notification in protocol.NOTIFICATIONS:
        assert f"`{notification.method}`" in prose, notification.method


def test_the_server_offers_exactly_the_protocol_commands() -> None:
    server = create_server()
    assert sorted(server.protocol.fm.commands) == sorted(command.name for command in protocol.COMMANDS)
    assert types.WORKSPACE_EXECUTE_COMMAND in server.protocol.fm.builtin_features
