"""Syntax problems of a document, in the order the reference would meet them.

Two sources: the walk's findings on the tree-sitter tree (every error, while typing) and, in
compile mode, the engine check (acorn + body compile, see `engine_check`), which is authoritative:
its first error replaces any tree-sitter guess before it, and when acorn accepts a text, tree-sitter's
acorn-style complaints are dropped as false alarms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from piflow.analysis.document import DocumentFacts, ScriptDocument
from piflow.analysis.engine_check import checker

_V8_REGEX_MESSAGES: Final = {
    "invalid group": "Invalid group",
    "duplicate group name": "Duplicate capture group name",
}
_ACORN_REGEX_MESSAGES: Final = {"invalid group name": "Invalid capture group name"}


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


def _with_engine_check(
    document: ScriptDocument, facts: DocumentFacts, found: list[SyntaxProblem]
) -> list[SyntaxProblem]:
    index = document.index
    engine = checker()
    acorn = engine.acorn_error(document.text, module=True)
    if acorn is not None:
        start = index.utf16_to_byte(acorn.offset)
        end = _token_end(document, start, max(index.utf16_to_byte(acorn.end_offset), start))
        first = SyntaxProblem(start, end, acorn.message, acorn.full_message, "acorn")
        return [first, *(problem for problem in found if problem.start > start)]
    v8 = [problem for problem in found if problem.source == "v8"]
    v8.extend(_regex_problems(document, facts))
    v8.sort(key=lambda problem: problem.start)
    if v8:
        return v8
    compiled = engine.compile_error(document.body_text)
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
