"""The engine answers with typed views; the camelCase wire shapes are built at the edges (issue 9).

What this covers, exactly:
- `engine/views.py` and `engine/agent_details.py` build no dict with a camelCase key at all
  (literal, `dict(...)` keywords, or an item assignment), and none of their public functions is
  annotated to return a dict;
- the control replies (`control.stop`, `control.answer_checkpoint`, `Engine.stop/respond/resume`)
  are annotated to return `ControlOutcome`, not dicts;
- no module under `engine/` builds a dict using a key that only the view and control-reply wire
  shapes have: those camelCase keys of `piflow/view_wire.py` that no spec I event payload,
  snapshot (spec G) or store JSON column uses (`SHARED_KEYS` lists the ones they do use, such as
  `runId`, which the engine's events carry and so may build).
It does not look at event payloads, the snapshot or the store's JSON columns, which stay dicts.
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from pathlib import Path

import pytest
from test_store_support import new_run

from piflow.config.resources import ResourcePolicy
from piflow.engine.lifecycle import AgentState
from piflow.engine.store import AgentRecord, AttemptRecord, AttemptSetup, DamagedRecord, RunStore
from piflow.view_wire import setup_json

SOURCE = Path(__file__).resolve().parents[2] / "src" / "piflow"
ENGINE = SOURCE / "engine"
CAMEL = re.compile(r"^[a-z]+[A-Z]\w*$")
SHARED_KEYS = frozenset({
    "runId", "workflowName",  # every event payload (engine/events.py `base_payload`)
    "scriptPath",  # the snapshot (engine/snapshot.py)
    "proposalId",  # budget proposals' decision payload and budget events
    "costUsd",  # usage (engine/budgets.py), as the store keeps it
    "structuralPath", "journalPath", "parentId",  # agent events (engine/agents.py, spec I)
    # pi-subagents results the script gets (SUBAGENTS_SPEC A.4, A.6, A.7), journaled and in its events
    "outputReference", "failedStage", "exitCode", "outputPath", "durationMs",
    "systemPrompt",  # agent definitions in the launch snapshot's catalog (engine/subagents/agents.py)
})


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def dict_keys(tree: ast.AST) -> list[tuple[int, str]]:
    """Every constant string key a dict gets: in a literal, as a `dict(...)` keyword, or by an item
    assignment (`d["key"] = ...`)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found += [(node.lineno, key.value) for key in node.keys
                      if isinstance(key, ast.Constant) and isinstance(key.value, str)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            found += [(node.lineno, k.arg) for k in node.keywords if k.arg]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.append((node.lineno, key.value))
    return found


def view_only_keys() -> frozenset[str]:
    """The camelCase keys the wire shapes of views and control replies use and nothing else does."""
    strings = {node.value for node in ast.walk(_parse(SOURCE / "view_wire.py"))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return frozenset(s for s in strings if CAMEL.match(s)) - SHARED_KEYS


def returns(tree: ast.AST) -> dict[str, str]:
    """Each function's return annotation, as written."""
    return {node.name: ast.unparse(node.returns) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None}


def test_views_build_no_camelcase_dicts_and_return_no_dicts() -> None:
    public: dict[str, str] = {}
    for module in ("views.py", "agent_details.py"):
        tree = _parse(ENGINE / module)
        assert [(line, key) for line, key in dict_keys(tree) if CAMEL.match(key)] == [], module
        public.update({name: annotation for name, annotation in returns(tree).items() if not name.startswith("_")})
    assert {"run_view", "run_summary", "agent_view", "agent_details", "agent_detail"} <= public.keys()
    assert [name for name, annotation in public.items() if "dict" in annotation] == []


def test_control_replies_are_typed() -> None:
    control = returns(_parse(ENGINE / "control.py"))
    engine = returns(_parse(ENGINE / "engine.py"))
    assert control["stop"] == "ControlOutcome"
    assert control["answer_checkpoint"].startswith("tuple[ControlOutcome,")
    assert {name: engine[name] for name in ("stop", "respond", "resume", "_resume_with_budget", "_answer_proposal")} \
        == dict.fromkeys(("stop", "respond", "resume", "_resume_with_budget", "_answer_proposal"), "ControlOutcome")


def test_no_engine_module_builds_a_view_wire_shape() -> None:
    forbidden = view_only_keys()
    assert {"agentList", "attemptList", "outputPreview", "outputTruncated", "transcriptPath", "updatedAt"} <= forbidden
    found = [
        f"{path.relative_to(SOURCE)}:{line} {key}"
        for path in sorted(ENGINE.rglob("*.py"))
        for line, key in dict_keys(_parse(path))
        if key in forbidden
    ]
    assert found == []


def test_the_scan_sees_literals_keywords_and_item_assignments() -> None:
    tree = ast.parse('a = {"agentList": []}\nb = dict(outputPreview=1)\nc = {}\nc["transcriptPath"] = None\n')
    assert [key for _, key in dict_keys(tree)] == ["agentList", "outputPreview", "transcriptPath"]


def test_control_replies_keep_their_wire_shape() -> None:
    """`piflow stop`/`budget` print these, an owner process reports them to its parent: same keys, same order."""
    from piflow.engine.control import ControlOutcome
    from piflow.view_wire import outcome_json

    shapes = [
        (ControlOutcome("completed", run_id="r", stopped=False, reason="already_terminal"),
         [("runId", "r"), ("state", "completed"), ("stopped", False), ("reason", "already_terminal")]),
        (ControlOutcome("not_pending", accepted=False, approved=True, reason="checkpoint"),
         [("accepted", False), ("state", "not_pending"), ("approved", True), ("reason", "checkpoint")]),
        (ControlOutcome("budget_exhausted", run_id="r", proposal_id="p", message="m"),
         [("runId", "r"), ("state", "budget_exhausted"), ("proposalId", "p"), ("message", "m")]),
        (ControlOutcome("running", run_id="r", approved=True, reason="approved"),
         [("runId", "r"), ("state", "running"), ("approved", True), ("reason", "approved")]),
    ]
    for outcome, items in shapes:
        assert list(outcome_json(outcome).items()) == items


def _store_with_attempt(tmp_path: Path, setup: AttemptSetup | None) -> tuple[RunStore, str]:
    store = RunStore.open(tmp_path / "runs.db")
    run = new_run(store)
    agent_id = f"{run.id}:1"
    store.put_agent(AgentRecord(id=agent_id, run_id=run.id, n=1, name="review", model="m", state=AgentState.RUNNING))
    store.put_attempt(AttemptRecord(agent_id=agent_id, attempt=1, started_at=1.0, setup=setup))
    return store, agent_id


def test_the_attempt_set_up_is_typed_through_the_store_and_wire_shaped_only_at_the_edge(tmp_path: Path) -> None:
    setup = AttemptSetup(hook_names=("early",), model="openai/gpt-5", thinking="low", tools=("read",),
                         cwd="/w", system_prompt="Be brief.", system_prompt_sha256="ab",
                         disabled_resources=ResourcePolicy(("deploy",), ()))
    store, agent_id = _store_with_attempt(tmp_path, setup)
    with store:
        assert store.attempts(agent_id)[0].setup == setup
    assert setup_json(setup) == {"hookNames": ["early"], "model": "openai/gpt-5", "thinking": "low",
                                 "tools": ["read"], "cwd": "/w", "systemPrompt": "Be brief.",
                                 "systemPromptSha256": "ab",
                                 "disabledAgentResources": {"skills": ["deploy"], "extensions": []}}


def test_a_store_written_before_the_set_up_was_typed_still_reads(tmp_path: Path) -> None:
    """Attempts stored with the earlier camelCase set-up keep showing what they ran with."""
    store, agent_id = _store_with_attempt(tmp_path, None)
    earlier = {"hookNames": ["h"], "model": "m", "thinking": None, "tools": ["ls"], "cwd": "/c",
               "systemPrompt": "P", "systemPromptSha256": "s",
               "disabledAgentResources": {"skills": [], "extensions": ["/x.ts"]}}
    with sqlite3.connect(tmp_path / "runs.db") as db:
        db.execute("UPDATE attempts SET setup = ?", (json.dumps(earlier),))
    with store:
        setup = store.attempts(agent_id)[0].setup
        assert isinstance(setup, AttemptSetup)
        assert (setup.hook_names, setup.tools, setup.system_prompt) == (("h",), ("ls",), "P")
        assert setup.system_prompt_sha256 == "s"
        assert setup.disabled_resources is not None and setup.disabled_resources.extensions == ("/x.ts",)
        with sqlite3.connect(tmp_path / "runs.db") as db:
            db.execute("UPDATE attempts SET setup = ?", (json.dumps({"tools": "read"}),))
        with pytest.raises(DamagedRecord, match="column setup does not hold what it should"):
            store.attempts(agent_id)
