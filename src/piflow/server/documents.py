"""The open-document table: versions and edits on the loop, text and parse trees in worker threads.

ruff's server rule, applied: the table changes only on the event loop (didOpen/didChange/didClose
are cheap bookkeeping there), and everything that costs CPU — applying the edits to the document's
text and tree-sitter tree, analysing it — runs in a worker thread. A document's buffer (its
`ScriptDocument`, tree included) belongs to at most one job at a time, so the incremental parse
needs no lock; a job brings it to the newest version, builds an immutable `Snapshot`, and every
feature reads snapshots only.

Scheduling is a keyed debounce per document: an edit starts a job at once when the document is
idle (or after `debounceMs`, if the client asked for one); edits arriving while a job runs are
coalesced into its next step. The findings come first (diagnostics wait for nothing else); the
workflow calls that lenses, the outline and hints read are found when typing pauses or when a
request needs them; the engine compile follows an open or a save. A snapshot older than the
document is never shown (its version is checked before publishing); requests that need the
current text wait for the job, never for the client.

Memory: a document keeps its text and its snapshot's findings; only the few most recently opened or
edited keep the parse tree and statement facts that make a keystroke's re-analysis incremental
(`WARM_DOCUMENTS`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Final

from lsprotocol import types
from pygls.uris import to_fs_path

from piflow.analysis.document import ScriptDocument
from piflow.config.paths import (
    PROJECT_CONFIG_NAME,
    SETTINGS_FILE_NAME,
    WORKFLOWS_DIR_NAME,
    agent_dir,
    models_registry_path,
)
from piflow.server.base import LanguageFeature, PiflowServer, handler
from piflow.server.snapshot import Buffer, Change, DocumentKind, Snapshot, check_version, describe_version, new_buffer

if TYPE_CHECKING:
    from piflow.server.projects import Projects

log = logging.getLogger(__name__)

SCRIPT_LANGUAGE_IDS: Final = frozenset({"piflow-workflow", "javascript.piflow"})
"""What older VS Code extensions and Neovim plugins (a compound filetype) called a workflow script.

Editors now keep workflow scripts `javascript` (so the host's JavaScript tooling stays on): a
`javascript` document is a script by its name (`*.workflow.js`) or its project's `scripts` globs
(checked once its project is loaded, in `DocumentTable._check`); other JavaScript gets nothing.
"""
DESCRIBE_AFTER: Final = 0.2
"""Seconds of quiet typing before a version's calls are found unasked (lenses, outline, hints)."""
SCRIPT_SUFFIX: Final = ".workflow.js"
WARM_DOCUMENTS: Final = 3
"""How many of the most recently opened or edited scripts keep their parse tree and statement facts
between analyses (so a keystroke re-parses and re-walks one statement); the others release both when
their job ends (three quarters of an idle document's memory, bench/memory.py) and parse and walk
afresh when next edited, or parse when a feature (hover, completion...) needs their tree."""


def classify(path: str | None, language_id: str) -> DocumentKind:
    """What an open file is to piflow, from its name (and the language id a plugin assigns)."""
    if language_id in SCRIPT_LANGUAGE_IDS:
        return DocumentKind.SCRIPT
    if path is None:
        return DocumentKind.OTHER
    pure = PurePath(path)
    if pure.name.endswith(SCRIPT_SUFFIX):
        return DocumentKind.SCRIPT
    if pure.name == SETTINGS_FILE_NAME and pure.parent.name == WORKFLOWS_DIR_NAME:
        return DocumentKind.SETTINGS
    if pure.suffix == ".md" and pure.parent.name == "roles" and pure.parent.parent.name == WORKFLOWS_DIR_NAME:
        return DocumentKind.ROLE
    if pure.name == PROJECT_CONFIG_NAME or (pure.name == "config.toml" and pure.parent.name == "piflow"):
        return DocumentKind.PIFLOW_TOML
    if pure == PurePath(models_registry_path(agent_dir())):
        return DocumentKind.MODELS
    return DocumentKind.OTHER


@dataclass(eq=False)
class OpenDocument:
    """One open file. `version` is the client's newest; `snapshot` the newest one analysed."""

    uri: str
    path: str | None
    root: Path
    """The project the document belongs to (its configuration, its run store)."""
    kind: DocumentKind
    version: int
    buffer: Buffer
    pending: list[Change] = field(default_factory=list)
    snapshot: Snapshot | None = None
    closed: bool = False
    compile_wanted: bool = False
    recheck_wanted: bool = False
    job: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    describe_timer: asyncio.TimerHandle | None = None
    describe_due: bool = False
    waiters: list[tuple[Need, asyncio.Future[Snapshot]]] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        """Whether the newest snapshot shows the text (and configuration) the client has now."""
        return (
            self.snapshot is not None
            and self.snapshot.version == self.version
            and not self.pending
            and not self.recheck_wanted
        )


@dataclass(frozen=True)
class Need:
    """What a request waits for: the findings of `version`, and maybe its calls or the engine compile."""

    version: int
    calls: bool
    compiled: bool

    def met(self, snapshot: Snapshot) -> bool:
        return (
            snapshot.version >= self.version
            and (snapshot.described or not self.calls)
            and (snapshot.compiled or not self.compiled)
        )


class DocumentTable(LanguageFeature):
    """The table of open documents and the jobs that keep their snapshots current."""

    def __init__(self, server: PiflowServer) -> None:
        super().__init__(server)
        self._documents: dict[str, OpenDocument] = {}
        self._warm: list[OpenDocument] = []
        """The `WARM_DOCUMENTS` most recently opened or edited documents, the newest last."""

    def register(self) -> None:
        self.server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(handler(self.save))

    # -- notifications (called by the protocol, on the loop) --------------------------------------
    def open(self, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        path = to_fs_path(item.uri)
        previous = self._documents.pop(item.uri, None)
        if previous is not None:
            self._retire(previous)
        kind = classify(path, item.language_id)
        document = OpenDocument(
            uri=item.uri,
            path=path,
            root=self._projects.root_for(path),
            kind=kind,
            version=item.version,
            buffer=new_buffer(kind),
            pending=[Change(None, item.text)],
            compile_wanted=kind is DocumentKind.SCRIPT,
        )
        self._documents[item.uri] = document
        self._touch(document)
        self.server.dispatch("document_opened", document)
        self._schedule(document)

    def change(self, params: types.DidChangeTextDocumentParams) -> None:
        document = self._documents.get(params.text_document.uri)
        if document is None:
            log.warning("change for a document that is not open: %s", params.text_document.uri)
            return
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                start, end = change.range.start, change.range.end
                document.pending.append(Change((start.line, start.character, end.line, end.character), change.text))
            else:
                document.pending.append(Change(None, change.text))
        document.version = params.text_document.version
        self._touch(document)
        document.describe_due = False  # typing goes on: find the calls when it pauses
        # A compile is for the text of a save, which this edit replaces (unless a run waits for one).
        document.compile_wanted = any(need.compiled for need, _ in document.waiters)
        self.server.dispatch("document_changed", document)
        self._schedule(document)

    def save(self, params: types.DidSaveTextDocumentParams) -> None:
        document = self._documents.get(params.text_document.uri)
        if document is None:
            return
        document.compile_wanted = document.kind is DocumentKind.SCRIPT
        self.server.dispatch("document_saved", document)
        self._schedule(document)

    def close(self, params: types.DidCloseTextDocumentParams) -> None:
        document = self._documents.pop(params.text_document.uri, None)
        if document is not None:
            self._retire(document)
            self.server.dispatch("document_closed", document)
            self.server.release_memory_later()  # what the allocator cannot hand back, it reuses

    def _touch(self, document: OpenDocument) -> None:
        """Make `document` the most recently used; the one that falls out of the warm set is cooled."""
        warm = self._warm
        if warm and warm[-1] is document:
            return
        if document in warm:
            warm.remove(document)
        warm.append(document)
        if len(warm) > WARM_DOCUMENTS:
            self._cool(warm.pop(0))

    def _cool(self, document: OpenDocument) -> None:
        """Release the tree and facts of a document nobody is typing in (its job, if one runs,
        calls this again when it ends); its next edit, or a feature that needs the tree, parses."""
        if document.job is None and isinstance(document.buffer, ScriptDocument):
            document.buffer.release()
            if document.snapshot is not None:
                document.snapshot = document.snapshot.without_tree()

    def _retire(self, document: OpenDocument) -> None:
        document.closed = True
        if document in self._warm:
            self._warm.remove(document)
        for timer in (document.timer, document.describe_timer):
            if timer is not None:
                timer.cancel()
        for _, waiter in document.waiters:
            if not waiter.done():
                waiter.cancel()
        document.waiters.clear()

    @property
    def _projects(self) -> Projects:
        from piflow.server.projects import Projects

        return self.server.get_feature(Projects)

    # -- queries ----------------------------------------------------------------------------------
    def get(self, uri: str) -> OpenDocument | None:
        return self._documents.get(uri)

    def __iter__(self) -> Iterator[OpenDocument]:
        return iter(list(self._documents.values()))

    def recheck(self, document: OpenDocument, *, compile: bool = False) -> None:
        """Analyse again without an edit (configuration, roles or models changed)."""
        document.root = self._projects.root_for(document.path)  # a piflow.toml may have appeared
        document.recheck_wanted = True
        document.compile_wanted = document.compile_wanted or compile
        self._schedule(document)

    async def current(self, uri: str, *, calls: bool = True, compiled: bool = False) -> Snapshot | None:
        """The snapshot of the document's newest version (waiting for its job); None if not open.

        `calls=False` is enough for diagnostics (they need findings only, which come first);
        `compiled=True` waits for the engine compile of that version too (before a run).
        """
        document = self._documents.get(uri)
        if document is None:
            return None
        need = Need(document.version, calls, compiled)
        if document.fresh and document.snapshot is not None and need.met(document.snapshot):
            return document.snapshot
        if compiled:
            document.compile_wanted = True
        waiter: asyncio.Future[Snapshot] = asyncio.get_running_loop().create_future()
        document.waiters.append((need, waiter))
        self._schedule(document, now=True)
        try:
            return await waiter
        except asyncio.CancelledError:
            if document.closed:
                return None
            raise

    # -- jobs -------------------------------------------------------------------------------------
    def _schedule(self, document: OpenDocument, *, now: bool = False) -> None:
        if document.closed or document.job is not None:
            return  # a running job picks the new work up when it finishes
        delay = self.server.options.debounce_ms / 1000
        if document.timer is not None:
            document.timer.cancel()
            document.timer = None
        if now or delay <= 0:
            self._start(document)
        else:
            document.timer = asyncio.get_running_loop().call_later(delay, self._start, document)

    def _start(self, document: OpenDocument) -> None:
        document.timer = None
        if document.closed or document.job is not None:
            return
        document.job = self.server.spawn(self._run(document))

    async def _run(self, document: OpenDocument) -> None:
        """Bring the document's snapshot up to date, step by step, as long as there is work.

        Steps, most urgent first: check the newest edits (apply them, find the findings: what
        diagnostics wait for); describe the checked version (its workflow calls, for lenses,
        symbols, hover...), skipped while edits keep coming; run the engine compile (on open and
        save). Each step takes the buffer alone, in a worker thread.
        """
        try:
            while not document.closed:
                if document.pending or document.recheck_wanted:
                    await self._check(document, compile=False)
                elif document.snapshot is not None and not document.snapshot.described:
                    if not document.describe_due and not any(need.calls for need, _ in document.waiters):
                        self._describe_later(document)
                        break
                    await self._describe(document)
                elif document.compile_wanted:
                    document.compile_wanted = False
                    await self._check(document, compile=True)
                else:
                    break
        except Exception:
            # A bug must cost an answer, not the server: waiting requests get the newest snapshot
            # there is (or are cancelled), and the next edit starts afresh.
            log.exception("updating %s failed", document.uri)
            self._give_up(document)
        finally:
            document.job = None
            if document not in self._warm and (document.snapshot is None or document.snapshot.described):
                self._cool(document)  # (after the describe step, which needs the tree)
            self.server.release_memory_later()

    def _give_up(self, document: OpenDocument) -> None:
        waiting, document.waiters = document.waiters, []
        for _, waiter in waiting:
            if waiter.done():
                continue
            if document.snapshot is not None:
                waiter.set_result(document.snapshot)
            else:
                waiter.cancel()

    def _describe_later(self, document: OpenDocument) -> None:
        if document.describe_timer is not None:
            document.describe_timer.cancel()

        def due() -> None:
            document.describe_timer = None
            document.describe_due = True
            self._schedule(document, now=True)

        document.describe_timer = asyncio.get_running_loop().call_later(DESCRIBE_AFTER, due)

    async def _check(self, document: OpenDocument, *, compile: bool) -> None:
        changes, document.pending = document.pending, []
        document.recheck_wanted = False
        version = document.version
        project = await self._projects.get(document.root)
        if document.kind is DocumentKind.OTHER and project.is_script(document.path):
            # piflow.toml's `scripts` globs name it: from now on the text is parsed as a script.
            changes = [Change(None, document.buffer.text), *changes]
            document.kind, document.buffer = DocumentKind.SCRIPT, new_buffer(DocumentKind.SCRIPT)
        previous = document.snapshot
        same_text = previous is not None and previous.version == version and not changes
        # A recheck (configuration changed) of a compiled version compiles again: the authoritative
        # verdict must not be lost; the calls of an unchanged text need not be found again.
        compile = compile or (same_text and previous is not None and previous.compiled)
        run = self.server.run_compile if compile else self.server.run_in_thread
        snapshot = await run(
            check_version, document.uri, document.kind, document.buffer, changes, version, project,
            compile=compile, utf8=self.server.utf8,
        )
        if same_text and previous is not None:
            snapshot = snapshot.described_as(previous)
        self._settle(document, snapshot, "findings_ready")

    async def _describe(self, document: OpenDocument) -> None:
        document.describe_due = False
        checked = document.snapshot
        assert checked is not None
        snapshot = await self.server.run_in_thread(describe_version, document.buffer, checked)
        self._settle(document, snapshot, "snapshot_ready")

    def _settle(self, document: OpenDocument, snapshot: Snapshot, hook: str) -> None:
        """Keep a finished step's snapshot; answer the requests it satisfies; tell the features."""
        if document.closed:
            return
        document.snapshot = snapshot
        if not document.fresh:
            return  # newer edits are queued: nobody wants to see this version any more
        waiting, document.waiters = document.waiters, []
        for need, waiter in waiting:
            if waiter.done():
                continue
            if need.met(snapshot):
                waiter.set_result(snapshot)
            else:
                document.waiters.append((need, waiter))
        self.server.dispatch(hook, document)
        if hook == "findings_ready" and snapshot.described:
            self.server.dispatch("snapshot_ready", document)
