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
import ctypes.util
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from piflow import __version__
from piflow.errors import WorkflowError
from piflow.server.protocol import COMMAND_ERROR_CODE, ClientOptions, InitializationOptions

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
    """pygls' protocol with two changes: UTF-8 positions whenever the client offers them, and one
    document table (the server's, with parse trees) instead of a second copy in pygls' workspace."""

    _server: PiflowServer

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
        self._server.documents.change(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self._server.documents.close(params)


class PiflowServer(LanguageServer):
    """The language server: a registry of features plus the few services all of them share."""

    protocol: PiflowProtocol

    def __init__(self) -> None:
        super().__init__("piflow", __version__, protocol_cls=PiflowProtocol)
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
        self.feature(types.INITIALIZE)(_plain(self._initialize))
        self.feature(types.INITIALIZED)(_plain(self._initialized))
        self.feature(types.SHUTDOWN)(_plain_async(self._shutdown))

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
        """
        if self._trim is not None:
            self._trim.cancel()
        self._trim = asyncio.get_running_loop().call_later(1.0, _malloc_trim)

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
        """Send a `piflow/*` notification, only to clients that opted in."""
        if self.options.custom_notifications:
            self.protocol.notify(method, params)


def _malloc_trim() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


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
