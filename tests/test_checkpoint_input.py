"""Checkpoint input limits (spec A.9) beyond the recorded validator cases."""

from __future__ import annotations

import pytest

from piflow.analysis.checkpoint import json_size, validate_checkpoint
from piflow.errors import WorkflowError
from piflow.jsvalues import UNDEFINED, JSFunction, JSOpaque


def test_context_size_counts_json_stringify_bytes() -> None:
    assert json_size({"a": [1, 2.5, None, True]}) == len('{"a":[1,2.5,null,true]}')
    assert json_size("é\n") == len('"é\\n"'.encode())
    assert json_size(1e21) == len("1e+21")


def test_context_of_4096_bytes_passes_and_4097_fails() -> None:
    assert validate_checkpoint({"name": "n", "prompt": "", "context": "a" * 4094}).context == "a" * 4094
    with pytest.raises(WorkflowError, match=r"^checkpoint context exceeds 4096 UTF-8 bytes$"):
        validate_checkpoint({"name": "n", "prompt": "", "context": "a" * 4095})


def test_multibyte_prompt_is_measured_in_utf8() -> None:
    with pytest.raises(WorkflowError, match=r"^checkpoint prompt exceeds 1024 UTF-8 bytes$"):
        validate_checkpoint({"name": "n", "prompt": "é" * 513, "context": None})


@pytest.mark.parametrize(
    "context",
    [
        UNDEFINED,
        JSFunction(),
        [1, UNDEFINED],
        {"a": float("inf")},
        JSOpaque("classInstance", {}),
        JSOpaque("bigint", "1"),
    ],
)
def test_non_json_context_is_rejected(context: object) -> None:
    with pytest.raises(WorkflowError, match=r"^checkpoint requires only name, prompt, and JSON context$"):
        validate_checkpoint({"name": "n", "prompt": "p", "context": context})


def test_missing_context_is_rejected() -> None:
    with pytest.raises(WorkflowError):
        validate_checkpoint({"name": "n", "prompt": "p"})


def test_deeply_nested_context_is_measured_without_recursion() -> None:
    context: object = []
    for _ in range(3000):
        context = [context]
    with pytest.raises(WorkflowError, match="exceeds 4096"):
        validate_checkpoint({"name": "n", "prompt": "p", "context": context})


def test_result_supports_item_access() -> None:
    checked = validate_checkpoint({"name": "ship", "prompt": "Ship?", "context": {"sha": "abc"}})
    assert (checked["name"], checked["prompt"], checked["context"]) == ("ship", "Ship?", {"sha": "abc"})
