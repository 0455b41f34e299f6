"""Values a script sends across the sandbox boundary never raise inside the host (issue: hostile input).

Each case runs a real script through the real engine (worker subprocess, SQLite store, scripted
backend) and asserts what a user sees: the script's `try` catches a clear error with the spec's code,
or the run fails with one; the run's record, events and views stay readable; and the engine goes on
to run the next script.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunRecord, RunStore
from piflow.engine.views import run_view
from piflow.engine.worker.boundary import MAX_DEPTH
from piflow.view_wire import run_json


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
async def engine(project: Path) -> AsyncIterator[Engine]:
    async with Engine(RunStore.open(project.parent / "runs.db")) as running:
        yield running


async def run_script(engine: Engine, project: Path, script: str, answer: bool = True) -> RunRecord:
    """Run to the end, approving every checkpoint; the stored view must serialise as JSON."""
    run_id = await engine.launch(LaunchRequest(script=script, cwd=str(project)))
    with anyio.fail_after(60):
        while (record := engine.store.get_run(run_id)) is None or record.state not in {"completed", "failed"}:
            for checkpoint in engine.store.awaiting_checkpoints(run_id):
                engine.respond(run_id, name=checkpoint.label, approved=answer)
            await anyio.sleep(0.02)
    json.dumps(run_json(run_view(engine.store, run_id)), ensure_ascii=False).encode("utf-8")
    for event in engine.store.events(run_id):
        json.dumps(event.payload, ensure_ascii=False).encode("utf-8")
    return record


def nested(depth: int, leaf: str = "1") -> str:
    """JavaScript that builds an array nested `depth` levels deep."""
    return f"(() => {{ let v = {leaf}; for (let i = 0; i < {depth}; i++) v = [v]; return v; }})()"


CAUGHT = """
const caught = [];
const attempt = async (what, action) => {
  try { await action(); caught.push([what, "ok"]); }
  catch (error) { caught.push([what, error.code || error.name, error.message]); }
};
"""


async def test_deep_values_fail_in_the_script_with_a_clear_error(engine: Engine, project: Path) -> None:
    deep = nested(MAX_DEPTH + 5)
    script = (
        CAUGHT
        + f"""
    const deep = {deep};
    await attempt("options", () => agent("x", {{ label: "a", extra: deep }}));
    await attempt("checkpoint", () => checkpoint({{ name: "c", prompt: "p", context: deep }}));
    await attempt("phase", () => phase(deep));
    await attempt("shallow", () => agent("fine", {{ label: "b" }}));
    return caught;
    """
    )
    record = await run_script(engine, project, script)
    assert record.state == "completed", record
    caught = run_view(engine.store, record.id).result
    too_deep = f"must be nested at most {MAX_DEPTH} levels deep"
    assert caught[0] == ["options", "INVALID_METADATA", f"agent options {too_deep}"]
    assert caught[1] == ["checkpoint", "INVALID_METADATA", f"checkpoint input {too_deep}"]
    assert caught[2][:2] == ["phase", "INVALID_METADATA"]
    assert caught[3] == ["shallow", "ok"]


async def test_values_too_deep_for_pythons_json_decoder_fail_only_their_call(engine: Engine, project: Path) -> None:
    script = (
        CAUGHT
        + f"""
    await attempt("options", () => agent("x", {{ label: "a", extra: {nested(3000)} }}));
    await attempt("after", () => agent("y", {{ label: "b" }}));
    return caught;
    """
    )
    record = await run_script(engine, project, script)
    assert record.state == "completed"
    caught = run_view(engine.store, record.id).result
    assert caught[0][:2] == ["options", "INVALID_METADATA"]
    assert "nested" in caught[0][2]
    assert caught[1] == ["after", "ok"]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 3000])
async def test_a_deep_result_fails_the_run_with_result_invalid(engine: Engine, project: Path, depth: int) -> None:
    record = await run_script(engine, project, f"return {nested(depth)};")
    assert record.state == "failed"
    error = run_view(engine.store, record.id).error
    assert error["code"] == "RESULT_INVALID"
    assert f"nested at most {MAX_DEPTH} levels" in error["message"]


async def test_lone_surrogates_fail_in_the_script_and_the_run_stays_readable(engine: Engine, project: Path) -> None:
    script = (
        CAUGHT
        + r"""
    await attempt("phase", () => phase("bad \ud800 phase"));
    await attempt("log", () => log("x\udc00y"));
    await attempt("prompt", () => agent("prompt \ud83d", { label: "a" }));
    await attempt("label", () => agent("p", { label: "l\udfff" }));
    await attempt("paired", () => agent("emoji \ud83d\ude00 is fine", { label: "😀" }));
    return caught;
    """
    )
    record = await run_script(engine, project, script)
    assert record.state == "completed"
    caught = run_view(engine.store, record.id).result
    unicode = "must be well-formed Unicode (it contains a lone surrogate)"
    assert caught[0] == ["phase", "INVALID_METADATA", f"phase name {unicode}"]
    assert caught[1] == ["log", "INVALID_METADATA", f"log message {unicode}"]
    assert caught[2] == ["prompt", "INVALID_METADATA", f"agent prompt {unicode}"]
    assert caught[3] == ["label", "INVALID_METADATA", f"agent options {unicode}"]
    assert caught[4] == ["paired", "ok"]


async def test_a_result_or_error_with_lone_surrogates_reaches_the_user(engine: Engine, project: Path) -> None:
    record = await run_script(engine, project, r'return "r\ud800";')
    assert record.state == "failed"
    assert run_view(engine.store, record.id).error["code"] == "RESULT_INVALID"
    record = await run_script(engine, project, r'throw new Error("broken \ud800 text");')
    assert record.state == "failed"
    assert "broken \ufffd text" in run_view(engine.store, record.id).error["message"]


async def test_tampered_prototypes_cannot_break_the_protocol(engine: Engine, project: Path) -> None:
    script = """
    Array.prototype.toJSON = function () { return 5; };
    Object.defineProperty(Array.prototype, "0", { set(v) {}, configurable: true });
    const results = await parallel("fan", {
      a: () => agent("one", { label: "a" }),
      b: () => agent("two", { label: "b" }),
    });
    delete Array.prototype.toJSON;
    return Object.keys(results);
    """
    record = await run_script(engine, project, script)
    assert record.state == "completed", run_view(engine.store, record.id).error
    assert sorted(run_view(engine.store, record.id).result) == ["a", "b"]


async def test_object_to_json_tampering_is_a_clear_script_error(engine: Engine, project: Path) -> None:
    script = """
    Object.prototype.toJSON = function () { return 5; };
    return await agent("hello", { label: "a" });
    """
    record = await run_script(engine, project, script)
    assert record.state == "failed"
    error = run_view(engine.store, record.id).error
    # JSON.stringify sends what toJSON returns, as in the reference: options that are not an object.
    assert error["code"] == "INVALID_METADATA"
    assert "agent options must be a JSON object" in error["message"]


async def test_scripts_run_in_strict_mode(engine: Engine, project: Path) -> None:
    record = await run_script(engine, project, 'try { undeclared = 1; return "sloppy"; } catch (e) { return e.name; }')
    assert run_view(engine.store, record.id).result == "ReferenceError"


# -- property: no value a script can build raises inside the host ------------------------------

_CHARS = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.sampled_from('😀\u2028\x00"\\'))
# json.dumps writes a JavaScript string literal; lone surrogates become `\udXXX` escapes, as a script may write them.
_STRING = st.text(_CHARS, max_size=12).map(json.dumps)
_LEAF = st.one_of(
    _STRING,
    st.sampled_from(["null", "true", "false", "0", "-1.5", "1e308", "NaN", "undefined", "() => 1", "Symbol('s')"]),
)


def _containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arrays = st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
    objects = st.lists(st.tuples(_STRING, children), max_size=4).map(
        lambda pairs: "{" + ",".join(f"[{key}]: {value}" for key, value in pairs) + "}"
    )
    return arrays | objects


_VALUE = st.one_of(
    st.recursive(_LEAF, _containers, max_leaves=30),
    st.tuples(st.integers(1, 400), _LEAF).map(lambda pair: nested(*pair)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=_VALUE)
async def test_random_values_never_crash_the_host(tmp_path_factory: pytest.TempPathFactory, value: str) -> None:
    root = tmp_path_factory.mktemp("property")
    script = (
        CAUGHT
        + f"""
    const value = {value};
    await attempt("options", () => agent("p", {{ label: "o", extra: value }}));
    await attempt("prompt", () => agent(typeof value === "string" ? value : "p", {{ label: "s" }}));
    await attempt("label", () => agent("p", {{ label: typeof value === "string" && value.trim() ? value : "l" }}));
    await attempt("checkpoint", () => checkpoint({{ name: "c", prompt: "p", context: value }}));
    await attempt("phase", () => phase(value));
    await attempt("log", () => log(value));
    return [caught, value];
    """
    )
    async with Engine(RunStore.open(root / "runs.db")) as engine:
        record = await run_script(engine, root, script)
        assert record.state in {"completed", "failed"}
        view = run_view(engine.store, record.id)
        if record.state == "failed":
            assert view.error["code"] in {"RESULT_INVALID", "RPC_LIMIT_EXCEEDED", "INTERNAL_ERROR"}
        # The engine still runs scripts afterwards.
        after = await run_script(engine, root, 'return await agent("still here", { label: "z" });')
        assert after.state == "completed"
