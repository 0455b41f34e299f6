"""models.json as pi checks it: piflow says what pi would refuse in pi's own words, the docs' examples
pass pi's check, and `piflow doctor` reports a file pi refuses.

Where pi is installed (`scripts/install-pi` puts it in `.cache/pi`), piflow's lines are compared with
the lines pi itself prints for the same files.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from piflow.cli_doctor import diagnose
from piflow.config.registry import pi_schema_problems

REPO = Path(__file__).resolve().parents[2]
PI_PACKAGE = REPO / ".cache" / "pi" / "node_modules" / "@earendil-works" / "pi-coding-agent"
PI_CHECK = """
const { ModelConfig } = await import(process.argv[1] + "/dist/core/model-config.js");
console.log(JSON.stringify((await ModelConfig.load(process.argv[2])).getError() ?? null));
"""

CASES: list[Any] = [
    {"providers": {"ollama": {"baseUrl": "http://127.0.0.1:11434/v1", "api": "openai-completions",
                              "models": [{"id": "qwen", "cost": {"input": 0, "output": 0}}]}}},
    {"providers": {"x": {"models": [{"id": "", "reasoning": "yes", "input": ["audio"], "contextWindow": "big"}],
                         "apiKey": "", "headers": {"a": 1}, "authHeader": "no"}}},
    {"providers": {"x": {"models": [{"name": "n", "cost": {"input": "1", "output": 0, "cacheRead": 0,
                                                           "cacheWrite": 0, "tiers": [{"input": 1}]}}]}}},
    {"providers": []}, {}, {"providers": {"x": 3}}, [],
    {"providers": {"x": {"name": 1, "baseUrl": 2, "apiKey": 3, "api": 4, "headers": 5, "authHeader": 6,
                         "models": 7, "modelOverrides": 8, "oauth": 9}, "y": {"baseUrl": 1}}},
    {"providers": {"x": {"oauth": "other", "modelOverrides": {"m": {"cost": {"input": "1"},
                                                                     "thinkingLevelMap": {"low": 3}}}}}},
    {"providers": {"x": {"models": [{"id": "a", "thinkingLevelMap": {"off": None, "high": "h"},
                                     "cost": {"input": 1, "output": 2, "cacheRead": 0.5, "cacheWrite": 1.5}}]}}},
]


def pi_lines(path: Path) -> list[str] | None:
    """The problem lines pi itself prints for the file, or None when pi is not installed here."""
    node = shutil.which("node")
    if node is None or not PI_PACKAGE.is_dir():
        return None
    completed = subprocess.run([node, "--input-type=module", "-e", PI_CHECK, str(PI_PACKAGE), str(path)],
                               capture_output=True, text=True, timeout=60, check=True)
    error = json.loads(completed.stdout)
    return [] if error is None else [line[4:] for line in error.splitlines() if line.startswith("  - ")]


def test_a_cost_without_cache_prices_is_refused_as_pi_refuses_it() -> None:
    assert pi_schema_problems(CASES[0]) == [
        "providers.ollama.models.0.cost.cacheRead: must have required properties cacheRead, cacheWrite"
    ]


def test_every_problem_is_said_in_schema_order_and_at_most_eight() -> None:
    assert pi_schema_problems(CASES[1]) == [
        "providers.x.apiKey: must not have fewer than 1 characters",
        "providers.x.headers.a: must be string",
        "providers.x.authHeader: must be boolean",
        "providers.x.models.0.id: must not have fewer than 1 characters",
        "providers.x.models.0.reasoning: must be boolean",
        "providers.x.models.0.input.0: must be equal to constant",
        "providers.x.models.0.input.0: must be equal to constant",
        "providers.x.models.0.input.0: must match a schema in anyOf",
    ]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_piflow_says_what_pi_says(case: int, tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(json.dumps(CASES[case]))
    expected = pi_lines(path)
    if expected is None:
        pytest.skip("pi is not installed here (scripts/install-pi)")
    assert pi_schema_problems(CASES[case]) == expected


def documented_registries() -> list[tuple[str, Any]]:
    """Every models.json example in the README and docs/, and every inline `"cost"` table."""
    found: list[tuple[str, Any]] = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"```json\n(.*?)```", text, re.S):
            if '"providers"' in block:
                found.append((doc.name, json.loads(block)))
        for cost in re.findall(r'`"cost": (\{[^`]*\})`', text):
            found.append((doc.name, {"providers": {"p": {"models": [{"id": "m", "cost": json.loads(cost)}]}}}))
    return found


def test_the_docs_examples_pass_pis_check(tmp_path: Path) -> None:
    examples = documented_registries()
    assert {name for name, _ in examples} >= {"README.md", "configuration.md"}
    for index, (name, example) in enumerate(examples):
        assert pi_schema_problems(example) == [], name
        path = tmp_path / f"{index}.json"
        path.write_text(json.dumps(example))
        assert pi_lines(path) in (None, []), name


def test_doctor_reports_a_models_json_pi_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "models.json").write_text(json.dumps(CASES[0]))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    project = tmp_path / "project"
    project.mkdir()

    errors = [check["text"] for check in diagnose(str(project))["checks"] if check["level"] == "error"]

    assert errors == [
        "pi refuses this models.json and then ignores every model in it; pi says: Invalid models.json schema:\n"
        "  - providers.ollama.models.0.cost.cacheRead: must have required properties cacheRead, cacheWrite\n\n"
        f"File: {agent / 'models.json'}"
    ]
