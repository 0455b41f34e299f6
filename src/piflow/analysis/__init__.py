"""Static analysis of workflow scripts: preflight, inspect and analyze (tree-sitter based)."""

from piflow.analysis.analyze import analyze, analyze_document
from piflow.analysis.capabilities import Capabilities
from piflow.analysis.document import ScriptDocument
from piflow.analysis.findings import Finding, Fix, Related, TextEdit
from piflow.analysis.inspect import StaticCall, inspect_script
from piflow.analysis.positions import Position, Range
from piflow.analysis.preflight import PreflightResult, preflight

__all__ = [
    "Capabilities",
    "Finding",
    "Fix",
    "Position",
    "PreflightResult",
    "Range",
    "Related",
    "ScriptDocument",
    "StaticCall",
    "TextEdit",
    "analyze",
    "analyze_document",
    "inspect_script",
    "preflight",
]
