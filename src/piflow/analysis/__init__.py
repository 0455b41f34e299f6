"""Static analysis of workflow scripts: preflight, inspect and analyze (tree-sitter based).

The public names are imported on first use (`piflow.lazy`): the worker imports `piflow.analysis.calls`
without paying for config, pydantic, the dialects and dukpy.
"""

from typing import TYPE_CHECKING

from piflow.lazy import export_lazily

if TYPE_CHECKING:
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

export_lazily(
    __name__,
    {
        "Capabilities": "piflow.analysis.capabilities",
        "Finding": "piflow.analysis.findings",
        "Fix": "piflow.analysis.findings",
        "Position": "piflow.analysis.positions",
        "PreflightResult": "piflow.analysis.preflight",
        "Range": "piflow.analysis.positions",
        "Related": "piflow.analysis.findings",
        "ScriptDocument": "piflow.analysis.document",
        "StaticCall": "piflow.analysis.inspect",
        "TextEdit": "piflow.analysis.findings",
        "analyze": "piflow.analysis.analyze",
        "analyze_document": "piflow.analysis.analyze",
        "inspect_script": "piflow.analysis.inspect",
        "preflight": "piflow.analysis.preflight",
    },
)
