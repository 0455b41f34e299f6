"""Syntax problems of a document, in the order the reference would meet them.

Two sources: the walk's findings on the tree-sitter tree (every error, while typing) and, in
compile mode, the engine check (acorn + body compile, see `engine_check`), which is authoritative:
its first error replaces any tree-sitter guess before it, and when acorn accepts a text, tree-sitter's
acorn-style complaints are dropped as false alarms.

acorn in QuickJS is slow (no JIT: ~150 ms per thousand lines), and its wording matters only when
there is an error. So a text whose tree-sitter walk found nothing and that QuickJS compiles natively
as strict code is accepted without acorn (`_natively_accepted`); verdicts are kept by content hash,
and a run's launch snapshot hands its verdict to a cold resume (`remember_accepted`).
`tests/test_syntax_fast_path.py` proves both paths give the same verdicts.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Final, Literal

from tree_sitter import Query, QueryCursor

from piflow.analysis.document import DocumentFacts, ScriptDocument
from piflow.analysis.early_errors import has_optional_chain
from piflow.analysis.engine_check import checker
from piflow.analysis.syntax import LANGUAGE

_V8_REGEX_MESSAGES: Final = {
    "invalid group": "Invalid group",
    "duplicate group name": "Duplicate capture group name",
}
_ACORN_REGEX_MESSAGES: Final = {"invalid group name": "Invalid capture group name"}
_NATIVE_UNSAFE: Final = ("<!--", "-->", "\u2028", "\u2029")
"""Texts QuickJS's script grammar may read differently from acorn's module grammar (HTML-like
comments exist only in scripts) or tokenise differently from tree-sitter (line separators): these
always go to acorn."""
_WORD_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$\\")
"""Bytes that continue a word around `await` (an escape's backslash included)."""
_INERT: Final = frozenset({"comment", "string_fragment", "escape_sequence", "regex_pattern", "template_string"})
"""Node types where a word or an escape is text, not code."""
_AWAIT_ALLOWED: Final = _INERT | {"await", "property_identifier", "private_property_identifier"}
_NEW_CALLEES: Final = Query(LANGUAGE, "(new_expression constructor: (_) @callee)")
_VERDICTS_LIMIT: Final = 256


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    """A syntax error at a byte span.

    `message` is phrased as the reference reports it (`bare` plus acorn's `(line:column)` for
    acorn errors); `source`: `acorn`/`v8` (the reference's two parsers, as reproduced here) or
    `engine` (piflow's own engine cannot compile what the reference accepts: a warning).
    """

    start: int
    end: int
    bare: str
    message: str
    source: Literal["acorn", "v8", "engine"]


def syntax_problems(
    document: ScriptDocument, facts: DocumentFacts, *, compile: bool, module: bool = True
) -> list[SyntaxProblem]:
    """All syntax problems, the reference's first one first."""
    index = document.index
    found: list[SyntaxProblem] = []
    for placed in facts.syntax:
        issue = placed.fact
        at = placed.at(issue.position)
        if issue.engine == "acorn":
            line, column = index.js_line_column(at)
            message = f"{issue.message} ({line}:{column})"
        else:
            message = issue.message
        found.append(SyntaxProblem(placed.at(issue.start), placed.at(issue.end), issue.message, message, issue.engine))
    hash_bang = document.hash_bang() if module else None
    if hash_bang is not None:
        found.append(
            SyntaxProblem(
                hash_bang.start_byte,
                hash_bang.end_byte,
                "Invalid or unexpected token",
                "Invalid or unexpected token",
                "v8",
            )
        )
    found.sort(key=lambda problem: (problem.source != "acorn", problem.start))
    if not compile or not module:
        return found
    return _with_engine_check(document, facts, found)


class _Partial(Enum):
    REFERENCE_CLEAN = "reference-clean"
    """The reference's parsers accept the text; piflow's own compile has not been asked yet."""


_Verdict = tuple[SyntaxProblem, ...] | _Partial


class _Verdicts:
    """The engine check's verdict by content hash: an LRU shared by this process's threads."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> _Verdict | None:
        with self._lock:
            verdict = self._entries.get(digest)
            if verdict is not None:
                self._entries.move_to_end(digest)
            return verdict

    def put(self, digest: str, verdict: _Verdict) -> None:
        with self._lock:
            self._entries[digest] = verdict
            self._entries.move_to_end(digest)
            while len(self._entries) > _VERDICTS_LIMIT:
                self._entries.popitem(last=False)


_verdicts = _Verdicts()


def syntax_digest(text: str) -> str:
    """The content hash a text's verdict is kept under (hex: launch snapshots record it)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def remember_accepted(digest: str) -> None:
    """Record that the text with this `syntax_digest` passed the exact check elsewhere (a run's launch)."""
    if _verdicts.get(digest) is None:
        _verdicts.put(digest, _Partial.REFERENCE_CLEAN)


def _with_engine_check(
    document: ScriptDocument, facts: DocumentFacts, found: list[SyntaxProblem]
) -> list[SyntaxProblem]:
    digest = syntax_digest(document.text)
    known = _verdicts.get(digest)
    if isinstance(known, tuple):
        return list(known)
    if known is _Partial.REFERENCE_CLEAN:
        verdict = _body_compile_problems(document)
    else:
        verdict = _engine_verdict(document, facts, found)
    _verdicts.put(digest, tuple(verdict))
    return verdict


def _engine_verdict(
    document: ScriptDocument, facts: DocumentFacts, found: list[SyntaxProblem]
) -> list[SyntaxProblem]:
    if _natively_accepted(document, found):
        # acorn accepts; the regex check stays exact; the strict compile of the whole text implies
        # the sloppy compile of its body
        return _regex_problems(document, facts)
    index = document.index
    acorn = checker().acorn_error(document.text, module=True)
    if acorn is not None:
        start = index.utf16_to_byte(acorn.offset)
        end = _token_end(document, start, max(index.utf16_to_byte(acorn.end_offset), start))
        first = SyntaxProblem(start, end, acorn.message, acorn.full_message, "acorn")
        return [first, *(problem for problem in found if problem.start > start)]
    v8 = [problem for problem in found if problem.source == "v8"]
    v8.extend(_regex_problems(document, facts))
    v8.sort(key=lambda problem: problem.start)
    return v8 or _body_compile_problems(document)


def _natively_accepted(document: ScriptDocument, found: list[SyntaxProblem]) -> bool:
    """Whether acorn would accept the text, known without running it: tree-sitter and the early-error
    walk found nothing, nothing in the text reads differently in QuickJS's script grammar, and QuickJS
    compiles the whole text (header included, its `export` blanked) as a strict async arrow body."""
    text = document.text
    if found or any(marker in text for marker in _NATIVE_UNSAFE) or _stricter_in_a_module(document):
        return False
    header = document.header
    if header is not None:
        start = document.index.byte_to_char(header.start)
        if not text.startswith("export", start):
            return False
        text = f"{text[:start]}      {text[start + 6 :]}"
    return checker().strict_compiles(text)


def _stricter_in_a_module(document: ScriptDocument) -> bool:
    """Code acorn's module grammar rejects that QuickJS's script grammar accepts and the early-error
    walk does not look for: `await` as an identifier (in a non-async function), an identifier spelt
    with escapes, a `new` whose callee holds `?.`."""
    data = document.data
    root = document.tree.root_node
    for word, allowed, whole in ((b"await", _AWAIT_ALLOWED, True), (b"\\u", _INERT, False)):
        for start, end in _occurrences(data, word, whole=whole):
            node = root.descendant_for_byte_range(start, end)
            if node is None or node.type not in allowed:
                return True
    if b"?." in data and b"new" in data:
        callees = QueryCursor(_NEW_CALLEES).captures(root).get("callee", [])
        return any(has_optional_chain(callee) for callee in callees)
    return False


def _occurrences(data: bytes, word: bytes, *, whole: bool) -> Iterator[tuple[int, int]]:
    """The spans of `word` in `data` (`whole`: not inside a longer word). `bytes.find` rather than a
    regular expression with look-arounds, which took ~1 ms per thousand lines."""
    at = data.find(word)
    while at >= 0:
        end = at + len(word)
        if not whole or (
            (at == 0 or data[at - 1] not in _WORD_BYTES) and (end == len(data) or data[end] not in _WORD_BYTES)
        ):
            yield at, end
        at = data.find(word, end)


def _body_compile_problems(document: ScriptDocument) -> list[SyntaxProblem]:
    """piflow's own engine's verdict on a text the reference accepts: at most one warning."""
    index = document.index
    compiled = checker().compile_error(document.body_text)
    if compiled is None:
        return []
    line = (compiled.line or 1) - 1 + index.position(document.body_start).line
    start = index.offset_at(line, 0)
    end = index.offset_at(line + 1, 0) if line + 1 < index.line_count else len(document.data)
    message = f"The workflow engine (QuickJS) cannot compile this script: {compiled.message}"
    return [SyntaxProblem(start, max(end, start), message, message, "engine")]


def _token_end(document: ScriptDocument, start: int, fallback: int) -> int:
    """The end of the token starting at `start` (acorn reports where the tokenizer stopped instead)."""
    if start >= len(document.data):
        return start
    node = document.tree.root_node.descendant_for_byte_range(start, start + 1)
    if node is not None and node.start_byte == start and node.end_byte > start:
        return int(node.end_byte)
    return fallback


def _regex_problems(document: ScriptDocument, facts: DocumentFacts) -> list[SyntaxProblem]:
    """Regular expressions acorn accepts but the engines reject (V8 12.4 and QuickJS agree here)."""
    literals = [(item.base, regex) for item in facts.statements for regex in item.fact.regexes]
    errors = checker().regex_errors([(regex.pattern, regex.flags) for _, regex in literals])
    problems = []
    for (base, regex), error in zip(literals, errors, strict=True):
        if error is None:
            continue
        reason = _V8_REGEX_MESSAGES.get(error) or _ACORN_REGEX_MESSAGES.get(error) or error[:1].upper() + error[1:]
        bare = f"Invalid regular expression: /{regex.pattern}/{regex.flags}: {reason}"
        problems.append(SyntaxProblem(base + regex.start, base + regex.end, bare, bare, "v8"))
    return problems
