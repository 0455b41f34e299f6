"""`preflight()`: the reference's static validation of a script before a run (spec B.1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from piflow.analysis.analyze import iter_findings
from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import extensible
from piflow.analysis.document import DocumentFacts, ScriptDocument
from piflow.analysis.expressions import UNKNOWN, effective_property, literal_string, static_value
from piflow.analysis.metadata import validate_workflow_metadata
from piflow.config.model_refs import resolve_model_reference
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
    given = {"name": "workflow"} if metadata is None else metadata
    document = ScriptDocument(script)
    first = next(
        iter_findings(
            document,
            capabilities,
            dialect=extensible.NAME,
            compile=True,
            preflight=True,
            schemas=schemas,
            metadata=given,
        ),
        None,
    )
    if first is not None:
        raise WorkflowError(first.code, first.message)
    return summarize(document.facts(extensible.DIALECT.walk), capabilities, schemas, validate_workflow_metadata(given))


def summarize(
    facts: DocumentFacts, capabilities: Capabilities, schemas: Sequence[Any], metadata: dict[str, str]
) -> PreflightResult:
    """Steps 7-9: phases, referenced models/tools/roles, static output schemas, dynamic roles."""
    calls = facts.calls
    phases = [
        name
        for call in calls
        if call.fact.kind == "phase"
        for name in [literal_string(call.fact.arg(0))]
        if name is not None
    ]
    agent_calls = list(extensible.agent_calls(calls))
    static_schemas = [
        value
        for call in agent_calls
        for value in [static_value(effective_property(call.fact.arg(1), "outputSchema"))]
        if value is not UNKNOWN
    ]
    models = []
    for call in agent_calls:
        requested = literal_string(effective_property(call.fact.arg(1), "model"))
        if requested is not None:
            models.append(
                resolve_model_reference(
                    requested,
                    capabilities.model_aliases,
                    capabilities.resolvable_models,
                    capabilities.settings_path,
                ).name
            )
    tools = [element.value for call in agent_calls for element in extensible.referenced_tools(call)]
    roles = [
        role
        for call in agent_calls
        for role in [literal_string(effective_property(call.fact.arg(1), "role"))]
        if role is not None
    ]
    return PreflightResult(
        metadata,
        tuple(phases),
        tuple(models),
        tuple(tools),
        tuple(roles),
        (*schemas, *static_schemas),
        any(extensible.dynamic_agent_role(call.fact.arg(1)) for call in agent_calls),
    )
