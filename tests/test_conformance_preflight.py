"""The reference's recorded preflight and inspect outcomes, replayed through piflow's public API.

Each corpus case is one test (code, message, payload, inspect record); `test_agreement_targets`
prints the agreement figures and holds the project's bars: codes ≥ 99 %, inspect ≥ 98 % of the
cases where the reference returns calls, every message the spec fixes exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from conformance import expected, load_cases, oracle_to_python
from piflow import Capabilities, WorkflowError, inspect_script, preflight
from piflow.jsvalues import JSOpaque

SECTION = "preflight"
SYNTAX_PREFIX = "Invalid workflow syntax: "


def canonical(value: Any) -> Any:
    """A comparable form: opaque JS values by kind and content, floats that are integers as ints."""
    if isinstance(value, JSOpaque):
        return ("$opaque", value.kind, canonical(value.value))
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def case_metadata(case: dict[str, Any]) -> Any:
    """Metadata as the case gives it. `preflight(metadata=None)` means "absent" (the default), so a
    deliberate JSON `null` is passed as an opaque non-object value, which the reference rejects the
    same way."""
    if "metadata" not in case:
        return {"name": "case"}
    value = oracle_to_python(case["metadata"])
    return JSOpaque("null") if value is None else value


@dataclass(frozen=True)
class Outcome:
    case: dict[str, Any]
    expected: dict[str, Any]
    preflight: dict[str, Any]
    inspect: dict[str, Any]

    @property
    def engine_sensitive(self) -> bool:
        return "engine-sensitive" in self.case["tags"]

    @property
    def code_agrees(self) -> bool:
        want = "ok" if self.expected["ok"] else self.expected["code"]
        got = "ok" if self.preflight["ok"] else self.preflight["code"]
        return want == got

    @property
    def message_exact(self) -> bool:
        if self.expected["ok"]:
            return self.preflight["ok"]
        return self.code_agrees and self.preflight["message"] == self.expected["message"]

    @property
    def message_agrees(self) -> bool:
        """Exact, except parser texts of INVALID_SYNTAX (prefix only) and engine-sensitive cases."""
        if self.message_exact or self.engine_sensitive:
            return self.code_agrees or self.engine_sensitive
        if self.code_agrees and self.expected.get("code") == "INVALID_SYNTAX":
            message: str = self.preflight["message"]
            return message.startswith(SYNTAX_PREFIX) == self.expected["message"].startswith(SYNTAX_PREFIX)
        return False

    @property
    def payload_agrees(self) -> bool:
        if not self.expected["ok"]:
            return True
        want = {key: value for key, value in self.expected.items() if key != "inspect"}
        return canonical(oracle_to_python(want)) == canonical(self.preflight)

    @property
    def inspect_agrees(self) -> bool:
        return canonical(oracle_to_python(self.expected["inspect"])) == canonical(self.inspect)


@cache
def outcome(case_id: str) -> Outcome:
    case = next(item for item in load_cases(SECTION) if item["id"] == case_id)
    capabilities = Capabilities.from_json(case["capabilities"])
    schemas = oracle_to_python(case.get("schemas", []))
    try:
        result = preflight(case["script"], capabilities, schemas, case_metadata(case))
        got: dict[str, Any] = {"ok": True, **result.to_json()}
    except WorkflowError as error:
        got = {"ok": False, "code": error.code, "message": error.message}
    try:
        inspected: dict[str, Any] = {
            "ok": True,
            "calls": [call.to_json() for call in inspect_script(case["script"])],
        }
    except WorkflowError as error:
        inspected = {"ok": False, "code": error.code, "message": error.message}
    return Outcome(case, expected(SECTION, case_id), got, inspected)


CASE_IDS = [case["id"] for case in load_cases(SECTION)]


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_preflight_case(case_id: str) -> None:
    result = outcome(case_id)
    assert result.code_agrees, (result.expected, result.preflight)
    assert result.message_agrees, (result.expected.get("message"), result.preflight.get("message"))
    assert result.payload_agrees, (result.expected, result.preflight)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_inspect_case(case_id: str) -> None:
    result = outcome(case_id)
    assert result.inspect_agrees, (result.expected["inspect"], result.inspect)


def test_agreement_targets(capsys: pytest.CaptureFixture[str]) -> None:
    results = [outcome(case_id) for case_id in CASE_IDS]
    total = len(results)
    codes = sum(result.code_agrees for result in results)
    messages = sum(result.message_agrees for result in results)
    exact = sum(result.message_exact for result in results)
    payloads = sum(result.payload_agrees for result in results)
    with_calls = [result for result in results if result.expected["inspect"]["ok"]]
    inspected = sum(result.inspect_agrees for result in with_calls)
    inspect_all = sum(result.inspect_agrees for result in results)
    disagreeing = [
        result.case["id"]
        for result in results
        if not (result.code_agrees and result.message_exact and result.payload_agrees and result.inspect_agrees)
    ]
    with capsys.disabled():
        print(
            f"\npreflight conformance over {total} cases: codes {codes / total:.2%}, "
            f"messages {messages / total:.2%} (exact, parser texts included: {exact / total:.2%}), "
            f"payloads {payloads / total:.2%}, inspect {inspected / len(with_calls):.2%} of "
            f"{len(with_calls)} cases with calls ({inspect_all / total:.2%} of all); "
            f"disagreeing: {', '.join(disagreeing) or 'none'}"
        )
    assert codes / total >= 0.99
    assert inspected / len(with_calls) >= 0.98
    fixed = [
        result for result in results if not result.engine_sensitive and result.expected.get("code") != "INVALID_SYNTAX"
    ]
    assert all(result.message_exact for result in fixed), [r.case["id"] for r in fixed if not r.message_exact]
