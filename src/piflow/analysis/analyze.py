"""`analyze()`: every finding of a document, in the order its dialect's reference checks them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import detect_dialect
from piflow.analysis.document import ScriptDocument
from piflow.analysis.findings import Finding
from piflow.analysis.rules import UNSET, Dialect, RuleContext, RuleMemo
from piflow.collector import collector_paused


def rule_context(
    document: ScriptDocument,
    capabilities: Capabilities,
    *,
    dialect: str | None = None,
    compile: bool = False,
    preflight: bool = False,
    schemas: Sequence[Any] = (),
    metadata: Any = UNSET,
) -> tuple[Dialect, RuleContext]:
    """The document's dialect and what its rules look at (with the document's memo of unchanged
    calls, so re-analysis after an edit revisits only the edited statements' calls)."""
    chosen = detect_dialect(document.data, dialect)
    context = RuleContext(
        document,
        document.facts(chosen.walk),
        capabilities,
        preflight=preflight,
        compile=compile,
        schemas=schemas,
        metadata=metadata,
        memo=RuleMemo.of(document, (chosen, capabilities, preflight)),
    )
    return chosen, context


def run_rules(dialect: Dialect, context: RuleContext) -> Iterator[Finding]:
    """Findings lazily, rule by rule (so `preflight` can stop at the first).

    In preflight mode only the reference's rules run, with the reference's severities and quirks.
    """
    for rule in dialect.rules:
        if context.preflight and not rule.reference:
            continue
        context.rule = rule.id
        yield from rule.check(context)


def analyze_document(
    document: ScriptDocument, capabilities: Capabilities, dialect: str | None = None, compile: bool = False
) -> list[Finding]:
    """All findings of an open document (the language server's entry point)."""
    chosen, context = rule_context(document, capabilities, dialect=dialect, compile=compile)
    return list(run_rules(chosen, context))


def analyze(text: str, capabilities: Capabilities, dialect: str | None = None, compile: bool = False) -> list[Finding]:
    """All findings of a script's text.

    `compile=True` adds the engine check (the reference's parser and a body compile): exact
    syntax messages and the early errors the tree-sitter walk misses, at tens of milliseconds per
    thousand lines; the language server runs it on open and save only. The document is thrown
    away, so the collector is held off while it lives (`piflow check`: see `collector.py`).
    """
    with collector_paused():
        return analyze_document(ScriptDocument(text), capabilities, dialect, compile)
