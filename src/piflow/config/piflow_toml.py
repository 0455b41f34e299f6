"""The schema of `piflow.toml` and of the user's `config.toml`: pydantic models, and the JSON Schema.

Kept apart from `project` (which finds and reads the files) because importing pydantic and building
these models cost more than the rest of `piflow check` together, and most processes find no piflow
TOML file to validate: `project` imports this module only when it has one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from piflow.config.project import BackendName


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PiflowSection(_Strict):
    """`[piflow]`: the defaults piflow works with."""

    backend: BackendName | None = Field(
        default=None, description="Backend that runs agents: scripted, openai or pi."
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        description="Launching model (provider/model[:thinking], alias or bare id): what agents use when "
        "neither the call nor its role names a model. pi uses its session's model.",
    )
    scripts: list[str] | None = Field(
        default=None,
        description='Globs (relative to the project root) of workflow scripts, e.g. ["**/*.workflow.js"].',
    )
    store: str | None = Field(
        default=None,
        description="Run store file (relative paths are relative to this file). In piflow.toml it must be "
        "inside the project unless the user config trusts the project.",
    )
    trust_project: bool | None = Field(
        default=None,
        description="piflow.toml: trust this project's .pi/ roles and settings. "
        "User config: trust every project that does not say otherwise.",
    )
    executor: Literal["embedded", "temporal"] | None = Field(
        default=None,
        description="Where runs execute: embedded (owner processes on this machine, the default) or temporal "
        "(a Temporal cluster served by `piflow worker` processes; see [temporal]).",
    )


class BackendOverride(_Strict):
    """`[backends.<provider>]`: the backend for one model provider."""

    backend: BackendName = Field(description="Backend that runs this provider's models.")


class ScriptedSection(_Strict):
    """`[scripted]`: the deterministic backend's fixtures."""

    fixtures: str | None = Field(
        default=None,
        description="Fixture file (relative paths are relative to this file). In piflow.toml it must be "
        "inside the project unless the user config trusts the project.",
    )


class TemporalSection(_Strict):
    """`[temporal]`: the cluster runs go to when `executor = "temporal"`."""

    address: str | None = Field(default=None, min_length=1, description="host:port of the Temporal frontend "
                                "(default localhost:7233, what `temporal server start-dev` serves).")
    namespace: str | None = Field(default=None, min_length=1, description="Temporal namespace (default: default).")
    task_queue: str | None = Field(default=None, min_length=1,
                                   description="Task queue `piflow worker` serves (default: piflow).")
    tls: bool | None = Field(default=None, description="Connect with TLS (default: on when an API key is set).")
    api_key_env: str | None = Field(
        default=None, min_length=1,
        description="Name of the environment variable holding the cluster's API key (keys never go in files).",
    )
    worktrees: str | None = Field(
        default=None, min_length=1,
        description="`piflow worker`: its own clone of the repository (the project directory in it), where "
        "withWorktree agents run; their branches are pushed to the clone's origin (default: the run's directory).",
    )


class DialectsSection(_Strict):
    """`[dialects]`: scripts whose dialect is chosen by their path (a first-line pragma still wins)."""

    pi_subagents: list[str] | None = Field(
        default=None, alias="pi-subagents",
        description="Globs (relative to the project root) of pi-subagents workflowScript files, "
        'e.g. ["fleet/**/*.js"]; they get that dialect even when they use no runs.* call.',
    )
    pi_extensible_workflows: list[str] | None = Field(
        default=None, alias="pi-extensible-workflows",
        description="Globs of pi-extensible-workflows scripts (the default dialect): never guessed as pi-subagents.",
    )


class PiflowFile(_Strict):
    """The schema of `piflow.toml` and of the user's `config.toml`."""

    piflow: PiflowSection = Field(default_factory=PiflowSection)
    backends: dict[str, BackendOverride] = Field(default_factory=dict)
    scripted: ScriptedSection = Field(default_factory=ScriptedSection)
    temporal: TemporalSection = Field(default_factory=TemporalSection)
    dialects: DialectsSection = Field(default_factory=DialectsSection)
    model_aliases: dict[str, str] = Field(
        default_factory=dict,
        description="Default model aliases for this project's scripts (name = provider/model[:thinking]). "
        "pi's modelAliases in its global workflow settings win over these.",
    )
    trusted_projects: list[str] | None = Field(
        default=None, description="User config only: absolute paths of trusted projects (~ allowed)."
    )


def generated_schema() -> dict[str, Any]:
    """The JSON Schema of piflow.toml / config.toml (written to `schemas/piflow.toml.schema.json`)."""
    schema = _without_null(PiflowFile.model_json_schema())
    assert isinstance(schema, dict)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "piflow.toml"
    schema["description"] = (
        "piflow's own settings, in piflow.toml at a project root or ~/.config/piflow/config.toml. "
        "Generated from piflow.config.project.PiflowFile; do not edit by hand."
    )
    return schema


def _without_null(node: Any) -> Any:
    """Drop pydantic's `null` alternatives and `default: null`: TOML has no null."""
    if isinstance(node, list):
        return [_without_null(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned = {
        key: _without_null(value) for key, value in node.items() if not (key == "default" and value is None)
    }
    options = cleaned.get("anyOf")
    if isinstance(options, list):
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) == 1:
            cleaned.pop("anyOf")
            cleaned = {**kept[0], **cleaned}
        else:
            cleaned["anyOf"] = kept
    return cleaned
