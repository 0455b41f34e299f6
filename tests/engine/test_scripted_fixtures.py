"""Scripted backend fixtures: parsing, validation errors and the minimal schema value."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft7Validator

from piflow.engine.backends.scripted import Fixtures, minimal_value
from piflow.errors import WorkflowError


def test_yaml_and_json_fixtures_load(tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(
        "defaults: {latencyMs: 5, tokens: {input: 10, output: 2}, costUsd: 0.01}\n"
        "responses:\n  - match: {label: scout, prompt: '^Find'}\n    text: found\n    times: 1\n"
    )
    fixtures = Fixtures.load(tmp_path / "f.yaml")
    assert fixtures.latency_ms == 5 and fixtures.tokens == {"input": 10, "output": 2}
    assert len(fixtures.rules) == 1 and fixtures.rules[0].times == 1
    (tmp_path / "f.json").write_text('{"responses": [{"fail": {"code": "AGENT_FAILED", "message": "boom"}}]}')
    assert Fixtures.load(tmp_path / "f.json").rules[0].answer["fail"]["message"] == "boom"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"responses": [{"fail": {"code": "NOPE", "message": "x"}}]}, "responses[0].fail"),
        ({"responses": [{"match": {"prompt": "("}}]}, "not a valid regular expression"),
        ({"responses": [{"text": "a", "json": 1}]}, "at most one of text, json and fail"),
        ({"defaults": {"latencyMs": -1}}, "defaults.latencyMs"),
        ({"extra": 1}, "expected an object"),
        ({"responses": [{"times": 0}]}, "times must be a positive integer"),
        ({"responses": [{"match": {"task": "["}}]}, "responses[0].match.task is not a valid regular expression"),
        ({"responses": [{"match": {"task": "a", "prompt": "b"}}]}, "at most one of prompt and task"),
        ({"responses": [{"match": {"lane": "api"}}]}, "match may contain only label, role, model, prompt, key"),
    ],
)
def test_bad_fixtures_are_config_errors(data: object, fragment: str) -> None:
    with pytest.raises(WorkflowError) as err:
        Fixtures.from_json(data, "f.json")
    assert err.value.code == "CONFIG_ERROR"
    assert fragment in err.value.message


def test_unreadable_fixture_file(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError, match="Cannot read scripted fixtures"):
        Fixtures.load(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"answer": {"type": "number", "minimum": 3}}, "required": ["answer"]},
        {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 2},
        {"enum": ["a", "b"]},
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        {"type": ["null", "boolean"]},
        {"const": {"x": 1}},
        {"allOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]},
    ],
)
def test_minimal_value_satisfies_the_schema(schema: dict[str, object]) -> None:
    assert Draft7Validator(schema).is_valid(minimal_value(schema))
