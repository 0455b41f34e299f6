"""The launch-time role policy (spec B.2 step 9): a role's model must be available and its tools active.

Launch validation raises the first problem; the editor and `piflow check` report every one at the
`role:` that brings the role in. Both ask this module, so a role the editor accepts never fails
the launch ("Unknown model for role reviewer" is never news at run time).
"""

from __future__ import annotations

from piflow.analysis.capabilities import Capabilities
from piflow.config.model_refs import resolve_model_reference, unknown_alias_error
from piflow.config.roles import RoleDefinition
from piflow.errors import WorkflowError


def role_policy_problem(name: str, role: RoleDefinition, caps: Capabilities) -> WorkflowError | None:
    """Why a launch that uses role `name` would be refused with these capabilities, or None."""
    if role.model is not None:
        try:
            ref = resolve_model_reference(role.model, caps.model_aliases, caps.resolvable_models, caps.settings_path)
        except WorkflowError as error:
            return error
        if not caps.skip_model_availability and caps.verified_models and ref.name not in caps.models:
            if role.model in caps.model_aliases:
                return unknown_alias_error(role.model, ref.name, caps.settings_path)
            return WorkflowError("UNKNOWN_MODEL", f"Unknown model for role {name}: {ref.name}")
    for tool in role.tools if role.tools is not None else sorted(caps.tools):
        if tool not in caps.tools:
            return WorkflowError("UNKNOWN_TOOL", f"Unknown tool for role {name}: {tool}")
    return None


def role_model_credentials(role: RoleDefinition, caps: Capabilities) -> tuple[str, str] | None:
    """`(model, variable)` when the role's model runs here but its provider key is unset."""
    if role.model is None:
        return None
    try:
        ref = resolve_model_reference(role.model, caps.model_aliases, caps.resolvable_models, caps.settings_path)
    except WorkflowError:
        return None
    variable = caps.missing_credentials.get(ref.name)
    return None if variable is None else (ref.name, variable)
