"""The LSP wire of a real `piflow serve --stdio`: every request gets exactly one response, whatever
arrives, and the server keeps answering (issue: hostile input never crashes a process).

Each test writes raw bytes (lsp_wire.RawServer) and asserts the JSON-RPC error the LSP
specification prescribes, then that a later, valid request is still served.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_wire import SCRIPT, RawServer, frame, isolated_project, uri_of

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_NOT_INITIALIZED = -32002

DEEP_RESULT = "let v = [];\nfor (let i = 0; i < 3000; i++) v = [v];\nreturn v;\n"
LONE_SURROGATES = (
    'phase("\\ud800 half");\nlog("\\udfff");\n'
    'const r = await agent("p\\ud800", { label: "x\\udc00", model: "openai/gpt-4o" });\n'
    'return { r, s: "\\ud800" };\n'
)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return isolated_project(tmp_path)


@pytest.fixture
def server(project: tuple[Path, dict[str, str]], tmp_path: Path) -> Iterator[RawServer]:
    """A server that is not initialized yet."""
    root, env = project
    raw = RawServer(env, root, tmp_path / "server.log")
    yield raw
    raw.close()


@pytest.fixture
def ready(server: RawServer, project: tuple[Path, dict[str, str]]) -> RawServer:
    """An initialized server with one script open."""
    root, _ = project
    server.initialize(root)
    open_script(server, root / "a.workflow.js", SCRIPT)
    return server


def open_script(server: RawServer, path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    uri = uri_of(path)
    server.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "javascript", "version": 1, "text": text}}
    )
    return uri


def symbols(server: RawServer, uri: str) -> Any:
    """Something only a live server with the document's current text can answer."""
    return server.result("textDocument/documentSymbol", {"textDocument": {"uri": uri}})


def assert_still_serving(server: RawServer, root: Path) -> None:
    found = symbols(server, uri_of(root / "a.workflow.js"))
    assert isinstance(found, list) and found, found
    assert server.alive()


def wait_for_null_errors(server: RawServer, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while len(server.errors_without_id()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.errors_without_id()


def test_a_huge_content_length_is_refused_without_allocating_it(ready: RawServer, project: Any) -> None:
    ready.send_bytes(b"Content-Length: 99999999999\r\n\r\n" + b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}')
    ready.send_bytes(b"Content-Length: " + b"9" * 6000 + b"\r\n\r\n{}")
    errors = wait_for_null_errors(ready, 2)
    assert [error["code"] for error in errors] == [INVALID_REQUEST, INVALID_REQUEST]
    assert "larger than 67108864 bytes" in errors[0]["message"]
    assert 1 not in ready.responses  # the frame was skipped, not executed: the server is not shutting down
    assert_still_serving(ready, project[0])


def test_the_reader_finds_its_footing_after_broken_headers(ready: RawServer, project: Any) -> None:
    ready.send_bytes(b"Content-Length: abc\r\n\r\n")  # not a number
    ready.send_bytes(b"X-Whatever: 1\r\n\r\n")  # no Content-Length at all
    ready.send_bytes(b"garbage without a newline " * 2000 + b"\r\n")  # an overlong junk line, then a frame
    msg_id = ready.next_id()
    ready.send_bytes(b"junk" + frame(b'{"jsonrpc":"2.0","id":%d,"method":"textDocument/hover","params":null}' % msg_id))
    assert ready.response(msg_id)["error"]["code"] == INVALID_PARAMS
    errors = wait_for_null_errors(ready, 2)
    assert [error["code"] for error in errors] == [PARSE_ERROR, PARSE_ERROR]
    assert all("Content-Length" in error["message"] for error in errors)
    assert_still_serving(ready, project[0])


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"{not json", PARSE_ERROR, "Parse error"),
        (b'{"jsonrpc":"2.0","id":7,"method":"textDocument/hover","params":"\xff\xfe"}', PARSE_ERROR, "not valid UTF-8"),
        (b"", PARSE_ERROR, "Parse error"),
        (b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR, "Parse error"),
        (b'[{"jsonrpc":"2.0","id":7,"method":"shutdown"}]', INVALID_REQUEST, "JSON object"),
        (b"42", INVALID_REQUEST, "JSON object"),
        (b"null", INVALID_REQUEST, "JSON object"),
        (b'{"jsonrpc":"2.0"}', INVALID_REQUEST, "neither a request"),
        (b'{"jsonrpc":"2.0","id":{"x":1},"method":"shutdown"}', INVALID_REQUEST, "id must be"),
        (b'{"jsonrpc":"2.0","id":null,"method":"shutdown"}', INVALID_REQUEST, "id must be"),
    ],
)
def test_unreadable_messages_get_an_error_with_a_null_id(
    ready: RawServer, project: Any, body: bytes, code: int, words: str
) -> None:
    ready.send_bytes(frame(body))
    [error] = wait_for_null_errors(ready, 1)
    assert error["code"] == code and words in error["message"], error
    assert 7 not in ready.responses
    assert_still_serving(ready, project[0])


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "method": "shutdown"},
        {"jsonrpc": "2.0", "method": 5},
        {"method": "shutdown"},
    ],
)
def test_a_malformed_request_with_an_id_gets_invalid_request(ready: RawServer, project: Any, message: Any) -> None:
    msg_id = ready.next_id()
    ready.send({**message, "id": msg_id})
    assert ready.response(msg_id)["error"]["code"] == INVALID_REQUEST
    assert_still_serving(ready, project[0])


def _position(uri: Any, line: Any = 1, character: Any = 2) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


MALFORMED: list[tuple[str, Any]] = [
    ("textDocument/hover", None),
    ("textDocument/hover", []),
    ("textDocument/hover", [1, 2]),
    ("textDocument/hover", "text"),
    ("textDocument/hover", {"textDocument": {}}),
    ("textDocument/hover", _position("URI", line=-1)),
    ("textDocument/hover", _position("URI", character=-5)),
    ("textDocument/hover", _position("URI", line=2**40)),
    ("textDocument/hover", _position("URI", line="one")),
    ("textDocument/hover", _position("URI", line=None)),
    ("textDocument/hover", _position("URI", line=1.5)),
    ("textDocument/hover", _position(5)),
    ("textDocument/hover", _position(None)),
    ("textDocument/completion", {"textDocument": {"uri": "URI"}}),
    ("textDocument/completion", _position("URI", line=[1])),
    ("textDocument/definition", _position({"uri": "URI"})),
    ("textDocument/documentSymbol", {}),
    ("textDocument/documentSymbol", {"textDocument": None}),
    ("textDocument/codeLens", []),
    ("textDocument/inlayHint", {"textDocument": {"uri": "URI"}, "range": {"start": {"line": -1, "character": 0}}}),
    ("textDocument/codeAction", {"textDocument": {"uri": "URI"}}),
    ("workspace/executeCommand", None),
    ("workspace/executeCommand", {"command": 5}),
    ("workspace/executeCommand", {"command": "piflow.run", "arguments": "not a list"}),
    ("workspace/executeCommand", {"command": "piflow.run", "arguments": [5]}),
    ("workspace/executeCommand", {"command": "piflow.run", "arguments": [{"uri": 5}]}),
    ("workspace/executeCommand", {"command": "piflow.showRun", "arguments": [{"runId": None}]}),
    ("workspace/executeCommand", {"command": "no.such.command", "arguments": []}),
]


@pytest.mark.parametrize(("method", "params"), MALFORMED)
def test_malformed_params_get_invalid_params(ready: RawServer, project: Any, method: str, params: Any) -> None:
    uri = uri_of(project[0] / "a.workflow.js")
    reply = ready.call(method, _substitute(params, uri), timeout=20)
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert reply["error"]["message"]
    assert_still_serving(ready, project[0])


OUT_OF_RANGE: list[tuple[str, Any]] = [
    ("textDocument/hover", _position("URI", line=10_000)),
    ("textDocument/hover", _position("URI", line=1, character=1_000_000)),
    ("textDocument/completion", _position("URI", line=2**31 - 1, character=2**31 - 1)),
    ("textDocument/definition", _position("URI", line=0, character=500)),
    ("textDocument/hover", _position("file:///dev/zero")),
    ("textDocument/hover", _position("not a uri at all")),
    ("textDocument/completion", _position("untitled:Untitled-1")),
    (
        "textDocument/inlayHint",
        {
            "textDocument": {"uri": "URI"},
            "range": {"start": {"line": 9000, "character": 0}, "end": {"line": 2, "character": 0}},
        },
    ),
]


@pytest.mark.parametrize(("method", "params"), OUT_OF_RANGE)
def test_positions_outside_the_document_get_an_empty_answer(
    ready: RawServer, project: Any, method: str, params: Any
) -> None:
    reply = ready.call(method, _substitute(params, uri_of(project[0] / "a.workflow.js")), timeout=20)
    assert "error" not in reply, reply
    assert not reply["result"]
    assert_still_serving(ready, project[0])


def _substitute(value: Any, uri: str) -> Any:
    if value == "URI":
        return uri
    if isinstance(value, dict):
        return {key: _substitute(item, uri) for key, item in value.items()}
    return value


def test_unknown_methods_get_method_not_found_and_unknown_notifications_nothing(ready: RawServer, project: Any) -> None:
    ready.notify("piflow/noSuchNotification", {"x": 1})
    assert ready.call("piflow/noSuchRequest")["error"]["code"] == METHOD_NOT_FOUND
    assert ready.call("$/noSuchRequest", [1, 2])["error"]["code"] == METHOD_NOT_FOUND
    assert_still_serving(ready, project[0])
    assert ready.errors_without_id() == []


def test_a_change_without_changes_changes_nothing(ready: RawServer, project: Any) -> None:
    uri = uri_of(project[0] / "a.workflow.js")
    before = symbols(ready, uri)
    ready.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": []})
    assert symbols(ready, uri) == before
    hover = ready.call("textDocument/hover", _position(uri, line=1, character=21), timeout=10)
    assert "error" not in hover and hover["result"] is not None
    # the next real edit (version 3) is applied as usual
    edit = {
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "text": 'phase("first");\n',
    }
    ready.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [edit]})
    assert len(symbols(ready, uri)) == len(before) + 1


def test_requests_before_initialize_get_server_not_initialized(server: RawServer, project: Any) -> None:
    root = project[0]
    reply = server.call("textDocument/hover", _position(uri_of(root / "a.workflow.js")))
    assert reply["error"]["code"] == SERVER_NOT_INITIALIZED
    assert server.call("shutdown")["error"]["code"] == SERVER_NOT_INITIALIZED
    server.notify(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": uri_of(root / "b.workflow.js"),
                "languageId": "javascript",
                "version": 1,
                "text": SCRIPT,
            }
        },
    )
    bad = server.call("initialize", {"processId": "me", "capabilities": {}})
    assert bad["error"]["code"] == INVALID_PARAMS  # and the client may try again:
    server.initialize(root)
    assert (
        server.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})["error"]["code"]
        == INVALID_REQUEST
    )
    # the didOpen before initialize was dropped: b is not open, a (opened now) is
    assert server.result("textDocument/documentSymbol", {"textDocument": {"uri": uri_of(root / "b.workflow.js")}}) in (
        None,
        [],
    )
    open_script(server, root / "a.workflow.js", SCRIPT)
    assert_still_serving(server, root)


def test_requests_after_shutdown_are_invalid_and_exit_then_exits_0(ready: RawServer, project: Any) -> None:
    uri = uri_of(project[0] / "a.workflow.js")
    assert ready.result("shutdown") is None
    assert ready.call("textDocument/hover", _position(uri))["error"]["code"] == INVALID_REQUEST
    assert ready.call("shutdown")["error"]["code"] == INVALID_REQUEST
    ready.notify("textDocument/didClose", {"textDocument": {"uri": uri}})  # ignored
    ready.notify("exit")
    assert ready.wait() == 0


def test_exit_without_shutdown_exits_1(ready: RawServer) -> None:
    ready.notify("exit")
    assert ready.wait() == 1


def test_exit_before_initialize_exits_1(server: RawServer) -> None:
    server.notify("exit")
    assert server.wait() == 1


# -- a hostile run launched from the editor never leaves the server unable to run the next ---------
def _run(server: RawServer, uri: str) -> dict[str, Any]:
    """Launch the script at `uri` and wait for the run to end; its final view."""
    run_id = server.result(
        "workspace/executeCommand", {"command": "piflow.run", "arguments": [{"uri": uri}]}, timeout=60
    )["runId"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view: dict[str, Any] = server.result(
            "workspace/executeCommand", {"command": "piflow.showRun", "arguments": [{"runId": run_id}]}
        )
        if view["state"] in ("completed", "failed", "cancelled"):
            return view
        time.sleep(0.1)
    raise TimeoutError(f"run {run_id} did not end")


@pytest.mark.parametrize("hostile", [DEEP_RESULT, LONE_SURROGATES], ids=["3000-deep-result", "lone-surrogates"])
def test_after_a_hostile_run_the_next_run_works(ready: RawServer, project: Any, hostile: str) -> None:
    root = project[0]
    bad = _run(ready, open_script(ready, root / "hostile.workflow.js", hostile))
    assert bad["state"] == "failed", bad
    good = _run(ready, uri_of(root / "a.workflow.js"))
    assert good["state"] == "completed", good
    again = _run(ready, uri_of(root / "hostile.workflow.js"))  # and the hostile one fails the same way again
    assert again["state"] == "failed"
    assert_still_serving(ready, root)
