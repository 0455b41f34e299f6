"""piflow: a language server and durable engine for agent workflow scripts."""

from piflow.analysis import (
    Capabilities,
    Finding,
    PreflightResult,
    StaticCall,
    analyze,
    inspect_script,
    preflight,
)
from piflow.analysis.budget import validate_budget, validate_budget_patch
from piflow.analysis.checkpoint import validate_checkpoint
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
