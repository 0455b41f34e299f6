"""Workflow errors: the 23 codes of pi-extensible-workflows and their host-facing prose (spec C)."""

from __future__ import annotations

import re
from typing import Any, Final

ERROR_CODES: Final[tuple[str, ...]] = (
    "CONFIG_ERROR",
    "INVALID_SETTINGS",
    "INVALID_SYNTAX",
    "INVALID_METADATA",
    "DUPLICATE_NAME",
    "INVALID_SCHEMA",
    "UNKNOWN_MODEL",
    "UNKNOWN_TOOL",
    "UNKNOWN_AGENT_TYPE",
    "RUN_OWNED",
    "REGISTRY_FROZEN",
    "GLOBAL_COLLISION",
    "MISSING_WORKFLOW",
    "RPC_LIMIT_EXCEEDED",
    "AGENT_TIMEOUT",
    "AGENT_FAILED",
    "RESULT_INVALID",
    "CANCELLED",
    "WORKER_UNRESPONSIVE",
    "WORKTREE_FAILED",
    "RESUME_INCOMPATIBLE",
    "BUDGET_EXHAUSTED",
    "INTERNAL_ERROR",
)

_CODE_SET: Final = frozenset(ERROR_CODES)


class WorkflowError(Exception):
    """An error with one of the spec's codes; `message` is the exact reference wording.

    `failed_at` is the journal path of the failing operation (agent outcomes only);
    `authored` marks an error whose message the script author wrote verbatim.
    """

    def __init__(
        self, code: str, message: str, *, failed_at: str | None = None, authored: bool = False
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.failed_at = failed_at
        self.authored = authored

    def __repr__(self) -> str:
        return f"WorkflowError({self.code!r}, {self.message!r})"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.failed_at is not None:
            data["failedAt"] = self.failed_at
        if self.authored:
            data["authored"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowError:
        """The error a stored or reported `{code, message, failedAt?, authored?}` stands for.

        Keeping `authored` is what lets a script's own `throw new Error("…")` reach the user verbatim
        after the run's error went through the store or an owner process's reply.
        """
        failed_at = data.get("failedAt")
        return cls(
            str(data.get("code") or "INTERNAL_ERROR"),
            str(data.get("message", "")),
            failed_at=failed_at if isinstance(failed_at, str) else None,
            authored=data.get("authored") is True,
        )

    def headline(self) -> str:
        """`CODE: prose` for a terminal line, or just the author's words for an error they wrote."""
        prose = format_workflow_failure(self)
        return prose if self.authored else f"{self.code}: {prose}"


_TEMPLATES: Final[dict[str, str]] = {
    "CONFIG_ERROR": "The workflow configuration is invalid: {}.",
    "INVALID_SETTINGS": "The workflow settings are invalid: {}.",
    "INVALID_SYNTAX": "The workflow source is invalid: {}.",
    "INVALID_METADATA": "The workflow metadata is invalid: {}.",
    "DUPLICATE_NAME": "The workflow contains a duplicate name: {}.",
    "INVALID_SCHEMA": "The workflow schema is invalid: {}.",
    "UNKNOWN_MODEL": "The workflow requested the unavailable model {}.",
    "UNKNOWN_TOOL": "The workflow requested the unavailable tool {}.",
    "UNKNOWN_AGENT_TYPE": "The workflow requested the unavailable agent role {}.",
    "REGISTRY_FROZEN": "Workflow extension registration is closed: {}.",
    "GLOBAL_COLLISION": "The workflow global name is already in use: {}.",
    "MISSING_WORKFLOW": "The workflow primitive is unavailable: {}.",
    "RPC_LIMIT_EXCEEDED": "The workflow communication data exceeded its size limit: {}.",
    "AGENT_TIMEOUT": "The workflow agent timed out: {}.",
    "AGENT_FAILED": "The workflow agent failed: {}.",
    "RESULT_INVALID": "The workflow produced an invalid result: {}.",
    "CANCELLED": "The workflow was cancelled: {}.",
    "WORKER_UNRESPONSIVE": "The workflow worker stopped responding: {}.",
    "WORKTREE_FAILED": "The workflow worktree operation failed: {}.",
    "RESUME_INCOMPATIBLE": "The workflow cannot resume this run: {}.",
    "BUDGET_EXHAUSTED": "The workflow budget was exhausted: {}.",
    "INTERNAL_ERROR": "The workflow encountered an internal error: {}.",
}

# Patterns as text: `re` compiles each on a failure's first rendering and caches it, so a process
# that renders none (every run that succeeds) never compiles them.
_PREFIX_STRIPS: Final[dict[str, str]] = {
    "UNKNOWN_MODEL": r"^(?:Unknown model:|Unknown model for role [^:]*:|Invalid model spec:)\s*",
    "UNKNOWN_TOOL": r"^Unknown tool:\s*",
    "UNKNOWN_AGENT_TYPE": r"^Unknown agent role:\s*",
}

_CODE_WORDS: Final = r"\b(?:" + "|".join(ERROR_CODES) + r")\b(?::\s*)?"
_UPPER_PREFIX: Final = r"^[A-Z][A-Z0-9_]*:\s*"
_RUN_ID: Final = r"^Run \S+(?= (?:exceeded|is)\b)"
_UUID_LIKE: Final = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F-]{27,}"
_PI_SESSION: Final = r"^Pi session \S+(?= (?:is|has)\b)"
_TRAILING_IDS: Final = (
    r"((?:Unknown scheduler run|Missing production ownership record|Persisted agent belongs to another run)):\s*\S+"
)
_KEYED_TOKENS: Final = r"\b(?:runId|sessionId|callSite|occurrence|failedAt|id)\s*[:=]\s*\S+"


def _detail(message: str) -> str:
    text = re.sub(_CODE_WORDS, "", message)
    text = re.sub(_UPPER_PREFIX, "", text.lstrip())
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("at "))
    text = re.sub(_RUN_ID, "Run", text.strip())
    text = re.sub(_UUID_LIKE, "the workflow", text)
    text = re.sub(_PI_SESSION, "session", text)
    text = re.sub(_TRAILING_IDS, r"\1", text)
    text = re.sub(_KEYED_TOKENS, "", text)
    text = " ".join(text.split())
    return text or "No further details were provided"


def _sentence(template: str, detail: str) -> str:
    """The template around `detail`, without a doubled period when the detail ends a sentence itself."""
    text = template.format(detail)
    return text[:-1] if detail.endswith((".", "!", "?")) else text


def format_workflow_failure(error: object) -> str:
    """Render an error as the sentence pi shows a user (spec C, `formatWorkflowFailure`)."""
    if isinstance(error, WorkflowError):
        if error.authored or error.code not in _CODE_SET:
            return error.message
        detail = _detail(error.message)
        if error.code == "RUN_OWNED":
            if "already owned" in detail or "active ownership" in detail:
                return "The workflow session is already in use."
            return _sentence("The workflow session is already in use: {}.", detail)
        strip = _PREFIX_STRIPS.get(error.code)
        if strip is not None:
            detail = re.sub(strip, "", detail) or detail
        return _sentence(_TEMPLATES[error.code], detail)
    if isinstance(error, BaseException):
        return str(error) or "The workflow failed without an error message."
    return f"The workflow failed with value {js_string(error)}."


def js_string(value: object) -> str:
    """`String(value)` as JavaScript renders the plain values a script can throw."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)
