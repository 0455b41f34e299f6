"""`preflight()`: the reference's static validation of a script before a run (spec B.1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from piflow.analysis.analyze import rule_context, run_rules
from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import extensible
from piflow.analysis.document import ScriptDocument
from piflow.analysis.expressions import UNKNOWN, literal_string, static_value
from piflow.analysis.metadata import validate_workflow_metadata
from piflow.analysis.rules import RuleContext
from piflow.collector import collector_paused
from piflow.errors import WorkflowError


@dataclass(frozen=True, slots=True)
class PreflightResult:
    """What a valid script references, as the reference returns it (lists keep duplicates)."""

    metadata: dict[str, str]
    referenced_phases: tuple[str, ...]
    referenced_models: tuple[str, ...]
    referenced_tools: tuple[str, ...]
    referenced_agent_types: tuple[str, ...]
    schemas: tuple[Any, ...]
    dynamic_agent_roles: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "metadata": dict(self.metadata),
            "referenced": {
                "phases": list(self.referenced_phases),
                "models": list(self.referenced_models),
                "tools": list(self.referenced_tools),
                "agentTypes": list(self.referenced_agent_types),
            },
            "schemas": list(self.schemas),
            "dynamicAgentRoles": self.dynamic_agent_roles,
        }


def preflight(
    script: str, capabilities: Capabilities, schemas: Sequence[Any] = (), metadata: Any = None
) -> PreflightResult:
    """Validate a pi-extensible-workflows script; raise the reference's first `WorkflowError`.

    `metadata=None` means `{"name": "workflow"}` (the reference's default); any other value is
    validated as given. The syntax check includes the engine compile (acorn + body compile).
    """
    with collector_paused():  # (around a call: its document is freed before the collector is back)
        return _preflight(script, capabilities, schemas, {"name": "workflow"} if metadata is None else metadata)


def _preflight(script: str, capabilities: Capabilities, schemas: Sequence[Any], metadata: Any) -> PreflightResult:
    dialect, context = rule_context(
        ScriptDocument(script),
        capabilities,
        dialect=extensible.NAME,
        compile=True,
        preflight=True,
        schemas=schemas,
        metadata=metadata,
    )
    first = next(run_rules(dialect, context), None)
    if first is not None:
        raise WorkflowError(first.code, first.message)
    return summarize(context, validate_workflow_metadata(metadata))


def summarize(context: RuleContext, metadata: dict[str, str]) -> PreflightResult:
    """Steps 7-9: phases, referenced models/tools/roles, static output schemas, dynamic roles —
    from what the rules already found (the agent calls' options, the resolved models)."""
    phases = [
        name
        for call in context.facts.calls
        if call.fact.kind == "phase"
        for name in [literal_string(call.fact.arg(0))]
        if name is not None
    ]
    static_schemas: list[Any] = []
    models: list[str] = []
    tools: list[str] = []
    roles: list[str] = []
    dynamic_roles = False
    for call, members in extensible.agent_calls(context):
        schema = extensible.option(members, "outputSchema")
        if schema is not None and (value := static_value(schema)) is not UNKNOWN:
            static_schemas.append(value)
        requested = literal_string(extensible.option(members, "model"))
        if requested is not None:
            models.append(extensible.resolved_model(context, requested).name)
        tools.extend(element.value for element in extensible.tool_literals(extensible.option(members, "tools")))
        role = literal_string(extensible.option(members, "role"))
        if role is not None:
            roles.append(role)
        dynamic_roles = dynamic_roles or extensible.dynamic_agent_role(call.fact.arg(1))
    return PreflightResult(
        metadata,
        tuple(phases),
        tuple(models),
        tuple(tools),
        tuple(roles),
        (*context.schemas, *static_schemas),
        dynamic_roles,
    )
