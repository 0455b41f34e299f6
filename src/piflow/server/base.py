"""The server object, the feature base class and the hooks every feature may implement (esbonio's pattern).

Each LSP capability lives in its own module as a `LanguageFeature`; the server only dispatches the
lifecycle (initialize, initialized, document open/change/save/close, shutdown) to them, in the
order they were added. Every hook runs on the event loop and must return quickly: work that
costs CPU goes to `PiflowServer.run_in_thread` on a snapshot, and no hook awaits the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO, ParamSpec, TypeVar

import attrs
import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from piflow import __version__
from piflow.errors import WorkflowError
from piflow.server.protocol import COMMAND_ERROR_CODE, ClientOptions, InitializationOptions
from piflow.server.wire import WireError, read_frames

if TYPE_CHECKING:
    from piflow.server.documents import DocumentTable, OpenDocument
    from piflow.server.runs import RunEvent

log = logging.getLogger(__name__)

F = TypeVar("F", bound="LanguageFeature")
P = ParamSpec("P")
R = TypeVar("R")


class LanguageFeature:
    """One capability of the server. Override the hooks you need; `register` adds LSP handlers."""

    def __init__(self, server: PiflowServer) -> None:
        self.server = server

    def register(self) -> None:
        """Add this feature's request and notification handlers (called once, before `initialize`)."""

    def initialize(self, params: types.InitializeParams) -> None:
        """The client's capabilities are known; handlers that depend on them may be added now."""

    def initialized(self) -> None:
        """The client is ready for requests from the server (registrations, refreshes)."""

    def document_opened(self, document: OpenDocument) -> None: ...

    def document_changed(self, document: OpenDocument) -> None: ...

    def document_saved(self, document: OpenDocument) -> None: ...

    def document_closed(self, document: OpenDocument) -> None: ...

    def findings_ready(self, document: OpenDocument) -> None:
        """`document.snapshot` has the findings of the text the client has now (its calls may follow)."""

    def snapshot_ready(self, document: OpenDocument) -> None:
        """`document.snapshot` is complete (findings and calls) for the text the client has now."""

    def run_event(self, event: RunEvent) -> None:
        """Something happened to a run of an open project (launched here or anywhere else)."""

    def workspace_changed(self, paths: list[str] | None) -> None:
        """Files changed on disk (`paths`), or the configuration did (None: anything may have changed)."""

    async def shutdown(self) -> None:
        """The client asked the server to shut down; finish or hand over what must survive."""


class PiflowProtocol(LanguageServerProtocol):
    """pygls' protocol with three changes: every frame is admitted by `receive` (so every request
    gets exactly one response, as the LSP specification says), UTF-8 positions whenever the client
    offers them, and one document table (the server's, with parse trees) instead of pygls' copy."""

    _server: PiflowServer
    _initialize_received = False
    _shutdown_received = False

    # -- admission: what pygls would drop without a reply is answered here -------------------------
    def receive(self, frame: bytes | WireError) -> None:
        """Handle one frame from the wire: a message, or an error the reader found in the framing."""
        if isinstance(frame, WireError):
            self._refuse(None, frame.code, frame.message)
            return
        try:
            message = json.loads(frame.decode("utf-8"))
        except UnicodeDecodeError as error:
            self._refuse(
                None,
                types.ErrorCodes.ParseError,
                f"Parse error: the message is not valid UTF-8 ({error.reason} at byte {error.start})",
            )
            return
        except (ValueError, RecursionError) as error:
            self._refuse(None, types.ErrorCodes.ParseError, f"Parse error: {error}")
            return
        if not isinstance(message, dict):
            self._refuse(
                None,
                types.ErrorCodes.InvalidRequest,
                "Invalid Request: a message must be a JSON object (LSP has no batches)",
            )
            return
        msg_id = message.get("id")
        valid_id = isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)
        if "method" not in message:
            if valid_id and ("result" in message or "error" in message):
                self._receive_response(message)
            else:
                reply_to = msg_id if valid_id else None
                self._refuse(
                    reply_to,
                    types.ErrorCodes.InvalidRequest,
                    "Invalid Request: neither a request, a notification nor a response",
                )
            return
        method = message["method"]
        if "id" not in message:
            self._receive_notification(method, message)
        elif not valid_id:
            self._refuse(
                None, types.ErrorCodes.InvalidRequest, "Invalid Request: the id must be an integer or a string"
            )
        else:
            assert isinstance(msg_id, (int, str))
            self._receive_request(msg_id, method, message)

    def _receive_request(self, msg_id: int | str, method: Any, message: dict[str, Any]) -> None:
        if message.get("jsonrpc") != self.VERSION or not isinstance(method, str):
            self._refuse(
                msg_id,
                types.ErrorCodes.InvalidRequest,
                'Invalid Request: "jsonrpc" must be "2.0" and "method" a string',
            )
        elif method == types.INITIALIZE and self._initialize_received:
            self._refuse(msg_id, types.ErrorCodes.InvalidRequest, "Invalid Request: initialize was already received")
        elif method != types.INITIALIZE and not self._initialize_received:
            self._refuse(msg_id, types.ErrorCodes.ServerNotInitialized, "Server not initialized: send initialize first")
        elif self._shutdown_received:
            self._refuse(msg_id, types.ErrorCodes.InvalidRequest, "Invalid Request: the server is shutting down")
        elif _is_notification(self.get_message_type(method)):
            self._refuse(msg_id, types.ErrorCodes.MethodNotFound, f"{method} is a notification: send it without an id")
        else:
            request, invalid = self._structure(method, message, JsonRPCRequestMessage)
            if request is None:
                self._refuse(msg_id, types.ErrorCodes.InvalidParams, f"Invalid params for {method}: {invalid}")
                return
            self._initialize_received = True
            if method == types.SHUTDOWN:
                self._shutdown_received = True
            self.handle_message(request)

    def _receive_notification(self, method: Any, message: dict[str, Any]) -> None:
        if message.get("jsonrpc") != self.VERSION or not isinstance(method, str):
            log.warning("ignoring a malformed notification")
        elif method != types.EXIT and (not self._initialize_received or self._shutdown_received):
            log.warning("ignoring %s: the server is not initialized or is shutting down", method)
        else:
            notification, invalid = self._structure(method, message, JsonRPCNotification)
            if notification is None:
                log.warning("ignoring %s with invalid params: %s", method, invalid)
            else:
                self.handle_message(notification)

    def _receive_response(self, message: dict[str, Any]) -> None:
        """A client's answer to a server request; one that cannot be read fails the request's future."""
        try:
            response = self.structure_message(message)
        except JsonRpcException as error:
            future = self._request_futures.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_exception(error)
            return
        self.handle_message(response)

    def _structure(self, method: str, message: dict[str, Any], fallback: type[Any]) -> tuple[Any, str]:
        """The typed message (lsprotocol's type for `method`), or None and why the params are wrong."""
        kind = self.get_message_type(method)
        if kind is None:  # a method lsprotocol does not know: params are optional
            kind, message = fallback, {"params": None, **message}
        try:
            return self._converter.structure(message, kind), ""
        except Exception as error:  # cattrs raises many kinds; all of them mean the params are wrong
            return None, _describe_invalid(error)

    def _refuse(self, msg_id: int | str | None, code: int, message: str) -> None:
        log.warning("refused a message: %s", message)
        self._send_data({"jsonrpc": self.VERSION, "id": msg_id, "error": {"code": code, "message": message}})

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            # tree-sitter counts UTF-8 bytes: with UTF-8 positions no conversion is needed at all.
            offered = list(general.position_encodings)
            if types.PositionEncodingKind.Utf8 in offered:
                general.position_encodings = [types.PositionEncodingKind.Utf8]
            elif types.PositionEncodingKind.Utf16 in offered:
                general.position_encodings = [types.PositionEncodingKind.Utf16]
        result = yield from super().lsp_initialize(params)
        return result

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self._server.documents.open(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        if params.content_changes:  # no change, no new version: requests wait for versions that come
            self._server.documents.change(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self._server.documents.close(params)


class PiflowServer(LanguageServer):
    """The language server: a registry of features plus the few services all of them share."""

    protocol: PiflowProtocol

    def __init__(self) -> None:
        super().__init__("piflow", __version__, protocol_cls=PiflowProtocol, converter_factory=strict_converter)
        self._features: dict[type[LanguageFeature], LanguageFeature] = {}
        self.options = ClientOptions()
        self.utf8 = False
        self._background: set[asyncio.Task[Any]] = set()
        self._refreshes: dict[str, asyncio.TimerHandle] = {}
        # Analysis and store reads: few threads, so a burst of edits cannot starve the loop's GIL.
        self._cpu = ThreadPoolExecutor(max_workers=2, thread_name_prefix="piflow-cpu")
        # The engine compile keeps a JavaScript interpreter per thread: one thread, one interpreter.
        self._compile = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piflow-compile")
        self._trim: asyncio.TimerHandle | None = None
        self._heap = _FrozenHeap()
        self.feature(types.INITIALIZE)(_plain(self._initialize))
        self.feature(types.INITIALIZED)(_plain(self._initialized))
        self.feature(types.SHUTDOWN)(_plain_async(self._shutdown))

    # -- transport ----------------------------------------------------------------------------
    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve LSP on stdio until `exit` (which ends the process with the code LSP prescribes) or EOF."""
        self._serve_stream(stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one client that connects to `host:port`, as on stdio."""
        with socket.create_server((host, port)) as listener:
            connection, _ = listener.accept()
        with connection, connection.makefile("rb") as reader, connection.makefile("wb") as writer:
            self._serve_stream(reader, writer)

    def _serve_stream(self, reader: BinaryIO, writer: BinaryIO) -> None:
        # The reading thread gets a reader of its own on a copy of the descriptor: blocked in a read
        # when the process exits, it must hold no lock that interpreter shutdown takes (sys.stdin's).
        reader = os.fdopen(os.dup(reader.fileno()), "rb")
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(writer))
        try:
            asyncio.run(self._receive(reader))
        except BrokenPipeError:
            log.error("the connection to the client is lost: shutting down")
        except KeyboardInterrupt:
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]  # pygls' own cleanup (stop event, thread pool)

    async def _receive(self, reader: BinaryIO) -> None:
        """Feed the protocol the frames a daemon thread reads (see `piflow.server.wire`), one at a time."""
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[bytes | WireError | None] = asyncio.Queue(maxsize=16)

        def pump() -> None:
            try:
                for frame in read_frames(reader):
                    asyncio.run_coroutine_threadsafe(inbox.put(frame), loop).result()
            except (OSError, ValueError, RuntimeError) as error:  # the stream or the loop closed
                log.debug("reading the client stopped: %s", error)
            finally:
                with contextlib.suppress(RuntimeError):
                    asyncio.run_coroutine_threadsafe(inbox.put(None), loop)

        threading.Thread(target=pump, name="piflow-wire", daemon=True).start()
        while (frame := await inbox.get()) is not None:
            try:
                self.protocol.receive(frame)
            except Exception:  # a bug costs one message, never the connection
                log.exception("handling a message failed")

    # -- features -----------------------------------------------------------------------------
    def add_feature(self, feature: LanguageFeature) -> None:
        self._features[type(feature)] = feature
        feature.register()

    def get_feature(self, kind: type[F]) -> F:
        feature = self._features[kind]
        assert isinstance(feature, kind)
        return feature

    @property
    def features(self) -> Iterator[LanguageFeature]:
        return iter(list(self._features.values()))

    @property
    def documents(self) -> DocumentTable:
        """The open-document table, which the protocol feeds didOpen/didChange/didClose."""
        from piflow.server.documents import DocumentTable

        return self.get_feature(DocumentTable)

    # -- lifecycle dispatch -------------------------------------------------------------------
    def _initialize(self, params: types.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict):
            try:
                self.options = InitializationOptions.model_validate(options).piflow
            except ValueError as exc:
                log.warning("ignoring invalid initializationOptions: %s", exc)
        self.utf8 = self.workspace.position_encoding == types.PositionEncodingKind.Utf8
        for feature in self.features:
            feature.initialize(params)

    def _initialized(self, params: types.InitializedParams) -> None:
        for feature in self.features:
            feature.initialized()

    def dispatch(self, hook: str, *args: Any) -> None:
        """Call a hook on every feature; one feature's failure must not starve the others."""
        for feature in self.features:
            try:
                getattr(feature, hook)(*args)
            except Exception:
                log.exception("%s.%s failed", type(feature).__name__, hook)

    async def _shutdown(self, params: None) -> None:
        if self._trim is not None:
            self._trim.cancel()
        for feature in reversed(list(self.features)):
            try:
                await feature.shutdown()
            except Exception:
                log.exception("%s.shutdown failed", type(feature).__name__)
        for task in list(self._background):
            task.cancel()
        self._cpu.shutdown(wait=False, cancel_futures=True)
        self._compile.shutdown(wait=False, cancel_futures=True)

    # -- shared services ----------------------------------------------------------------------
    def client_supports(self, path: str) -> bool:
        """Whether a dotted client capability (`text_document.diagnostic`) is present and truthy."""
        value: Any = self.client_capabilities
        for part in path.split("."):
            value = getattr(value, part, None)
            if value is None:
                return False
        return bool(value) if isinstance(value, bool) else True

    async def run_in_thread(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run CPU or blocking work off the loop; cancelling the awaiting task abandons the result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._cpu, lambda: function(*args, **kwargs))

    async def run_compile(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run work that uses the engine compile on its own thread (see `__init__`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._compile, lambda: function(*args, **kwargs))

    def release_memory_later(self) -> None:
        """Once work has been quiet for a second, hand freed heap pages back to the OS.

        glibc keeps what a burst of parsing freed; a server idling with many open documents should
        not look as big as it was at its busiest. (No-op where `malloc_trim` does not exist.)
        What survived the quiet second (modules, open documents' trees and facts) is then frozen
        out of the garbage collector: a full collection otherwise walks it all and stalls typing
        for 30-70 ms (a document of 5,000 agents is 60,000 objects) while a big run is followed
        (measured with bench/lsp.py --during-run).
        """
        if self._trim is not None:
            self._trim.cancel()
        self._trim = asyncio.get_running_loop().call_later(1.0, self._quiet)

    def _quiet(self) -> None:
        self._heap.settle()
        _trim_heap()

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start background work (a client request we wait on, a poller); its errors are logged."""
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("background task failed", exc_info=error)

    def request_refresh(self, capability: str, send: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Ask the client to re-request something (lenses, hints, diagnostics), if it can be asked:
        once per burst of changes, 100 ms after the first."""
        if capability in self._refreshes or not self.client_supports(capability):
            return

        def fire() -> None:
            del self._refreshes[capability]
            self.spawn(send())

        self._refreshes[capability] = asyncio.get_running_loop().call_later(0.1, fire)

    def notify_custom(self, method: str, params: dict[str, Any]) -> None:
        """Send a `piflow/*` notification, only to clients that opted in. `params` is already the
        wire's JSON (a model's `to_wire()`), so it skips the converter's walk of every value."""
        if self.options.custom_notifications:
            self.send_custom(custom_notification(method, params))

    def send_custom(self, frame: bytes) -> None:
        """Send a `piflow/*` notification framed by `custom_notification` (in a worker thread, for
        a big one: a 5,000-agent run's progress is 1 MB of JSON), only to clients that opted in."""
        writer = self.protocol.writer
        if not self.options.custom_notifications or writer is None:
            return
        written = writer.write(frame)
        if asyncio.iscoroutine(written):  # (a writer may be asynchronous, as pygls allows)
            self.spawn(written)


def custom_notification(method: str, params: dict[str, Any]) -> bytes:
    """The wire frame of a notification whose `params` are already the wire's JSON (any thread)."""
    body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s" % (
        len(body), body
    )


def _is_notification(kind: type[Any] | None) -> bool:
    """Whether lsprotocol defines the method as a notification (its message has no id)."""
    return kind is not None and attrs.has(kind) and "id" not in attrs.fields_dict(kind)


def strict_converter() -> cattrs.Converter:
    """pygls' converter, minus coercion: `"3"`, `1.5` or `true` is not a line, `5` is not a URI.

    cattrs would call `int()`/`str()`/`bool()` on whatever came; a wrong type must be InvalidParams.
    """
    converter: cattrs.Converter = default_converter()  # type: ignore[no-untyped-call]
    for kind in (int, str, bool):
        converter.register_structure_hook(kind, _exactly(kind))
    converter.register_structure_hook(float, _number)
    return converter


def _exactly(kind: type[Any]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


def _number(value: Any, _: Any) -> float:
    if type(value) not in (int, float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _describe_invalid(error: Exception) -> str:
    """What is wrong with a message's params, where (`$.params.position.line`), in one line."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error, format_exception=_leaf))[:500]
    return _leaf(error, None)[:500]


def _leaf(error: BaseException, kind: Any) -> str:
    if isinstance(error, KeyError):
        return "required field missing"
    return str(error) or type(error).__name__


class _FrozenHeap:
    """The server's long-lived objects, kept out of the collector's full collections.

    Each quiet second the young objects are collected (only they: frozen ones are never
    traversed) and the survivors frozen. A frozen object is still freed when its last reference
    goes; only a cycle among frozen objects waits, for the full sweep made at a quiet second once
    the frozen heap has doubled since the last one (so what a cycle holds stays bounded).
    """

    def __init__(self) -> None:
        self._swept = 0
        """Frozen objects right after the last full sweep."""

    def settle(self) -> None:
        sweep = gc.get_freeze_count() >= 2 * self._swept  # (the first time, nothing is frozen yet)
        if sweep:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        if sweep:
            self._swept = gc.get_freeze_count()


def _trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc's `malloc_trim`, found in the process itself:
    `ctypes.util.find_library` would run `ldconfig` in a subprocess, on the loop, every time)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def command_error(error: WorkflowError) -> JsonRpcException:
    """The LSP error a failed command answers with: RequestFailed, the code and message in `data`."""
    return JsonRpcException(
        message=f"{error.code}: {error.message}",
        code=COMMAND_ERROR_CODE,
        data={"code": error.code, "message": error.message},
    )


def _plain(method: Callable[P, R]) -> Callable[P, R]:
    """A function wrapper for a bound method: pygls sets attributes on handlers, methods refuse them."""

    def handler(*args: P.args, **kwargs: P.kwargs) -> R:
        return method(*args, **kwargs)

    handler.__name__ = getattr(method, "__name__", "handler")
    return handler


def _plain_async(method: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    async def handler(*args: P.args, **kwargs: P.kwargs) -> R:
        return await method(*args, **kwargs)

    handler.__name__ = getattr(method, "__name__", "handler")
    return handler


def handler(method: Callable[P, Any]) -> Callable[P, Any]:
    """Wrap a feature's bound method for `server.feature(...)` / `server.command(...)`."""
    if asyncio.iscoroutinefunction(method):
        return _plain_async(method)
    return _plain(method)
