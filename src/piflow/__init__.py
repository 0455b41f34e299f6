"""piflow: a language server and durable engine for agent workflow scripts."""

from piflow.errors import ERROR_CODES, WorkflowError, format_workflow_failure
from piflow.jsvalues import UNDEFINED

__version__ = "0.1.0"

__all__ = [
    "ERROR_CODES",
    "UNDEFINED",
    "WorkflowError",
    "__version__",
    "format_workflow_failure",
]
