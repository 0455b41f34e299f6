"""The pi-subagents literal and workspace rules (SUBAGENTS_SPEC A.12, E.2, E.3): one behaviour per test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from piflow.analysis import Capabilities, analyze
from piflow.analysis.dialects import subagents
from piflow.analysis.dialects.subagents import validate_subagents_script
from piflow.analysis.findings import Finding
from piflow.config.agent_definitions import AgentCatalog, load_agent_catalog


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> AgentCatalog:
    root = tmp_path_factory.mktemp("agents")
    agent = root / "agent"
    (agent / "agents").mkdir(parents=True)
    (agent / "agents" / "writer.md").write_text("---\nname: writer\ndescription: writes\nmodel: gone/model\n---\nW\n")
    (agent / "settings.json").write_text(json.dumps({"subagents": {"agentOverrides": {"scout": {"disabled": True}}}}))
    return load_agent_catalog(root, agent_dir=agent, trusted=False)


@pytest.fixture(scope="module")
def caps(catalog: AgentCatalog) -> Capabilities:
    models = ["openai/gpt-5", "openai/gpt-5-mini", "openrouter/gpt-5-mini"]
    return Capabilities.create(models=models, launch_model="openai/gpt-5", agents=catalog)


def findings(script: str, caps: Capabilities, rule: str) -> list[Finding]:
    return [finding for finding in analyze(script, caps, subagents.NAME) if finding.rule == rule]


def messages(script: str, caps: Capabilities, rule: str) -> list[str]:
    return [finding.message for finding in findings(script, caps, rule)]


def test_every_new_rule_is_an_editor_rule_so_validate_and_launch_still_pass(caps: Capabilities) -> None:
    script = 'await runs.run("a", {agent: "nobody", task: "t", timeoutMs: 0});\nemit(NaN);'
    assert validate_subagents_script(script)["ok"] is True
    assert {f.rule for f in analyze(script, caps, subagents.NAME)} >= {"agents", "child-params", "non-finite"}


# -- duplicate-keys ------------------------------------------------------------------------------


def test_same_key_with_different_params_is_the_runtime_error(caps: Capabilities) -> None:
    script = (
        'await runs.run("same", {agent: "worker", task: "one"});\n'
        'await runs.run("same", {agent: "worker", task: "two"});'
    )
    [finding] = findings(script, caps, "duplicate-keys")
    assert finding.message == "Duplicate workflow key 'same' used with incompatible launch params."
    assert finding.range.start.line == 1 and finding.related is not None


def test_same_key_with_the_same_params_is_a_reuse(caps: Capabilities) -> None:
    script = 'await runs.run("k", {task: "t", agent: "worker"});\nawait runs.run("k", {agent: "worker", task: "t"});'
    assert messages(script, caps, "duplicate-keys") == []


def test_same_key_in_exclusive_branches_is_not_a_conflict(caps: Capabilities) -> None:
    script = (
        'if (args) { await runs.run("k", {agent: "worker", task: "a"}); }\n'
        'else { await runs.run("k", {agent: "worker", task: "b"}); }'
    )
    assert messages(script, caps, "duplicate-keys") == []


def test_duplicate_keys_in_one_runs_all(caps: Capabilities) -> None:
    script = 'await runs.all([{key: "x", agent: "worker", task: "a"}, {key: "x", agent: "worker", task: "a"}]);'
    assert messages(script, caps, "duplicate-keys") == [
        "runs.all repeats key 'x'; keys in one runs.all must be unique."
    ]


def test_a_host_key_shares_the_namespace(caps: Capabilities) -> None:
    script = (
        'await runs.run("ci", {agent: "worker", task: "t"});\n'
        'await runs.host("ci", {kind: "command", command: "true", timeoutMs: 1000});'
    )
    assert messages(script, caps, "duplicate-keys") == ["Workflow key 'ci' is already in use."]


# -- all-shape -----------------------------------------------------------------------------------


def test_runs_all_of_a_string_requires_an_array(caps: Capabilities) -> None:
    assert messages('await runs.all("x");', caps, "all-shape") == ["runs.all(items) requires an array."]


def test_runs_all_items_must_be_objects(caps: Capabilities) -> None:
    script = 'await runs.all([{key: "a", agent: "worker", task: "t"}, "b"]);'
    assert messages(script, caps, "all-shape") == ["runs.all item 1 must be an object."]


# -- lanes ---------------------------------------------------------------------------------------


def _lanes(body: str) -> str:
    return f"await runs.lanes({body});"


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ('"x"', "runs.lanes(lanes) requires an array."),
        ("[]", "runs.lanes(lanes) requires at least one lane."),
        (json.dumps([{"key": f"l{i}", "stages": [{"key": "s", "agent": "worker", "task": "t"}]} for i in range(33)]),
         "runs.lanes supports at most 32 lanes."),
        ('[{key: "l", agent: "worker", stages: [{key: "s", agent: "worker", task: "t"}]}]',
         "runs.lanes lane 0 contains unsupported fields."),
        ('[{key: "l", stages: [{key: "w", agent: "worker", task: "t"}, {key: "w", resume: "previous", task: "t"}]}]',
         "runs.lanes lane 0 contains duplicate stage key 'w'."),
        ('[{key: "a.b", stages: [{key: "c", agent: "worker", task: "t"}]},'
         ' {key: "a", stages: [{key: "b.c", agent: "worker", task: "t"}]}]',
         "runs.lanes generated child key 'a.b.c' is duplicated."),
        ('[{key: "l", stages: [{key: "w", agent: "worker", task: "t"}, {key: "r", resume: "run-1", task: "t"}]}]',
         "runs.lanes lane 0 stage 1 resume must be 'previous'."),
        ('[{key: "l", stages: [{key: "w", resume: "previous", task: "t"}]}]',
         "runs.lanes lane 0 stage 0 cannot resume previous without a predecessor stage."),
        ('[{key: "l", stages: [{key: "w", resume: "abc123", task: "t"}]}]',
         "runs.lanes lane 0 stage 0 cannot resume a retained run id in runs.lanes; use runs.run(key, { resume: id }) "
         'outside lanes, or start the lane with an agent stage and use resume: "previous" later.'),
        (json.dumps([{"key": "l", "stages": [{"key": f"s{j}", "agent": "worker", "task": "t"} for j in range(17)]}]),
         "runs.lanes lane 0 supports at most 16 stages."),
        (json.dumps([{"key": f"l{i}", "stages": [{"key": f"s{j}", "agent": "worker", "task": "t"} for j in range(13)]}
                     for i in range(5)]),
         "runs.lanes supports at most 64 stages in total."),
        ('[{key: "l", stages: [{key: "bad key", agent: "worker", task: "t"}]}]',
         "runs.lanes lane 0 stage 0 has an invalid key."),
    ],
)  # fmt: skip
def test_lanes_structure_and_limits(caps: Capabilities, argument: str, expected: str) -> None:
    assert messages(_lanes(argument), caps, "lanes") == [expected]


def test_a_valid_two_lane_board_is_clean(caps: Capabilities) -> None:
    script = _lanes(
        '[{key: "api", stages: [{key: "write", agent: "worker", task: "t"}, {key: "review", resume: "previous", '
        'task: "r"}]}, {key: "ui", stages: [{key: "write", agent: "worker", task: "t"}]}]'
    )
    assert [f for f in analyze(script, caps, subagents.NAME) if f.severity == "error"] == []


def test_a_lane_stage_with_agent_and_resume_gets_the_child_rule(caps: Capabilities) -> None:
    script = _lanes(
        '[{key: "l", stages: [{key: "a", agent: "worker", task: "t"}, {key: "b", agent: "worker", '
        'resume: "previous", task: "t"}]}]'
    )
    assert messages(script, caps, "child-params") == [
        "runs.lanes lane 0 stage 1 resume and agent are mutually exclusive."
    ]


# -- non-finite ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "{a: [1, NaN]}", "1e999"])
def test_emit_of_a_non_finite_number(caps: Capabilities, value: str) -> None:
    assert messages(f"emit({value});", caps, "non-finite") == ["emit must contain only finite JSON numbers."]


def test_state_set_of_nan(caps: Capabilities) -> None:
    assert messages('await state.set("k", NaN);', caps, "non-finite") == [
        "state.set value must contain only finite JSON numbers."
    ]


def test_finite_numbers_are_fine(caps: Capabilities) -> None:
    assert messages("emit({n: -1.5, m: 1e10});", caps, "non-finite") == []


# -- steer-launched ------------------------------------------------------------------------------


def test_steering_a_key_never_launched(caps: Capabilities) -> None:
    assert messages('await runs.steer("writer", "g");', caps, "steer-launched") == [
        "runs.steer('writer') requires a prior runs.run/runs.all launch with that key."
    ]


def test_steering_a_launched_key_or_a_lane_child_is_fine(caps: Capabilities) -> None:
    script = (
        'const w = runs.run("writer", {agent: "worker", task: "t"});\nawait runs.steer("writer", "hi");\n'
        'await runs.lanes([{key: "l", stages: [{key: "s", agent: "worker", task: "t"}]}]);\n'
        'await runs.steer("l.s", "go");\nreturn (await w).output;'
    )
    assert messages(script, caps, "steer-launched") == []


def test_a_dynamic_launch_key_silences_the_steer_check(caps: Capabilities) -> None:
    script = 'for (const k of args) await runs.run(k, {agent: "worker", task: "t"});\nawait runs.steer("x", "g");'
    assert messages(script, caps, "steer-launched") == []


# -- child-params: keyed resume, toolBudget, timeouts ---------------------------------------------


def test_keyed_resume_without_latest(caps: Capabilities) -> None:
    script = 'await runs.run("r", {resume: {workflowRunId: "wf-1", key: "advisor-oracle"}, task: "again"});'
    assert messages(script, caps, "child-params") == ["runs.run keyed resume requires latest: true."]


def test_keyed_resume_with_unsupported_fields(caps: Capabilities) -> None:
    script = 'await runs.run("r", {resume: {workflowRunId: "w", key: "k", latest: true, id: 1}, task: "t"});'
    assert messages(script, caps, "child-params") == ["runs.run keyed resume contains unsupported fields."]


def test_keyed_resume_with_latest_is_fine(caps: Capabilities) -> None:
    script = 'await runs.run("r", {resume: {workflowRunId: "wf-1", key: "k", latest: true}, task: "t"});'
    assert messages(script, caps, "child-params") == []


def test_tool_budget_without_hard(caps: Capabilities) -> None:
    script = 'await runs.all([{key: "a", agent: "worker", task: "t", toolBudget: {soft: 10}}]);'
    assert messages(script, caps, "child-params") == [
        "runs.all item 0 toolBudget requires hard: the number of tool calls after which the child stops "
        "({soft?, hard, block?})."
    ]


@pytest.mark.parametrize("field", ["timeoutMs", "maxRuntimeMs", "toolTimeoutMs"])
@pytest.mark.parametrize("value", ["0", "-5", "1.5"])
def test_zero_negative_or_fractional_timeouts(caps: Capabilities, field: str, value: str) -> None:
    script = f'await runs.run("a", {{agent: "worker", task: "t", {field}: {value}}});'
    assert messages(script, caps, "child-params") == [f"runs.run {field} must be a positive integer."]


# -- agents --------------------------------------------------------------------------------------


def test_unknown_agent_with_a_did_you_mean_fix(caps: Capabilities) -> None:
    [finding] = findings('await runs.run("a", {agent: "reviwer", task: "t"});', caps, "agents")
    assert finding.message.startswith("Unknown agent 'reviwer'. Available agents: advisor, delegate, oracle,")
    assert finding.fix is not None and finding.fix[0].title == "Change to 'reviewer'"


def test_disabled_agent_names_the_override(caps: Capabilities, catalog: AgentCatalog) -> None:
    [message] = messages('await runs.run("a", {agent: "scout", task: "t"});', caps, "agents")
    assert message == (
        f"Agent 'scout' is disabled (subagents.agentOverrides.scout.disabled is true in {catalog.settings.files[0]})."
    )


def test_builtin_user_agents_and_aliases_are_known(caps: Capabilities) -> None:
    script = 'await runs.all([{key: "a", agent: "advisor", task: "t"}, {key: "b", agent: "writer", task: "t"}]);'
    assert messages(script, caps, "agents") == []


def test_without_a_catalog_agents_are_not_checked() -> None:
    assert messages('await runs.run("a", {agent: "anyone", task: "t"});', Capabilities(), "agents") == []


# -- models --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("advisor", "Unknown subagent model 'advisor' in the active Pi model registry. 'advisor' is an agent name, "
                    "not a model id: copy an exact provider/id from the registry (piflow doctor lists them)."),
        ("openai/gpt-5:turbo", "Invalid thinking level 'turbo' in subagent model 'openai/gpt-5:turbo'; use one of "
                               "off, minimal, low, medium, high, xhigh, max."),
        ("anthropic/gpt-5", "Unknown subagent model 'anthropic/gpt-5' in the active Pi model registry. "
                            "Did you mean 'openai/gpt-5'?"),
        ("gpt 5", "Invalid subagent model 'gpt 5': write provider/id[:thinking]."),
    ],
)  # fmt: skip
def test_model_strings_are_checked_against_the_registry(caps: Capabilities, model: str, expected: str) -> None:
    assert messages(f'await runs.run("a", {{agent: "worker", task: "t", model: "{model}"}});', caps, "models") == [
        expected
    ]


@pytest.mark.parametrize("model", ["openai/gpt-5:high", "gpt-5-mini", "inherit", "openai/gpt-5-mini:max"])
def test_resolvable_models_are_fine(caps: Capabilities, model: str) -> None:
    assert messages(f'await runs.run("a", {{agent: "worker", task: "t", model: "{model}"}});', caps, "models") == []


def test_thinking_on_dispatch_is_ignored(caps: Capabilities) -> None:
    [finding] = findings('await runs.run("a", {agent: "worker", task: "t", thinking: "high"});', caps, "models")
    assert finding.severity == "warning" and finding.message.startswith("thinking is ignored on dispatch")


def test_an_agents_own_unknown_model_is_reported_at_its_use(caps: Capabilities, catalog: AgentCatalog) -> None:
    [message] = messages('await runs.run("a", {agent: "writer", task: "t"});', caps, "models")
    writer = catalog.get("writer")
    assert writer is not None and writer.path is not None
    assert message == (
        f"Agent 'writer' model ({writer.path}:2): Unknown subagent model 'gone/model' in the active Pi model registry."
    )


def test_without_a_registry_models_are_not_verified(catalog: AgentCatalog) -> None:
    caps = Capabilities.create(verified_models=False, launch_model="scripted/default", agents=catalog)
    assert messages('await runs.run("a", {agent: "worker", task: "t", model: "any/thing"});', caps, "models") == []


def test_check_sees_the_projects_agents(tmp_path: Path) -> None:
    """`Capabilities.from_config` (what `piflow check` and the editor use) reads the project's catalog."""
    from piflow.config import load_config

    agent = tmp_path / "agent"
    (agent / "agents").mkdir(parents=True)
    (agent / "agents" / "mine.md").write_text("---\nname: mine\ndescription: d\n---\nP\n")
    config = load_config(tmp_path, {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent)}, tolerant=True)
    caps = Capabilities.from_config(config)
    script = 'await runs.all([{key: "a", agent: "mine", task: "t"}, {key: "b", agent: "theirs", task: "t"}]);'
    assert [m.split(".")[0] for m in messages(script, caps, "agents")] == ["Unknown agent 'theirs'"]
