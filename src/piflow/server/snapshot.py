"""One analysed version of an open document, and the worker-thread job that produces it.

A `Snapshot` is immutable: the text of one version, its findings, the workflow calls it makes and
the conversions between its byte offsets and the client's positions (UTF-8 bytes or UTF-16 code
units, whichever was negotiated). Every editor feature reads snapshots; none touches a buffer.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path
from tree_sitter import Tree

from piflow.analysis.document import ScriptDocument, parse_script
from piflow.analysis.findings import Finding
from piflow.analysis.positions import Range, TextIndex

if TYPE_CHECKING:
    from piflow.server.projects import Project

log = logging.getLogger(__name__)


class DocumentKind(StrEnum):
    """What an open file is to piflow; only scripts are parsed as JavaScript."""

    SCRIPT = "script"
    SETTINGS = "settings"
    ROLE = "role"
    PIFLOW_TOML = "piflow.toml"
    MODELS = "models.json"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Change:
    """A client edit as received: `range` is `(line, character, line, character)` in the client's
    encoding, None for a whole-document replacement."""

    range: tuple[int, int, int, int] | None
    text: str


class PlainText:
    """The buffer of a file that is not a script (settings, roles, piflow.toml): text and positions."""

    def __init__(self, text: str = "") -> None:
        self.index = TextIndex(text)

    @property
    def text(self) -> str:
        return self.index.text

    def replace(self, text: str, version: int | None = None) -> None:
        self.index = TextIndex(text)

    def apply_change(
        self, start_line: int, start_character: int, end_line: int, end_character: int, new_text: str,
        version: int | None = None,
    ) -> None:
        index = self.index
        start = index.offset_at(start_line, start_character)
        end = max(start, index.offset_at(end_line, end_character))
        data = index.data[:start] + new_text.encode("utf-8", "surrogatepass") + index.data[end:]
        self.index = TextIndex(data.decode("utf-8", "surrogatepass"), data)


Buffer = ScriptDocument | PlainText


def new_buffer(kind: DocumentKind) -> Buffer:
    return ScriptDocument("") if kind is DocumentKind.SCRIPT else PlainText()


@dataclass(frozen=True, eq=False)
class Snapshot:
    """A document version as the features see it."""

    uri: str
    kind: DocumentKind
    version: int
    index: TextIndex
    utf8: bool
    project: Project
    findings: tuple[Finding, ...] = ()
    compiled: bool = False
    """Whether the engine compile checked this version (authoritative syntax errors)."""
    calls: tuple[Any, ...] | None = None
    """The script's workflow calls (`inspect` records, body offsets in UTF-16 units); None until
    the version is described (that step follows the findings, so diagnostics never wait for it)."""
    body_start: int = 0
    """Byte offset of the body (after a `meta` header): inspect and journal offsets count from here."""
    kept_tree: Tree | None = None
    """A copy of the script's parse tree once described (the buffer's own keeps changing in later
    jobs); features read `tree`."""
    tree_released: bool = False
    """The document let its tree go (`without_tree`): `tree` parses the text again when asked."""

    @property
    def described(self) -> bool:
        return self.calls is not None

    @cached_property
    def dialect(self) -> str:
        """The script's dialect, decided once for this version from its text, path and project's
        `[dialects]` globs: every feature asks this, never the text, so they agree with check and run."""
        from piflow.analysis.dialects import detect_dialect

        settings = self.project.config.project if self.project.config is not None else None
        return detect_dialect(self.index.data, path=to_fs_path(self.uri), project=settings).name

    @cached_property
    def tree(self) -> Tree | None:
        """The described script's parse tree (None before; parsed again, once, if released)."""
        if self.tree_released:
            return parse_script(self.index.data)
        return self.kept_tree

    def without_tree(self) -> Snapshot:
        """This snapshot without its tree, for a document nobody is typing in (DocumentTable)."""
        if self.kept_tree is None:
            return self
        return dataclasses.replace(self, kept_tree=None, tree_released=True)

    def described_as(self, other: Snapshot) -> Snapshot:
        """This snapshot with the description of `other`, a snapshot of the same text."""
        return dataclasses.replace(
            self,
            calls=other.calls,
            body_start=other.body_start,
            kept_tree=other.kept_tree,
            tree_released=other.tree_released,
        )

    @property
    def text(self) -> str:
        return self.index.text

    @property
    def errors(self) -> int:
        return sum(1 for finding in self.findings if finding.severity == "error")

    # -- positions ------------------------------------------------------------------------------
    def position(self, offset: int) -> types.Position:
        """The client position of a byte offset."""
        utf16 = self.index.position(offset)
        if not self.utf8:
            return types.Position(utf16.line, utf16.character)
        return types.Position(utf16.line, offset - self.index.line_start_byte(utf16.line))

    def range(self, start: int, end: int) -> types.Range:
        """The client range of a byte span."""
        return types.Range(self.position(start), self.position(end))

    def lsp_range(self, span: Range) -> types.Range:
        """The client range of an analysis range (UTF-16 positions and offsets)."""
        if not self.utf8:
            return types.Range(
                types.Position(span.start.line, span.start.character),
                types.Position(span.end.line, span.end.character),
            )
        return self.range(self.index.utf16_to_byte(span.start_offset), self.index.utf16_to_byte(span.end_offset))

    def offset(self, position: types.Position) -> int:
        """The byte offset of a client position (clamped to its line)."""
        if not self.utf8:
            return self.index.offset_at(position.line, position.character)
        return _utf8_offset(self.index, position.line, position.character)

    def body_span(self, start: int, end: int) -> tuple[int, int]:
        """Byte span of a span given in UTF-16 body offsets (inspect records, journal call sites)."""
        base = self.index.byte_to_utf16(self.body_start)
        return self.index.utf16_to_byte(base + start), self.index.utf16_to_byte(base + end)

    def call_range(self, call: Any) -> types.Range:
        return self.range(*self.body_span(call.start, call.end))



def _utf8_offset(index: TextIndex, line: int, character: int) -> int:
    if line >= index.line_count:
        return len(index.data)
    start = index.line_start_byte(max(line, 0))
    line_end = index.offset_at(line, 1 << 30)
    offset = min(start + max(character, 0), line_end)
    data = index.data
    while start < offset < len(data) and (data[offset] & 0xC0) == 0x80:
        offset -= 1  # never split a character a client addressed mid-way
    return offset


def _utf16_change(index: TextIndex, line: int, character: int) -> tuple[int, int]:
    """A UTF-8 client position as the UTF-16 position buffers take."""
    offset = _utf8_offset(index, line, character)
    position = index.position(offset)
    return position.line, position.character


def apply_changes(buffer: Buffer, changes: list[Change], version: int, utf8: bool) -> None:
    """Bring a buffer up to date with the client's edits, in order."""
    for change in changes:
        if change.range is None:
            buffer.replace(change.text, version)
            continue
        start_line, start_character, end_line, end_character = change.range
        if utf8:
            start_line, start_character = _utf16_change(buffer.index, start_line, start_character)
            end_line, end_character = _utf16_change(buffer.index, end_line, end_character)
        buffer.apply_change(start_line, start_character, end_line, end_character, change.text, version)


def check_version(
    uri: str,
    kind: DocumentKind,
    buffer: Buffer,
    changes: list[Change],
    version: int,
    project: Project,
    *,
    compile: bool,
    utf8: bool,
) -> Snapshot:
    """Worker thread: apply the edits and find the findings (not yet the calls).

    The buffer belongs to this job alone (one job per document at a time). Analysis failures are
    logged and give a snapshot without findings: a bug in a rule must not take the editor down.
    """
    from piflow.server import checks

    apply_changes(buffer, changes, version, utf8)
    snapshot = Snapshot(uri, kind, version, buffer.index, utf8, project, compiled=compile)
    try:
        return dataclasses.replace(snapshot, findings=tuple(checks.findings(snapshot, buffer, compile=compile)))
    except Exception:
        log.exception("analysis of %s failed", uri)
        return snapshot


def describe_version(buffer: Buffer, snapshot: Snapshot) -> Snapshot:
    """Worker thread: the workflow calls of the checked version (the buffer has not moved since)."""
    if not isinstance(buffer, ScriptDocument):
        return dataclasses.replace(snapshot, calls=())
    try:
        from piflow.analysis.inspect import inspect_document

        calls = tuple(inspect_document(buffer))
    except Exception:
        log.exception("inspecting %s failed", snapshot.uri)
        calls = ()
    return dataclasses.replace(snapshot, calls=calls, body_start=buffer.body_start, kept_tree=buffer.tree.copy())
