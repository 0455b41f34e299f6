"""One recogniser of workflow calls: analysis, the worker's instrumentation and the editor agree.

Each call shape is asked of all three: which call `inspect` (the facts every rule uses) reports and
where it begins, which call site the instrumented body passes to the internal function, and whether
hovering the callee shows the primitive (the same `context.target_at` answers definition and the
option targets of inlay hints).
"""

from __future__ import annotations

import re
from typing import Any, cast

import pytest

from piflow.analysis import Capabilities, ScriptDocument, analyze, inspect_script
from piflow.analysis.calls import GLOBAL_FUNCTIONS, INSTRUMENTED
from piflow.analysis.positions import TextIndex
from piflow.engine.worker.instrument import instrument
from piflow.server.context import target_at
from piflow.server.docs import PRIMITIVES
from piflow.server.snapshot import DocumentKind, Snapshot

INTERNAL = re.compile(r"__pi_extensible_workflows_(agent|conversation|withWorktree)\b")
CALL_SITE = re.compile(r'"(\d+):(\d+)"\)')

# (script, the call's own text in it, or None when the shape is no workflow call)
SHAPES: list[tuple[str, str | None]] = [
    ('agent("x")', 'agent("x")'),
    ('(agent)("x")', '(agent)("x")'),
    ('((agent))("x")', '((agent))("x")'),
    ('(agent /* why */)("x")', '(agent /* why */)("x")'),
    ('await agent("x")', 'agent("x")'),
    ('await (agent)("x", { label: "l" })', '(agent)("x", { label: "l" })'),
    ('const r = await ((agent))("x").then((v) => v)', '((agent))("x")'),
    ('agent?.("x")', 'agent?.("x")'),
    ('\\u0061gent("x")', '\\u0061gent("x")'),
    ('await (conversation)("c")', '(conversation)("c")'),
    ("await (withWorktree)(() => 1)", "(withWorktree)(() => 1)"),
    ('phase("p"); await (parallel)("n", { a: () => 1 })', '(parallel)("n", { a: () => 1 })'),
    ('x.agent("x")', None),
    ("agent`x`", None),
    ('new agent("x")', None),
    ('(0, agent)("x")', None),
    ('await (0, agent)("x")', None),
    ('const a = agent; a("x")', None),
]


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def span_of(script: str, call: str) -> tuple[int, int]:
    start = units(script[: script.rindex(call)])
    return start, start + units(call)


def callee_offset(script: str, call: str | None) -> int:
    """The byte offset of the callee identifier the shape is about (the last `agent`-like name)."""
    match = list(re.finditer(r"(?:\\u0061gent|agent|conversation|withWorktree|parallel)", script))[-1]
    return len(script[: match.start()].encode())


def hover_target(script: str, offset: int) -> Any:
    document = ScriptDocument(script)
    snapshot = Snapshot(
        "file:///shape.workflow.js",
        DocumentKind.SCRIPT,
        1,
        TextIndex(script),
        False,
        cast(Any, None),  # target_at reads the tree only
        kept_tree=document.tree,
    )
    return target_at(snapshot, offset)


@pytest.mark.parametrize(("script", "call"), SHAPES)
def test_analysis_instrumentation_and_hover_agree_on_call_shapes(script: str, call: str | None) -> None:
    records = [record for record in inspect_script(script) if record.kind != "phase"]
    wrapped = instrument(script)
    body = wrapped[wrapped.index('"use strict";') :]
    instrumented = [(name, *site) for name, site in zip(INTERNAL.findall(body), CALL_SITE.findall(body), strict=True)]
    target = hover_target(script, callee_offset(script, call))
    if call is None:
        assert records == []
        assert instrumented == []
        assert target is None
        return
    [record] = records
    assert (record.start, record.end) == span_of(script, call)
    expected = [(record.kind, str(record.start), str(record.end))] if record.kind in INSTRUMENTED else []
    assert instrumented == expected
    assert (target.kind, target.value) == ("primitive", record.kind)


@pytest.mark.parametrize("name", ["conversation", "withWorktree"])
def test_awaited_parenthesised_direct_calls_are_not_aliases(name: str) -> None:
    argument = '"c"' if name == "conversation" else "() => 1"
    findings = analyze(f"await ({name})({argument});", Capabilities())
    assert [finding.message for finding in findings if "direct" in finding.message] == []
    aliased = analyze(f"const f = {name}; await f({argument});", Capabilities())
    assert [finding.code for finding in aliased if "direct" in finding.message] == ["INVALID_METADATA"]


def test_option_targets_follow_the_same_calls() -> None:
    script = 'await (agent)("x", { model: "fast" })'
    target = hover_target(script, script.index("fast"))
    assert (target.kind, target.value) == ("model", "fast")
    assert hover_target('x.agent("x", { model: "fast" })', 20) is None


def test_every_workflow_global_function_has_editor_docs() -> None:
    assert set(PRIMITIVES) == set(GLOBAL_FUNCTIONS)
    for name in ("log", "prompt"):
        target = hover_target(f'{name}("x")', 0)
        assert (target.kind, target.value) == ("primitive", name)
