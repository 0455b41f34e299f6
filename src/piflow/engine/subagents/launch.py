"""Launching and cold-resuming a pi-subagents script: validation and the launch snapshot.

A launch is refused with the first error `action:"validate"` would report (SUBAGENTS_SPEC A.12:
empty, syntax, nested async, literal keys and boundary values), before anything starts. The
snapshot pins the script, the pragma's workflow fields (`timeoutMs`, `usageBudget`, `defaults`:
the worker gets them at start) and the agent catalog (`agents.catalog_json`); the fields the first
dialect's snapshot has are present too, so runs of both dialects are stored, listed and resumed
alike.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import subagents
from piflow.analysis.dialects.subagents_children import WorkflowFieldsError, workflow_fields
from piflow.analysis.document import ScriptDocument
from piflow.analysis.rules import RuleContext
from piflow.config.agent_definitions import load_agent_catalog
from piflow.engine.subagents.agents import catalog_json
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.engine import LaunchRequest
    from piflow.engine.environment import LaunchEnvironment

_SYNTAX_RULES = frozenset({"empty", "syntax"})
_PRAGMA_LINE = re.compile(r"\A\ufeff?[ \t]*//[ \t]*piflow:[^\n]*")


def validate_subagents_launch(script: str) -> None:
    """Raise the first `validate` error of the script (INVALID_SYNTAX for empty and syntax errors).

    A file holding nothing but piflow's dialect pragma is an empty workflowScript.
    """
    if not _PRAGMA_LINE.sub("", script, count=1).strip():
        raise WorkflowError("INVALID_SYNTAX", "workflowScript must not be empty.")
    document = ScriptDocument(script)
    ctx = RuleContext(document, document.facts(subagents.DIALECT.walk), Capabilities(), preflight=True,
                      compile=True)
    for rule in subagents.RULES:
        if not rule.reference:
            continue
        for finding in rule.check(ctx):
            offset = document.index.utf16_to_byte(finding.range.start_offset)
            line, column = document.index.js_line_column(offset)
            code = "INVALID_SYNTAX" if rule.id in _SYNTAX_RULES else "INVALID_METADATA"
            message = finding.message
            if rule.id not in _SYNTAX_RULES:
                message = "workflowScript validation failed before child launch; no children launched. " + message
            raise WorkflowError(code, f"{message} (line {line}, column {column + 1})")


def launch_workflow_fields(script: str) -> dict[str, Any]:
    """The pragma line's workflow fields, or the launch error naming what is wrong and where."""
    try:
        fields = workflow_fields(script)
    except WorkflowFieldsError as exc:
        raise WorkflowError("INVALID_METADATA", f"{exc.message} (line 1, column {exc.start + 1})") from None
    return fields


def subagents_snapshot(
    request: LaunchRequest, env: LaunchEnvironment, *, name: str, budget: dict[str, Any] | None,
    concurrency: int, backend: str, args: Any,
) -> dict[str, Any]:
    """Validate a pi-subagents launch and pin what its resume must see unchanged."""
    validate_subagents_launch(request.script)
    fields = launch_workflow_fields(request.script)
    catalog = load_agent_catalog(Path(env.cwd), agent_dir=env.agent_dir, trusted=env.project_trusted)
    return {
        "dialect": subagents.NAME,
        "workflow": fields,
        "script": request.script,
        "args": args,
        "metadata": {"name": name},
        "settings": {"concurrency": concurrency},
        "settingsPath": env.settings_path,
        "modelAliases": dict(env.model_aliases),
        "budget": budget,
        "models": sorted(env.known_models),
        "tools": sorted(env.root_tools),
        "agentTypes": [],
        "roles": {},
        "projectRoles": [],
        "schemas": [],
        "backend": backend,
        "fixtures": request.fixtures or env.fixtures,
        "launchModel": env.launch_model,
        "scriptPath": request.script_path,
        "agents": catalog_json(catalog),
        "projectAgents": sorted(n for n, a in catalog.definitions.items() if a.source == "project"),
    }


def check_subagents_resume(snapshot: dict[str, Any], env: LaunchEnvironment) -> None:
    """A cold resume: the script still validates, and project agents need a trusted project."""
    if snapshot.get("projectAgents") and not env.project_trusted:
        raise WorkflowError("RESUME_INCOMPATIBLE", "Cannot restore project agents in an untrusted project")
    validate_subagents_launch(snapshot["script"])
