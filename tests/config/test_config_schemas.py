"""The JSON Schemas in schemas/: the generated one does not drift, the hand-written ones agree
with the validators on the documented examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from piflow.config.project import schema_text

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return data


def test_piflow_toml_schema_is_generated_from_the_model() -> None:
    committed = (SCHEMAS / "piflow.toml.schema.json").read_text(encoding="utf-8")
    assert committed == schema_text(), (
        "schemas/piflow.toml.schema.json is stale; regenerate with: .venv/bin/python -c "
        "\"from piflow.config.project import schema_text; print(schema_text(), end='')\" "
        "> schemas/piflow.toml.schema.json"
    )


def test_all_schemas_are_valid_draft_2020_12() -> None:
    for path in SCHEMAS.glob("*.schema.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


def test_settings_schema_accepts_the_documented_example_and_rejects_unknown_keys() -> None:
    validator = jsonschema.Draft202012Validator(load("workflow-settings.schema.json"))
    example = {
        "concurrency": 8,
        "modelAliases": {"reviewer-model": "anthropic/claude-fable-5:high"},
        "disabledAgentResources": {"skills": ["learning-opportunities"], "extensions": ["~/x.ts"]},
    }
    assert validator.is_valid(example)
    assert not validator.is_valid({"theme": "dark"})
    assert not validator.is_valid({"concurrency": 17})
    assert not validator.is_valid({"modelAliases": {"1bad": "a/b"}})
