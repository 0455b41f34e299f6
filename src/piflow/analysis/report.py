"""Findings of several files as text, JSON or SARIF 2.1.0 (what `piflow check` prints)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from piflow.analysis.findings import SEVERITIES, Finding

SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVELS: Final = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}
RULE_DESCRIPTIONS: Final = {
    "INVALID_SYNTAX": "The workflow script is not valid JavaScript for its dialect",
    "INVALID_METADATA": "A workflow call or option breaks the workflow contract",
    "INVALID_SCHEMA": "An output schema is outside the accepted JSON-Schema subset",
    "UNKNOWN_MODEL": "A model, alias or model spec that cannot be resolved or is unavailable",
    "UNKNOWN_TOOL": "A tool that is not available to workflow agents",
    "UNKNOWN_AGENT_TYPE": "An agent role that is not defined",
}


@dataclass(frozen=True, slots=True)
class FileReport:
    """The findings of one file; `path` as the user named it (relative paths stay relative)."""

    path: str
    dialect: str
    findings: tuple[Finding, ...]


def severity_counts(reports: Sequence[FileReport]) -> Counter[str]:
    return Counter(finding.severity for report in reports for finding in report.findings)


def summary_line(reports: Sequence[FileReport]) -> str:
    counts = severity_counts(reports)
    files = f"{len(reports)} file{'s' if len(reports) != 1 else ''}"
    if not counts:
        return f"No problems found in {files}."
    parts = [
        f"{counts[severity]} {severity}{'s' if counts[severity] != 1 and severity != 'information' else ''}"
        for severity in SEVERITIES
        if counts[severity]
    ]
    return f"{', '.join(parts)} in {files}."


def format_text(reports: Sequence[FileReport]) -> str:
    """`file:line:column: severity CODE message` per finding (1-based; columns in UTF-16 units)."""
    lines = []
    for report in reports:
        for finding in report.findings:
            start = finding.range.start
            lines.append(
                f"{report.path}:{start.line + 1}:{start.character + 1}: {finding.severity} {finding.code} "
                f"{finding.message}"
            )
    lines.append(summary_line(reports))
    return "\n".join(lines) + "\n"


def format_json(reports: Sequence[FileReport]) -> str:
    """One object per file with every finding (ranges 0-based, as the LSP; `rule`: the rule's id)."""
    counts = severity_counts(reports)
    data = {
        "files": [
            {
                "path": report.path,
                "dialect": report.dialect,
                "findings": [finding.to_json() for finding in report.findings],
            }
            for report in reports
        ],
        "summary": {severity: counts[severity] for severity in SEVERITIES},
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def format_sarif(reports: Sequence[FileReport], version: str) -> str:
    """A SARIF 2.1.0 log accepted by GitHub code scanning."""
    codes = sorted({finding.code for report in reports for finding in report.findings})
    rule_index = {code: index for index, code in enumerate(codes)}
    rules = [
        {
            "id": code,
            "name": code.title().replace("_", ""),
            "shortDescription": {"text": RULE_DESCRIPTIONS.get(code, code)},
        }
        for code in codes
    ]
    results = [
        _sarif_result(report, finding, rule_index[finding.code]) for report in reports for finding in report.findings
    ]
    log: dict[str, Any] = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "piflow", "version": version, "rules": rules}},
                "columnKind": "utf16CodeUnits",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _sarif_result(report: FileReport, finding: Finding, index: int) -> dict[str, Any]:
    start, end = finding.range.start, finding.range.end
    region = {
        "startLine": start.line + 1,
        "startColumn": start.character + 1,
        "endLine": end.line + 1,
        "endColumn": max(end.character + 1, start.character + 1 if end.line == start.line else 1),
    }
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": _SARIF_LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [
            {"physicalLocation": {"artifactLocation": {"uri": report.path.replace("\\", "/")}, "region": region}}
        ],
    }
    if finding.rule is not None:  # the check that found it (`ruleId` is the code, as SARIF viewers group by)
        result["properties"] = {"rule": finding.rule}
    return result
