"""pi-subagents agent definitions (SUBAGENTS_SPEC B): discovery, overrides and model resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from piflow.config import load_config
from piflow.config.agent_definitions import (
    AgentCatalog,
    AgentDefinition,
    is_provider_failure,
    load_agent_catalog,
    load_subagent_settings,
    resolve_child_model,
)
from piflow.config.availability import ModelAvailability
from piflow.errors import WorkflowError

BUILTINS = {"scout", "researcher", "worker", "reviewer", "oracle", "delegate"}


def _agent(directory: Path, file: str, name: str, body: str = "You help.", **fields: str) -> Path:
    path = directory / file
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name}", f"description: {fields.pop('description', name + ' agent')}"]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    path.write_text("---\n" + "\n".join(lines) + "\n---\n" + body + "\n")
    return path


def _settings(directory: Path, subagents: object) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "settings.json").write_text(json.dumps({"defaultProvider": "x", "subagents": subagents}, indent=2))


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir()
    project.mkdir()
    return agent, project


def test_builtins_are_always_there_with_oracle_answering_to_advisor(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    catalog = load_agent_catalog(project, agent_dir=agent, trusted=False)
    assert set(catalog.definitions) == BUILTINS
    assert all(a.source == "builtin" and a.path is not None and a.path.exists() for a in catalog.definitions.values())
    advisor = catalog.get("advisor")
    assert advisor is not None and advisor.name == "oracle"
    assert catalog.get("delegate") is not None and catalog.get("delegate").model == "inherit"  # type: ignore[union-attr]
    assert catalog.problems == ()


def test_user_agents_are_found_recursively_with_their_frontmatter(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    path = _agent(
        agent / "agents", "team/deep/auditor.md", "auditor", body="Audit everything.",
        model="openai/gpt-5:high", tools="read, grep", fallbackModels="[anthropic/claude-sonnet-4]",
        thinking="low", timeoutMs="60000",
    )  # fmt: skip
    auditor = load_agent_catalog(project, agent_dir=agent, trusted=False).get("auditor")
    assert auditor == AgentDefinition(
        name="auditor", description="auditor agent", system_prompt="Audit everything.", model="openai/gpt-5:high",
        thinking="low", tools=("read", "grep"), fallback_models=("anthropic/claude-sonnet-4",), source="user",
        path=path, line=1, extra={"timeoutMs": 60000},
    )  # fmt: skip


def test_project_agents_only_when_trusted_and_they_win_over_user_and_builtin(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    _agent(agent / "agents", "reviewer.md", "reviewer", description="user reviewer")
    _agent(project / ".pi" / "agents", "reviewer.md", "reviewer", description="project reviewer")
    _agent(project / ".agents", "legacy/helper.md", "helper")
    untrusted = load_agent_catalog(project, agent_dir=agent, trusted=False)
    assert untrusted.get("reviewer").description == "user reviewer"  # type: ignore[union-attr]
    assert untrusted.get("helper") is None
    trusted = load_agent_catalog(project, agent_dir=agent, trusted=True)
    assert trusted.get("reviewer").description == "project reviewer"  # type: ignore[union-attr]
    assert trusted.get("reviewer").source == "project"  # type: ignore[union-attr]
    assert trusted.get("helper").source == "project"  # type: ignore[union-attr]


def test_agent_scope_user_ignores_project_agents(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    _settings(agent, {"agentScope": "user"})
    _agent(project / ".pi" / "agents", "x.md", "projectonly")
    assert load_agent_catalog(project, agent_dir=agent, trusted=True).get("projectonly") is None


def test_malformed_files_are_skipped_and_reported_at_their_line(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    root = agent / "agents"
    root.mkdir()
    (root / "nodesc.md").write_text("---\nname: nodesc\n---\nbody\n")
    (root / "badthinking.md").write_text("---\nname: t\ndescription: d\nthinking: extreme\n---\nbody\n")
    (root / "broken.md").write_text("---\nname: [unclosed\ndescription: d\n---\nbody\n")
    (root / "notes.md").write_text("just notes, no frontmatter\n")
    (root / "skills" / "x").mkdir(parents=True)
    (root / "skills" / "x" / "SKILL.md").write_text("---\nname: x\ndescription: a skill\n---\n")
    catalog = load_agent_catalog(project, agent_dir=agent, trusted=False)
    assert set(catalog.definitions) == BUILTINS
    found = {(problem.path.name, problem.line): problem.message for problem in catalog.problems}
    assert found[("nodesc.md", 0)] == "agent nodesc needs a non-empty description; this file is skipped"
    assert found[("badthinking.md", 3)].startswith("thinking must be one of off, minimal, low, medium, high, xhigh")
    assert ("broken.md", 0) in found and "skipped" in found[("broken.md", 0)]
    assert "not an agent" in found[("notes.md", 0)]
    assert str(catalog.problems[0]).startswith(str(catalog.problems[0].path) + ":")


def test_agent_overrides_disable_and_fill_unset_fields(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    _agent(agent / "agents", "writer.md", "writer", model="openai/gpt-5")
    _settings(agent, {"agentOverrides": {
        "scout": {"disabled": True},
        "writer": {"model": "anthropic/claude-sonnet-4", "thinking": "high"},
        "worker": {"tools": ["read"], "maxThinking": "low"},
    }})  # fmt: skip
    catalog = load_agent_catalog(project, agent_dir=agent, trusted=False)
    assert catalog.get("scout") is None and catalog.is_disabled("scout") and "scout" in catalog.discovered
    writer = catalog.get("writer")
    assert writer is not None and writer.model == "openai/gpt-5" and writer.thinking == "high"
    assert writer.overridden == ("thinking",)
    worker = catalog.get("worker")
    assert worker is not None and worker.tools == ("read",) and worker.max_thinking == "low"


def test_project_settings_count_only_when_trusted(dirs: tuple[Path, Path]) -> None:
    agent, project = dirs
    _settings(project / ".pi", {"agentOverrides": {"worker": {"disabled": True}}})
    assert load_agent_catalog(project, agent_dir=agent, trusted=False).get("worker") is not None
    assert load_agent_catalog(project, agent_dir=agent, trusted=True).is_disabled("worker")


def test_bad_settings_values_are_problems_with_lines_and_defaults_apply(dirs: tuple[Path, Path]) -> None:
    agent, _ = dirs
    _settings(agent, {"maxSubagentSpawnsPerRun": 0, "agentOverrides": {"worker": {"disabled": "yes"}}})
    settings = load_subagent_settings(agent, None, trusted=False)
    assert settings.max_subagent_spawns_per_run == 64
    messages = {(problem.line, problem.message) for problem in settings.problems}
    assert (3, "subagents.maxSubagentSpawnsPerRun must be a positive integer; the default applies") in messages
    assert (6, "subagents.agentOverrides.worker.disabled must be true or false") in messages
    (agent / "settings.json").write_text("{ not json")
    [problem] = load_subagent_settings(agent, None, trusted=False).problems
    assert problem.message.startswith("invalid JSON:")


def test_project_config_caches_its_catalog(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    _agent(agent / "agents", "mine.md", "mine")
    config = load_config(tmp_path, {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent)}, tolerant=True)
    assert config.agent_catalog is config.agent_catalog
    assert config.agent_catalog.get("mine") is not None


# -- model resolution --------------------------------------------------------------------------

KNOWN = frozenset({
    "openai/gpt-5", "openai/gpt-5-mini", "openrouter/gpt-5-mini", "anthropic/claude-sonnet-4-20250514",
    "ollama/llama3:8b",
})  # fmt: skip


def _availability(known: frozenset[str] = KNOWN, verified: bool = True) -> ModelAvailability:
    return ModelAvailability(verified, known, known, "openai/gpt-5")


def _catalog(*agents: AgentDefinition, default_model: str | None = None) -> AgentCatalog:
    from piflow.config.agent_definitions import SubagentSettings

    return AgentCatalog({a.name: a for a in agents}, settings=SubagentSettings(default_model=default_model))


def _def(name: str = "w", model: str | None = None, thinking: str | None = None, **more: object) -> AgentDefinition:
    return AgentDefinition(name, "d", "p", model, thinking, None, tuple(more.pop("fallback", ())), "user", None,
                           **more)  # type: ignore[arg-type]  # fmt: skip


def _resolve(requested: str | None, definition: AgentDefinition | None = None, **kw: object) -> str:
    catalog = kw.pop("catalog", None) or _catalog(*(d for d in [definition] if d), _def("advisor"))
    return str(resolve_child_model(requested, definition, catalog=catalog, availability=_availability(), **kw))  # type: ignore[arg-type]


def _error(requested: str, **kw: object) -> str:
    with pytest.raises(WorkflowError) as caught:
        _resolve(requested, **kw)  # type: ignore[arg-type]
    assert caught.value.code == "UNKNOWN_MODEL"
    return caught.value.message


def test_an_exact_provider_id_wins_even_with_a_colon_in_it() -> None:
    assert _resolve("openai/gpt-5-mini") == "openai/gpt-5-mini"
    assert _resolve("ollama/llama3:8b") == "ollama/llama3:8b"


def test_a_qualified_id_never_switches_provider() -> None:
    assert _error("anthropic/gpt-5-mini") == (
        "Unknown subagent model 'anthropic/gpt-5-mini' in the active Pi model registry. "
        "Did you mean 'openai/gpt-5-mini'?"
    )
    assert _resolve("anthropic/claude-sonnet-4") == "anthropic/claude-sonnet-4-20250514"  # date stamp ignored


def test_a_bare_id_resolves_when_unique_ignoring_case_separators_and_dates() -> None:
    assert _resolve("gpt-5") == "openai/gpt-5"
    assert _resolve("Claude_Sonnet_4") == "anthropic/claude-sonnet-4-20250514"


def test_an_ambiguous_bare_id_resolves_on_the_current_provider_only() -> None:
    assert _resolve("gpt-5-mini") == "openai/gpt-5-mini"  # the parent runs on openai
    assert _error("gpt-5-mini", parent_model="anthropic/claude-sonnet-4-20250514") == (
        "Ambiguous subagent model 'gpt-5-mini' in the active Pi model registry: it matches "
        "'openai/gpt-5-mini', 'openrouter/gpt-5-mini'. Use an exact provider/id."
    )


def test_agent_names_are_not_model_ids() -> None:
    assert _error("advisor") == (
        "Unknown subagent model 'advisor' in the active Pi model registry. 'advisor' is an agent name, not a "
        "model id: copy an exact provider/id from the registry (piflow doctor lists them)."
    )


def test_an_unknown_bare_id_suggests_the_closest_model() -> None:
    assert _error("gpt-6") == (
        "Unknown subagent model 'gpt-6' in the active Pi model registry. Did you mean 'openai/gpt-5'?"
    )


def test_a_thinking_suffix_beats_the_agents_thinking_and_must_be_one_of_seven_levels() -> None:
    agent = _def(thinking="low")
    assert _resolve("openai/gpt-5:xhigh", agent) == "openai/gpt-5:xhigh"
    assert _resolve(None, agent) == "openai/gpt-5:low"
    assert _error("openai/gpt-5:extreme") == (
        "Invalid thinking level 'extreme' in subagent model 'openai/gpt-5:extreme'; "
        "use one of off, minimal, low, medium, high, xhigh, max."
    )


def test_max_thinking_caps_the_level() -> None:
    assert _resolve("openai/gpt-5:max", _def(max_thinking="medium")) == "openai/gpt-5:medium"


def test_inherit_and_unset_use_the_parents_model() -> None:
    assert _resolve(None, _def(model="inherit")) == "openai/gpt-5"
    assert _resolve("inherit", _def(model="openai/gpt-5-mini"), parent_model="anthropic/claude-sonnet-4-20250514") == (
        "anthropic/claude-sonnet-4-20250514"
    )


def test_precedence_run_then_frontmatter_then_default_model_then_parent() -> None:
    agent = _def(model="openai/gpt-5-mini")
    catalog = _catalog(agent, default_model="ollama/llama3:8b")
    child = resolve_child_model(None, agent, catalog=catalog, availability=_availability())
    assert (child.model, child.source) == ("openai/gpt-5-mini", "agent")
    child = resolve_child_model("gpt-5", agent, catalog=catalog, availability=_availability())
    assert (child.model, child.source) == ("openai/gpt-5", "run")
    child = resolve_child_model(None, _def(), catalog=catalog, availability=_availability())
    assert (child.model, child.source) == ("ollama/llama3:8b", "default")
    child = resolve_child_model(None, _def(), catalog=_catalog(), availability=_availability())
    assert (child.model, child.source) == ("openai/gpt-5", "parent")


def test_fallback_models_are_resolved_for_the_engine() -> None:
    child = resolve_child_model(None, _def(fallback=("claude-sonnet-4", "openai/gpt-5-mini")), catalog=_catalog(),
                                availability=_availability())  # fmt: skip
    assert child.fallback_models == ("anthropic/claude-sonnet-4-20250514", "openai/gpt-5-mini")


def test_without_a_registry_models_are_taken_as_written() -> None:
    availability = _availability(frozenset({"scripted/default"}), verified=False)
    child = resolve_child_model("anything/model:high", None, catalog=_catalog(), availability=availability)
    assert str(child) == "anything/model:high"
    child = resolve_child_model("bare", None, catalog=_catalog(), availability=availability)
    assert child.model == "openai/bare"  # the parent's provider


@pytest.mark.parametrize(
    ("message", "provider"),
    [
        ("HTTP 429: rate limit exceeded", True),
        ("You exceeded your current quota", True),
        ("Overloaded", True),
        ("401 Unauthorized: invalid api key", True),
        ("connection refused", True),
        ("HTTP 503: service unavailable", True),
        ("HTTP 500: internal server error", True),
        ("This model's maximum context length is 128000 tokens", False),
        ("Subagent timed out after 1000ms.", False),
        ("the tests still fail", False),
        ("Tool budget hard limit reached after 500 tool calls (hard 500). The child was stopped", False),
    ],
)
def test_fallback_models_apply_only_to_provider_failures(message: str, provider: bool) -> None:
    assert is_provider_failure(message) is provider
