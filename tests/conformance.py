"""Shared loader for the recorded reference outcomes kept in tests/data/conformance.

Kept deliberately small so several test modules can import it: load the cases of a
section, look up an expected outcome, turn `{"$oracle": ...}` markers into the Python
notions piflow's API accepts, and substitute path placeholders.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from piflow.jsvalues import UNDEFINED, JSFunction, JSOpaque

__all__ = ["CONFORMANCE_DIR", "expected", "load_cases", "oracle_to_python", "substitute"]


def _conformance_dir() -> Path:
    """The repository's own copy of the corpus, or another one named by `PIFLOW_CONFORMANCE_DIR`."""
    override = os.environ.get("PIFLOW_CONFORMANCE_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent / "data" / "conformance"


CONFORMANCE_DIR: Path = _conformance_dir()


@cache
def _load(name: str) -> dict[str, Any]:
    with (CONFORMANCE_DIR / name).open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def load_cases(section: str) -> list[dict[str, Any]]:
    """The corpus cases of `section` (raw JSON: `$oracle` markers are left as they are)."""
    cases: list[dict[str, Any]] = _load("corpus.json")[section]
    return cases


def expected(section: str, case_id: str) -> dict[str, Any]:
    """The recorded outcome of one case (raw JSON)."""
    outcome: dict[str, Any] = _load("expected.json")[section][case_id]
    return outcome


_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_OPAQUE = {"bigint", "date", "nullProto", "classInstance", "symbolKey", "sparseArray", "regexp"}


def oracle_to_python(value: Any) -> Any:
    """Replace `{"$oracle": kind, ...}` markers (recursively) with Python equivalents.

    undefined -> UNDEFINED, function -> JSFunction(), NaN/Infinity -> floats,
    cycle -> a dict (holding the converted `value` keys) whose `self` is itself,
    everything else non-plain -> JSOpaque(kind, converted value or the whole marker).
    """
    if isinstance(value, list):
        return [oracle_to_python(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("$oracle")
    if not isinstance(kind, str):
        return {key: oracle_to_python(item) for key, item in value.items()}
    if kind == "undefined":
        return UNDEFINED
    if kind == "function":
        return JSFunction()
    if kind in _FLOATS:
        return _FLOATS[kind]
    if kind == "cycle":
        inner = oracle_to_python(value.get("value", {}))
        cyclic: dict[str, Any] = dict(inner) if isinstance(inner, dict) else {}
        cyclic["self"] = cyclic
        return cyclic
    if kind in _OPAQUE:
        if "value" in value:
            return JSOpaque(kind, oracle_to_python(value["value"]))
        rest = {key: item for key, item in value.items() if key != "$oracle"}
        return JSOpaque(kind, rest or None)
    return JSOpaque(kind, {key: item for key, item in value.items() if key != "$oracle"})


def substitute(text: Any, mapping: dict[str, str]) -> Any:
    """Replace placeholders such as `<HOME>` in strings (recursively through lists and dicts)."""
    if isinstance(text, str):
        for placeholder, replacement in mapping.items():
            text = text.replace(placeholder, replacement)
        return text
    if isinstance(text, list):
        return [substitute(item, mapping) for item in text]
    if isinstance(text, dict):
        return {key: substitute(item, mapping) for key, item in text.items()}
    return text
