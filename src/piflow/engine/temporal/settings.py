"""Which Temporal cluster a project's runs go to (`[temporal]` in piflow.toml), and connecting to it."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from piflow.config.project import load_project_config
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from temporalio.client import Client


@dataclass(frozen=True)
class TemporalSettings:
    address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "piflow"
    tls: bool | None = None
    api_key_env: str | None = None
    worktrees: str | None = None
    """A worker's clone of the repository for withWorktree agents (`attempt.py`); None: the run's directory."""

    @classmethod
    def for_project(cls, cwd: str, **overrides: Any) -> TemporalSettings:
        """The project's `[temporal]` settings (project file over user file), then `overrides` not None."""
        settings = cls(**load_project_config(cwd).temporal)
        return replace(settings, **{key: value for key, value in overrides.items() if value is not None})


async def connect(settings: TemporalSettings) -> Client:
    """A client of the cluster (its payloads compressed, `codec.py`), or a CONFIG_ERROR that says which
    cluster and what to do."""
    from temporalio.client import Client

    from piflow.engine.temporal.codec import DATA_CONVERTER

    api_key = None
    if settings.api_key_env is not None:
        api_key = os.environ.get(settings.api_key_env)
        if not api_key:
            raise WorkflowError("CONFIG_ERROR", f"[temporal] api_key_env names {settings.api_key_env}, which is not "
                                                "set in the environment")
    try:
        return await Client.connect(settings.address, namespace=settings.namespace, api_key=api_key,
                                    tls=settings.tls if settings.tls is not None else api_key is not None,
                                    data_converter=DATA_CONVERTER)
    except RuntimeError as exc:
        raise WorkflowError("CONFIG_ERROR", f"Cannot reach the Temporal cluster at {settings.address} (namespace "
                                            f"{settings.namespace}): {exc}. Start one locally with `temporal server "
                                            "start-dev`, or set [temporal] address in piflow.toml") from None


async def ensure_search_attributes(client: Client, namespace: str) -> None:
    """Register the search attributes `piflow runs` lists by (project, script, state), once per namespace."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest

    from piflow.engine.temporal.wire import PROJECT_ATTRIBUTE, SCRIPT_ATTRIBUTE, STATE_ATTRIBUTE

    wanted = (PROJECT_ATTRIBUTE, SCRIPT_ATTRIBUTE, STATE_ATTRIBUTE)
    existing = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    missing = {name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in wanted
               if name not in existing.custom_attributes}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing))
