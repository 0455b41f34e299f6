"""Launch snapshots: what a run is pinned to, and the re-validation of a cold resume (spec G.1, F.3)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from piflow import __version__
from piflow.config.model_refs import resolve_model_reference
from piflow.engine.resolution import ResolutionContext, RoleSpec
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.engine import LaunchRequest
    from piflow.engine.environment import LaunchEnvironment

IDENTITY_VERSION = 3
ARGS_LIMIT_BYTES = 10 * 1024 * 1024


@functools.lru_cache(maxsize=8)
def script_body(script: str) -> str:
    """The script the worker runs: the source without its `export const meta` header.

    A script without the word `export` has no header (a keyword cannot be spelled with escapes), so
    it is not parsed: at 10,000 agents that parse costs 0.1 s of every launch and resume."""
    if "export" not in script:
        return script
    from piflow.analysis.script import split_meta  # its parser loads only for a script with a header

    return split_meta(script)[1]


def _check_args(args: Any) -> Any:
    try:
        text = json.dumps(args, allow_nan=False)
    except (TypeError, ValueError):
        raise WorkflowError("RPC_LIMIT_EXCEEDED", "RPC values must be JSON-compatible") from None
    if len(text.encode("utf-8")) > ARGS_LIMIT_BYTES:
        raise WorkflowError("RPC_LIMIT_EXCEEDED", "RPC value exceeds the 10 MB JSON boundary")
    return json.loads(text)


def build_snapshot(
    request: LaunchRequest,
    env: LaunchEnvironment,
    *,
    name: str,
    budget: dict[str, Any] | None,
    concurrency: int,
    backend: str,
) -> dict[str, Any]:
    """Validate the launch (B.2) and pin everything a resume must see unchanged."""
    from piflow.analysis.dialects import SUBAGENTS, detect_dialect
    from piflow.analysis.launch import validate_workflow_launch
    from piflow.analysis.syntax_check import syntax_digest

    dialect = detect_dialect(request.script.encode(), path=request.script_path, project=env.project)
    if request.script and dialect.name == SUBAGENTS:
        from piflow.engine.subagents.launch import subagents_snapshot

        snapshot = subagents_snapshot(request, env, name=name, budget=budget, concurrency=concurrency,
                                      backend=backend, args=_check_args(request.args))
        return {**snapshot, "identityVersion": IDENTITY_VERSION}
    params: dict[str, Any] = {"name": name}
    if request.workflow is not None:
        params["workflow"] = request.workflow
    else:
        params["script"] = request.script
    if request.description is not None:
        params["description"] = request.description
    launch = validate_workflow_launch(params, env.launch_context())
    checked = launch.checked.to_json()
    args = _check_args(request.args)
    models: list[str] = []
    refs = [env.launch_model, *checked["referenced"]["models"]]
    refs += [launch.roles.roles[r].model or "" for r in launch.role_names]
    for ref in refs:
        if not ref:
            continue
        try:
            resolved = resolve_model_reference(ref, env.model_aliases, env.known_models, env.settings_path).name
        except WorkflowError:
            continue
        if resolved not in models:
            models.append(resolved)
    settings: dict[str, Any] = {"concurrency": concurrency}
    if env.model_aliases:
        settings["modelAliases"] = dict(env.model_aliases)
    return {
        "script": launch.script,
        "args": args,
        "metadata": checked["metadata"],
        "settings": settings,
        "settingsPath": env.settings_path,
        "modelAliases": dict(env.model_aliases),
        "budget": budget,
        "models": models,
        "tools": sorted(env.root_tools),
        "agentTypes": checked["referenced"]["agentTypes"],
        "roles": {r: launch.roles.roles[r].to_json() for r in launch.role_names},
        "projectRoles": [r for r in launch.role_names if r in launch.roles.project_names],
        "schemas": checked["schemas"],
        "identityVersion": IDENTITY_VERSION,
        "backend": backend,
        "fixtures": request.fixtures or env.fixtures,
        "launchModel": env.launch_model,
        "scriptPath": request.script_path,
        "syntaxDigest": syntax_digest(launch.script),
        # What a resume in this very environment would check, already passed by this launch (F.3).
        "preflightDigest": _resume_preflight_digest(
            launch.script, env, env.model_aliases, [*env.known_models, *models], checked["referenced"]["agentTypes"],
            checked["schemas"], checked["metadata"],
        ),
    }


def _resume_preflight_digest(
    script: str,
    env: LaunchEnvironment,
    aliases: Mapping[str, str],
    models: Iterable[str],
    agent_types: Any,
    schemas: Any,
    metadata: Any,
) -> str:
    """A digest of everything a cold resume's preflight reads, and of piflow's version (its rules).

    The launch records it with its passed verdict; a resume whose inputs hash alike skips the facts
    walk of the snapshot (0.5 s at 10,000 agents), and any change (script, aliases, models, tools,
    settings path, piflow version) checks again.
    """
    inputs = [__version__, sorted(aliases.items()), sorted(set(models)), sorted(env.root_tools), env.settings_path,
              agent_types, schemas, metadata]
    digest = hashlib.blake2b(script.encode("utf-8", "surrogatepass"), digest_size=16)
    digest.update(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _incompatible(message: str) -> WorkflowError:
    return WorkflowError("RESUME_INCOMPATIBLE", message)


def check_cold_resume(snapshot: dict[str, Any], env: LaunchEnvironment) -> tuple[dict[str, Any], str | None]:
    """The F.3 checks; returns the snapshot re-pinned to the current aliases and a drift warning."""
    if snapshot.get("identityVersion") != IDENTITY_VERSION:
        raise _incompatible("Workflow launch snapshot identity version is incompatible")
    if snapshot.get("dialect") is not None:  # only a pi-subagents snapshot names its dialect
        from piflow.engine.subagents.launch import check_subagents_resume

        check_subagents_resume(snapshot, env)
        return snapshot, None
    roles = snapshot.get("roles")
    if not isinstance(roles, dict):
        raise _incompatible("Workflow role definitions are missing from the launch snapshot")
    if snapshot.get("projectRoles") and not env.project_trusted:
        raise _incompatible("Cannot restore project roles in an untrusted project")
    for role in snapshot.get("agentTypes") or []:
        if role not in roles:
            raise _incompatible(f"Role definition is missing from the launch snapshot: {role}")
    for tool in snapshot.get("tools") or []:
        if tool not in env.root_tools:
            raise _incompatible(f"Required tool is unavailable: {tool}")
    old_aliases: dict[str, str] = dict(snapshot.get("modelAliases") or {})
    aliases = {**old_aliases, **env.model_aliases}
    models = set(env.known_models) | set(snapshot.get("models") or [])
    script = snapshot["script"]
    agent_types, schemas, metadata = snapshot.get("agentTypes") or [], snapshot.get("schemas"), snapshot.get("metadata")
    digest = _resume_preflight_digest(script, env, aliases, models, agent_types, schemas, metadata)
    if snapshot.get("preflightDigest") != digest:
        _preflight_again(script, env, aliases, models, agent_types, schemas or (), metadata,
                         snapshot.get("syntaxDigest"))
    blocked = dict(snapshot.get("blockedAliases") or {})
    blocked.update({a: t for a, t in old_aliases.items() if a not in env.model_aliases})
    changes = sorted(
        f"{a}: {old_aliases.get(a, '(missing)')} -> {env.model_aliases.get(a, '(missing)')}"
        for a in set(old_aliases) | set(env.model_aliases)
        if old_aliases.get(a) != env.model_aliases.get(a)
    )
    warning = "Model alias mappings changed on resume: " + "; ".join(changes) if changes else None
    updated = {**snapshot, "modelAliases": dict(env.model_aliases), "settingsPath": env.settings_path,
               "preflightDigest": digest}
    if blocked or "blockedAliases" in snapshot:  # none blocked reads as absent: an unchanged snapshot stays equal
        updated["blockedAliases"] = blocked
    return updated, warning


def _preflight_again(
    script: str,
    env: LaunchEnvironment,
    aliases: Mapping[str, str],
    models: set[str],
    agent_types: list[str],
    schemas: Any,
    metadata: Any,
    syntax_verdict: str | None,
) -> None:
    """Preflight the snapshot's script against the current tools and aliases (F.3); raises its finding."""
    from piflow.analysis.capabilities import Capabilities
    from piflow.analysis.preflight import preflight
    from piflow.analysis.syntax_check import remember_accepted, syntax_digest

    caps = Capabilities.create(
        models=models,
        tools=env.root_tools,
        agent_types=agent_types,
        model_aliases=aliases,
        known_models=models,
        settings_path=env.settings_path,
        skip_model_availability=True,
    )
    if syntax_verdict == syntax_digest(script):
        remember_accepted(syntax_verdict)  # the launch passed the exact syntax check on this very text
    preflight(script, caps, schemas, metadata)


def resolution_context(snapshot: dict[str, Any], env: LaunchEnvironment) -> ResolutionContext:
    """What agent resolution may see during this execution of the run."""
    known = frozenset(env.known_models) | frozenset(snapshot.get("models") or [])
    return ResolutionContext(
        roles={name: RoleSpec.from_json(role) for name, role in (snapshot.get("roles") or {}).items()},
        root_tools=tuple(snapshot.get("tools") or ()),
        known_models=known,
        launch_model=snapshot.get("launchModel") or env.launch_model,
        aliases=dict(snapshot.get("modelAliases") or {}),
        blocked_aliases=dict(snapshot.get("blockedAliases") or {}),
        settings_path=snapshot.get("settingsPath"),
        verify_models=env.registry_configured,
        resource_policy=env.resource_policy,
    )
