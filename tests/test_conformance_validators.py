"""The recorded reference outcomes of the pure validators (conformance sections other than
preflight and launch), run against piflow's implementations.

The outcome code must always agree. Messages must agree exactly, except where the README
allows a difference: texts a JSON or YAML parser embeds (settings `CONFIG_ERROR` for
unparsable JSON, `Invalid role frontmatter: ...`), where only the prefix up to the parser's
text is compared. `test_exact_match_report` prints how many cases match exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance import expected, load_cases, oracle_to_python, substitute
from piflow.analysis.budget import validate_budget, validate_budget_patch
from piflow.analysis.checkpoint import validate_checkpoint
from piflow.config.model_refs import parse_model_reference, resolve_model_reference
from piflow.config.paths import home_dir
from piflow.config.roles import parse_role_markdown
from piflow.config.settings import load_settings, validate_model_aliases
from piflow.errors import WorkflowError
from piflow.jsvalues import UNDEFINED

SECTIONS = (
    "modelAliases",
    "budget",
    "budgetPatch",
    "checkpoint",
    "roleMarkdown",
    "resolveModel",
    "parseModel",
    "settings",
)

# Prefixes after which a reference message embeds a parser's own text.
PARSER_TEXT_PREFIXES = ("Invalid role frontmatter: ",)
SETTINGS_JSON_PREFIX = "Invalid workflow settings JSON at "


def _json(value: Any) -> Any:
    return UNDEFINED if value is None else value.to_json()


def _run_settings(case: dict[str, Any], scratch: Path) -> tuple[Any, dict[str, str]]:
    settings_dir = scratch / case["id"]
    settings_dir.mkdir()
    path = settings_dir / "settings.json"
    if case.get("kind") == "directory":
        path.mkdir()
    elif case.get("kind") != "absent":
        path.write_text(case["content"], encoding="utf-8")
    mapping = {"<SETTINGS_DIR>": str(settings_dir), "<HOME>": str(home_dir())}
    return (lambda: load_settings(path).to_json()), mapping


def _call(section: str, case: dict[str, Any], scratch: Path) -> tuple[Callable[[], Any], dict[str, str]]:
    mapping = {"<HOME>": str(home_dir()), "<CWD>": os.getcwd()}
    value = oracle_to_python(case.get("value"))
    if section == "modelAliases":
        args = (value, case["settingsPath"]) if "settingsPath" in case else (value,)
        return (lambda: validate_model_aliases(*args)), mapping
    if section == "budget":
        return (lambda: _json(validate_budget(value))), mapping
    if section == "budgetPatch":
        return (lambda: validate_budget_patch(value).to_json()), mapping
    if section == "checkpoint":
        return (lambda: validate_checkpoint(value).to_json()), mapping
    if section == "roleMarkdown":
        return (
            lambda: parse_role_markdown(
                case["content"], case.get("strict", False), case.get("rolePath")
            ).to_json()
        ), mapping
    if section == "resolveModel":
        return (
            lambda: resolve_model_reference(
                value, case.get("aliases", {}), case.get("knownModels"), case.get("settingsPath")
            ).to_json()
        ), mapping
    if section == "parseModel":
        return (lambda: parse_model_reference(value).to_json()), mapping
    if section == "settings":
        return _run_settings(case, scratch)
    raise AssertionError(section)


def _outcome(section: str, case: dict[str, Any], scratch: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(actual outcome, expected outcome with placeholders substituted)."""
    call, mapping = _call(section, case, scratch)
    try:
        actual: dict[str, Any] = {"ok": True, "value": call()}
    except WorkflowError as error:
        actual = {"ok": False, "code": error.code, "message": error.message}
    wanted = oracle_to_python(substitute(expected(section, case["id"]), mapping))
    return actual, wanted


def _comparable_prefix(section: str, message: str) -> str | None:
    """The part of a reference message piflow must reproduce when a parser text is embedded."""
    for prefix in PARSER_TEXT_PREFIXES:
        if message.startswith(prefix):
            return prefix
    if section == "settings" and message.startswith(SETTINGS_JSON_PREFIX):
        return message[: message.index(": ", len(SETTINGS_JSON_PREFIX)) + 2]
    return None


CASES = [
    pytest.param(section, case, id=f"{section}:{case['id']}")
    for section in SECTIONS
    for case in load_cases(section)
]


@pytest.mark.parametrize(("section", "case"), CASES)
def test_validator_matches_reference(section: str, case: dict[str, Any], tmp_path: Path) -> None:
    actual, wanted = _outcome(section, case, tmp_path)
    assert actual.get("code", "ok") == wanted.get("code", "ok"), case["description"]
    if wanted["ok"]:
        assert actual["value"] == wanted["value"], case["description"]
        return
    prefix = _comparable_prefix(section, wanted["message"])
    if prefix is None:
        assert actual["message"] == wanted["message"], case["description"]
    else:
        assert actual["message"].startswith(prefix), case["description"]


def test_exact_match_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Count exact agreement (code, full message, value) per section; every case matches today."""
    rows = []
    for section in SECTIONS:
        cases = load_cases(section)
        scratch = tmp_path / section
        scratch.mkdir()
        exact = sum(1 for case in cases if _same(*_outcome(section, case, scratch)))
        rows.append((section, exact, len(cases)))
    with capsys.disabled():
        print("\nvalidator conformance (exact/total): " + ", ".join(f"{s} {e}/{t}" for s, e, t in rows))
    assert all(exact == total for _, exact, total in rows), rows


def _same(actual: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return actual == wanted
