"""Findings: what analysis reports about a document, each on the exact range of the offending node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from piflow.analysis.positions import Range

Severity = Literal["error", "warning", "information", "hint"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "information", "hint")


@dataclass(frozen=True, slots=True)
class TextEdit:
    range: Range
    new_text: str

    def to_json(self) -> dict[str, Any]:
        return {"range": self.range.to_json(), "newText": self.new_text}


@dataclass(frozen=True, slots=True)
class Fix:
    """A quick fix: a title for the editor's menu and the edits that apply it."""

    title: str
    edits: tuple[TextEdit, ...]

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "edits": [edit.to_json() for edit in self.edits]}


@dataclass(frozen=True, slots=True)
class Related:
    """Another place that explains a finding (e.g. the `role` beside a forbidden `model`)."""

    range: Range
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"range": self.range.to_json(), "message": self.message}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem. `code` is a spec error code (`UNKNOWN_MODEL`, ...) or a dialect's own code;
    `rule` the stable id of the rule that found it (`rules.RuleSpec`), None outside the rules."""

    code: str
    message: str
    severity: Severity
    range: Range
    related: tuple[Related, ...] | None = None
    fix: tuple[Fix, ...] | None = None
    rule: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "severity": self.severity,
            "range": self.range.to_json(),
        }
        if self.rule is not None:
            data["rule"] = self.rule
        if self.related:
            data["related"] = [item.to_json() for item in self.related]
        if self.fix:
            data["fixes"] = [item.to_json() for item in self.fix]
        return data
