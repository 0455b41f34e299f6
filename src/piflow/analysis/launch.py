"""Launch validation: parameters, roles and role policy on top of preflight (spec B.2, L.2)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.role_policy import role_policy_problem
from piflow.config.paths import agent_dir, global_roles_dir, project_roles_dir
from piflow.config.roles import RoleSet, load_roles
from piflow.errors import WorkflowError

if TYPE_CHECKING:  # the preflight (and the dialects it loads) is imported by a launch, not by a resume
    from piflow.analysis.preflight import PreflightResult

_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")


@dataclass(frozen=True)
class RegisteredWorkflow:
    """A named workflow an extension registered (spec L.1 `workflows`)."""

    description: str
    script: str


@dataclass(frozen=True)
class LaunchContext:
    """Where and with what a workflow launches (the reference's `ctx`)."""

    cwd: str
    available_models: frozenset[str]
    root_tools: frozenset[str]
    project_trusted: bool = True
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    known_models: frozenset[str] | None = None
    settings_path: str | None = None
    agent_dir: Path | None = None
    workflows: Mapping[str, RegisteredWorkflow] = field(default_factory=dict)
    skip_model_availability: bool = False

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], **overrides: Any) -> LaunchContext:
        values: dict[str, Any] = {
            "cwd": obj.get("cwd", "."),
            "available_models": frozenset(obj.get("availableModels") or ()),
            "root_tools": frozenset(obj.get("rootTools") or ()),
            "project_trusted": obj.get("projectTrusted", True) is not False,
            "model_aliases": dict(obj.get("modelAliases") or {}),
            "known_models": None if obj.get("knownModels") is None else frozenset(obj["knownModels"]),
            "settings_path": obj.get("settingsPath"),
        }
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class LaunchCheck:
    """A validated launch: the script, its preflight and the roles it may use."""

    script: str
    checked: PreflightResult
    roles: RoleSet
    role_names: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        checked = self.checked.to_json()
        return {
            "script": self.script,
            "metadata": checked["metadata"],
            "referenced": checked["referenced"],
            "dynamicAgentRoles": checked["dynamicAgentRoles"],
            "roleNames": list(self.role_names),
            "agentDefinitions": {name: role.to_json() for name, role in self.roles.roles.items()},
            "projectAgentDefinitions": {name: role.to_json() for name, role in self.roles.project_roles.items()},
        }


def lookup_workflow(name: str, workflows: Mapping[str, RegisteredWorkflow]) -> RegisteredWorkflow:
    if not _IDENTIFIER.match(name):
        raise WorkflowError("MISSING_WORKFLOW", f"Registered workflows require an unqualified name: {name}")
    workflow = workflows.get(name)
    if workflow is None:
        raise WorkflowError("MISSING_WORKFLOW", f"Workflow is unavailable: {name}")
    return workflow


def _non_blank(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def validate_workflow_launch(params: Mapping[str, Any], context: LaunchContext) -> LaunchCheck:
    """Check a launch request the way the reference's `workflow` tool does, in its order."""
    if "maxAgentLaunches" in params:
        raise WorkflowError("INVALID_METADATA", "maxAgentLaunches has been removed; use budget.agentLaunches")
    if "script" in params and "workflow" in params:
        raise WorkflowError("INVALID_METADATA", "Provide either script or workflow, not both")
    registered = None
    if "workflow" in params:
        registered = lookup_workflow(str(params["workflow"]), context.workflows)
    script = _non_blank(params.get("script")) or (registered.script if registered else None)
    if script is None:
        raise WorkflowError("INVALID_SYNTAX", "Provide script or registered workflow")
    name = _non_blank(params.get("name"))
    name = name.strip() if name else _non_blank(params.get("workflow"))
    if name is None:
        raise WorkflowError("INVALID_METADATA", "Inline workflows require name")
    metadata: dict[str, Any] = {"name": name}
    description = params.get("description")
    if isinstance(description, str):
        metadata["description"] = description
    elif registered is not None:
        metadata["description"] = registered.description
    agent = context.agent_dir or agent_dir()
    project = project_roles_dir(Path(context.cwd)) if context.project_trusted else None
    roles = load_roles(global_roles_dir(agent), project)
    capabilities = Capabilities.create(
        models=context.available_models,
        tools=context.root_tools,
        agent_types=roles.names,
        model_aliases=context.model_aliases,
        known_models=context.known_models if context.known_models is not None else context.available_models,
        settings_path=context.settings_path,
        skip_model_availability=context.skip_model_availability,
    )
    from piflow.analysis.preflight import preflight

    checked = preflight(script, capabilities, (), metadata)
    candidates = roles.names if checked.dynamic_agent_roles else checked.referenced_agent_types
    role_names: list[str] = []
    for role_name in candidates:
        role = roles.get(role_name)
        if role is None or role_name in role_names:
            continue
        role_names.append(role_name)
    for role_name in role_names:
        problem = role_policy_problem(role_name, roles.roles[role_name], capabilities)
        if problem is not None:
            raise problem
    return LaunchCheck(script, checked, roles, tuple(role_names))
