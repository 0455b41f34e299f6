"""`analyze()`: every finding of a document, in the order its dialect's reference checks them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import detect_dialect
from piflow.analysis.document import ScriptDocument
from piflow.analysis.findings import Finding
from piflow.analysis.rules import UNSET, RuleContext


def iter_findings(
    document: ScriptDocument,
    capabilities: Capabilities,
    *,
    dialect: str | None = None,
    compile: bool = False,
    preflight: bool = False,
    schemas: Sequence[Any] = (),
    metadata: Any = UNSET,
) -> Iterator[Finding]:
    """Findings lazily, rule by rule (so `preflight` can stop at the first).

    `preflight=True` runs only the reference's rules, with the reference's severities and quirks.
    """
    chosen = detect_dialect(document.data, dialect)
    context = RuleContext(
        document,
        document.facts(chosen.walk),
        capabilities,
        preflight=preflight,
        compile=compile,
        schemas=schemas,
        metadata=metadata,
    )
    for rule in chosen.rules:
        if preflight and not rule.reference:
            continue
        context.rule = rule.id
        yield from rule.check(context)


def analyze_document(
    document: ScriptDocument, capabilities: Capabilities, dialect: str | None = None, compile: bool = False
) -> list[Finding]:
    """All findings of an open document (the language server's entry point)."""
    return list(iter_findings(document, capabilities, dialect=dialect, compile=compile))


def analyze(text: str, capabilities: Capabilities, dialect: str | None = None, compile: bool = False) -> list[Finding]:
    """All findings of a script's text.

    `compile=True` adds the engine check (the reference's parser and a body compile): exact
    syntax messages and the early errors the tree-sitter walk misses, at tens of milliseconds per
    thousand lines; the language server runs it on open and save only.
    """
    return analyze_document(ScriptDocument(text), capabilities, dialect, compile)
