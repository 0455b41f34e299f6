"""piflow: a language server and durable engine for agent workflow scripts.

The public API is imported on first use (`piflow.lazy`): `import piflow` alone, as every piflow
process does, costs nothing beyond this module.
"""

from typing import TYPE_CHECKING

from piflow.lazy import export_lazily

if TYPE_CHECKING:
    from piflow.analysis.analyze import analyze
    from piflow.analysis.budget import validate_budget, validate_budget_patch
    from piflow.analysis.capabilities import Capabilities
    from piflow.analysis.checkpoint import validate_checkpoint
    from piflow.analysis.findings import Finding
    from piflow.analysis.inspect import StaticCall, inspect_script
    from piflow.analysis.preflight import PreflightResult, preflight
    from piflow.config import (
        load_settings,
        parse_model_reference,
        parse_role_markdown,
        resolve_model_reference,
        save_model_aliases,
        validate_model_aliases,
    )
    from piflow.errors import ERROR_CODES, WorkflowError, format_workflow_failure
    from piflow.jsvalues import UNDEFINED

__version__ = "0.1.0"

__all__ = [
    "ERROR_CODES",
    "UNDEFINED",
    "Capabilities",
    "Finding",
    "PreflightResult",
    "StaticCall",
    "WorkflowError",
    "__version__",
    "analyze",
    "format_workflow_failure",
    "inspect_script",
    "load_settings",
    "parse_model_reference",
    "parse_role_markdown",
    "preflight",
    "resolve_model_reference",
    "save_model_aliases",
    "validate_budget",
    "validate_budget_patch",
    "validate_checkpoint",
    "validate_model_aliases",
]

export_lazily(
    __name__,
    {
        "ERROR_CODES": "piflow.errors",
        "UNDEFINED": "piflow.jsvalues",
        "Capabilities": "piflow.analysis.capabilities",
        "Finding": "piflow.analysis.findings",
        "PreflightResult": "piflow.analysis.preflight",
        "StaticCall": "piflow.analysis.inspect",
        "WorkflowError": "piflow.errors",
        "analyze": "piflow.analysis.analyze",
        "format_workflow_failure": "piflow.errors",
        "inspect_script": "piflow.analysis.inspect",
        "load_settings": "piflow.config",
        "parse_model_reference": "piflow.config",
        "parse_role_markdown": "piflow.config",
        "preflight": "piflow.analysis.preflight",
        "resolve_model_reference": "piflow.config",
        "save_model_aliases": "piflow.config",
        "validate_budget": "piflow.analysis.budget",
        "validate_budget_patch": "piflow.analysis.budget",
        "validate_checkpoint": "piflow.analysis.checkpoint",
        "validate_model_aliases": "piflow.config",
    },
)
