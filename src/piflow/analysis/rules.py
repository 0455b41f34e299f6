"""The rule machinery shared by the dialects: a rule is a small function yielding findings.

A dialect lists its rules in the order its reference checks them. `preflight()` runs only the
reference rules and raises the first finding; `analyze()` runs them all and keeps every finding.
Neither knows the individual rules.

Every rule has a stable id (kebab-case, unique within its dialect) that every finding carries as
`Finding.rule`: the editor gets it in `Diagnostic.data.rule` (`Diagnostic.code` stays the
finding's code, e.g. `UNKNOWN_MODEL`), `piflow check --format json` as each finding's `rule`,
and SARIF as each result's `properties.rule` (`ruleId` stays the code, which is what a SARIF
viewer groups alerts by). Whether a rule belongs to the reference preflight is stated by each
registration: an editor-only rule never makes `preflight()` or a launch fail. docs/rules.md lists them all.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.document import DocumentFacts, ScriptDocument
from piflow.analysis.expressions import Expr, LiteralExpr
from piflow.analysis.facts import CallFact, Placed, StatementFacts
from piflow.analysis.findings import Finding, Fix, Related, Severity, TextEdit
from piflow.analysis.positions import Range
from piflow.analysis.walker import WalkConfig


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""`metadata` when none was given (the editor case): metadata rules then have nothing to check."""


class StatementMemo:
    """What rules learnt about one statement's calls: values derived from them alone (`derived`), and
    the ids of the rules that found nothing wrong with any of them (`clean`). A per-call verdict
    depends on nothing but the call, the capabilities and the mode, so it holds while the
    statement's text is unchanged."""

    __slots__ = ("clean", "derived", "facts")

    def __init__(self, facts: StatementFacts) -> None:
        self.facts = facts
        self.clean: set[str] = set()
        self.derived: dict[str, Any] = {}


Listed = list[tuple[StatementMemo, list[Placed[CallFact]]]]
"""The statements that have calls: each one's memo and placed calls."""


class RuleMemo:
    """What per-call rules learnt about a document's statements, kept from one analysis to the next.

    The document reuses an unchanged statement's facts object after an edit, so the memo is keyed
    by their identity: after a keystroke the per-call rules revisit only the edited statement's
    calls, and the cross-statement rules (declarations, names, phases) run as before. A memo holds
    for one `key` (dialect, capabilities, mode); statements one analysis did not list are dropped
    by the next.
    """

    __slots__ = ("_current", "_listed", "_previous", "key")

    def __init__(self, key: tuple[object, ...] = ()) -> None:
        self.key = key
        self._current: dict[int, StatementMemo] = {}
        self._previous: dict[int, StatementMemo] = {}
        self._listed: tuple[DocumentFacts, Listed] | None = None

    @classmethod
    def of(cls, document: ScriptDocument, key: tuple[object, ...]) -> RuleMemo:
        """The document's memo for `key` (a fresh one when the key changed), ready for a new analysis."""
        memo = document.rule_memo
        if not isinstance(memo, RuleMemo) or memo.key != key:  # (equal capabilities give equal verdicts)
            memo = document.rule_memo = cls(key)
        memo._previous, memo._current, memo._listed = memo._current, {}, None
        return memo

    def statements(self, facts: DocumentFacts) -> Listed:
        """The statements that have calls, with their memos (listed once per analysis)."""
        if self._listed is not None and self._listed[0] is facts:
            return self._listed[1]
        listed: Listed = []
        current, previous = self._current, self._previous
        calls = facts.calls  # (the calls of every statement, in order)
        at = 0
        for item in facts.statements:
            statement = item.fact
            count = len(statement.calls)
            if not count:
                continue
            key = id(statement)
            memo = current.get(key) or previous.get(key)
            if memo is None or memo.facts is not statement:
                memo = StatementMemo(statement)
            current[key] = memo
            listed.append((memo, calls[at : at + count]))
            at += count
        self._listed = (facts, listed)
        return listed

    def unchecked(self, facts: DocumentFacts, rule: str) -> Iterator[tuple[StatementMemo, list[Placed[CallFact]]]]:
        """The statements with calls, in order, except those `rule` found clean before; the rule marks
        a statement clean (`memo.clean.add(rule)`) when it found nothing wrong with its calls."""
        return ((memo, calls) for memo, calls in self.statements(facts) if rule not in memo.clean)


@dataclass
class RuleContext:
    """Everything a rule may look at, plus helpers to place findings."""

    document: ScriptDocument
    facts: DocumentFacts
    capabilities: Capabilities
    preflight: bool = False
    compile: bool = False
    schemas: Sequence[Any] = ()
    metadata: Any = UNSET
    memo: RuleMemo = field(default_factory=RuleMemo)
    """Per-call results kept across analyses of the same document (a fresh memo by default)."""
    shared: dict[str, Any] = field(default_factory=dict)
    """Results rules compute once and later rules reuse (e.g. the syntax verdict)."""
    rule: str | None = None
    """The id of the rule running: the findings it makes carry it."""

    def range(self, start: int, end: int) -> Range:
        return self.document.index.range(start, end)

    def finding(
        self,
        code: str,
        message: str,
        start: int,
        end: int,
        *,
        severity: Severity = "error",
        related: Iterable[tuple[int, int, str]] = (),
        fixes: Iterable[Fix] = (),
    ) -> Finding:
        related_items = tuple(Related(self.range(s, e), text) for s, e, text in related)
        fix_items = tuple(fixes)
        return Finding(
            code, message, severity, self.range(start, end), related_items or None, fix_items or None, self.rule
        )

    def did_you_mean(self, node: Expr, base: int, value: str, candidates: Collection[str]) -> list[Fix]:
        """Quick fixes replacing a string literal's text with close candidates."""
        if not isinstance(node, LiteralExpr) or node.kind != "string":
            return []
        start, end = base + node.start + 1, base + node.end - 1
        quote = self.document.data[base + node.start : base + node.start + 1].decode()
        fixes = []
        for candidate in difflib.get_close_matches(value, sorted(candidates), n=3, cutoff=0.6):
            if quote in candidate or "\\" in candidate:
                continue
            fixes.append(Fix(f"Change to '{candidate}'", (TextEdit(self.range(start, end), candidate),)))
        return fixes


Rule = Callable[[RuleContext], Iterable[Finding]]


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A registered rule: its stable `id`, its check, and `reference`, always given by keyword:
    whether it is part of the reference's preflight (else an editor-only lint)."""

    id: str
    check: Rule
    reference: bool = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Dialect:
    """A script dialect: how its code is parsed and which rules apply, in order."""

    name: str
    walk: WalkConfig
    rules: tuple[RuleSpec, ...]
    syntax_code: str
