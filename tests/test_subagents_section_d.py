"""SUBAGENTS_SPEC section D through `piflow run` on the scripted backend: every example, its expected outcome.

Each row is run as a user would run it (`python -m piflow run script --json` in an isolated home),
children answered by a fixture where the child keyed `fails` fails with `boom`. Rows that need
`runs.lanes` or `runs.host` are marked and skipped until that part exists. The table of outcomes
is printed (`pytest -s` shows it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.isolation import isolated_environment

W = "{agent:'worker',task:'Do it'}"
FIXTURES = """
responses:
  - match: {label: fails}
    fail: {code: AGENT_FAILED, message: boom}
"""


@dataclass(frozen=True)
class Row:
    id: str
    script: str
    expected: str
    """`ok` (the run completes; `result` checks its value) or a text the run's error contains."""
    result: object = None
    needs: str | None = None


ROWS = [
    Row("1", "return runs.run('main',{agent:'worker',task:'Do it'})", "ok"),
    Row("2", "const [a,b]=await runs.all([{key:'correctness',agent:'reviewer',task:'c'},"
             "{key:'tests',agent:'reviewer',task:'t'}]); return {c:a.output,t:b.output}", "ok",
        {"c": "[scripted] c", "t": "[scripted] t"}),
    Row("3", 'const task=["Run:","```bash","npm test","```"].join("\\n");'
             " return runs.run('test',{agent:'worker',task})", "ok"),
    Row("4", "const t = `\n```bash\nnpm test\n```\n`;\nreturn runs.run('x',{agent:'worker',task:t})", "Unexpected"),
    Row("5", f"async function helper(){{return runs.run('a',{W})}} await helper()", "nested async functions"),
    Row("6", f"const helper = async () => runs.run('a',{W}); await helper()", "nested async functions"),
    Row("7", f"const o = {{ async scan(){{ return runs.run('a',{W}) }} }}; await o.scan()", "nested async functions"),
    Row("8", f"const v=`${{(async()=>runs.run('a',{W}))()}}`", "nested async functions"),
    Row("9", f"runs.run('bg',{W}).then(()=>{{}}); return 'done'", "unawaited runs.run launch(es): 'bg'"),
    Row("10", f"return runs.run('x',{W}).output", "unawaited runs.run launch(es): 'x'"),
    Row("11", f"runs.run('first',{W}); runs.run('second',{W}); return null",
        "unawaited runs.run launch(es): 'first', 'second'"),
    # Rows 12, 14, 15 and H2–H4 fail `validate`, which `piflow run` applies before anything launches;
    # their `r` variants hide the literal from validate and get the runtime's error.
    Row("12", "const results=await runs.all([{key:'api',agent:'worker',task:'a'},{key:'ui',agent:'worker',task:'u'}]);"
              " return results.api.output", "'results.api' is keyed access"),
    Row("12r", "const results=await runs.all([{key:'api',agent:'worker',task:'a'},{key:'ui',agent:'worker',task:'u'}]);"
               " const k='api'; try { results[k] } catch (e) { return e.message }", "ok",
        "Cannot read runs.all result property 'api'. runs.all resolves to an ordered array, not a key map. "
        "Use results[0], destructuring, or results.map(...)."),
    Row("13", "await runs.run('same',{agent:'worker',task:'one'}); await runs.run('same',{agent:'worker',task:'two'})",
        "Duplicate workflow key 'same' used with incompatible launch params."),
    Row("14", "await runs.run('k',{agent:'w',task:'x',onDone:()=>1})", "runs.run params are invalid: functions"),
    Row("14r", "const p={agent:'w',task:'x'}; p.onDone=()=>1;"
               " try { await runs.run('k',p) } catch (e) { return e.message }", "ok",
        "runs.run params.onDone must be a JSON value; received function."),
    Row("15", "emit(1n)", "BigInt values are not JSON-representable"),
    Row("15r", "const v = BigInt(1); try { emit(v) } catch (e) { return e.message }", "ok",
        "emit must be a JSON value; received bigint."),
    Row("16", "emit(NaN)", "emit must contain only finite JSON numbers."),
    Row("17", "await runs.run('g',{agent:'worker',task:'t',gate:'npm test',acceptance:{verify:'x'}})",
        "runs.run gate cannot be combined with acceptance"),
    Row("18", "await runs.run('r',{resume:'abc',agent:'w',task:'again'})",
        "runs.run resume and agent are mutually exclusive."),
    Row("19", "await runs.run('r',{resume:'abc'})", "runs.run resume requires a non-empty task follow-up."),
    Row("20", "await runs.run('t',{tasks:[{agent:'worker',task:'x'}]})",
        "runs.run accepts one child via { agent, task }"),
    Row("20b", "await runs.run('t',{agent:'worker',task:'x',workflowScript:'return 1'})",
        "runs.run accepts one child via { agent, task }"),
    Row("21", "await runs.run('c',{agent:'worker',task:'x',clarify:true})", "runs.run does not support clarify UI."),
    Row("22", f"const w = runs.run('writer',{W}); await runs.steer('writer','guide',{{mode:'later'}}); await w",
        "runs.steer mode must be 'steer', 'follow_up', or 'auto'."),
    Row("23", "await runs.steer('writer','g')", "runs.steer('writer') requires a prior runs.run/runs.all launch"),
    Row("24", f"const w=runs.run('writer',{W}); runs.steer('writer','hi'); return (await w).output",
        "unawaited runs.steer call(s): 'writer'"),
    Row("25", "const first = await runs.run('advisor-oracle',{agent:'oracle',task:'Advise'});\n"
              "return (await runs.run('again',{resume:first.runId,task:'More'})).continuation.runIds.length", "ok", 2),
    Row("26", "await runs.run('k',{resume:{workflowRunId:'wf-1',key:'advisor-oracle'},task:'x'})",
        "runs.run keyed resume requires latest: true."),
    Row("27", "try{await runs.run('fails',{agent:'worker',task:'x'})}catch(e){return e.message}", "ok",
        "Run 'fails' failed: boom"),
    Row("28", "   \n", "workflowScript must not be empty."),
    Row("L1", "return runs.lanes([{key:'a',stages:[{key:'writer',agent:'worker',task:'w'},"
              "{key:'review',resume:'previous',task:'r'}]}])", "ok", needs="lanes"),
    Row("L2", "return runs.lanes([{key:'a',stages:[{key:'s',resume:'previous',task:'r'}]}])",
        "cannot resume previous without a predecessor stage", needs="lanes"),
    Row("L3", "return runs.lanes([{key:'a',stages:[{key:'writer',agent:'worker',task:'w'},"
              "{key:'writer',agent:'worker',task:'w'}]}])", "duplicate stage key 'writer'", needs="lanes"),
    Row("L4", "return runs.lanes([{key:'a',agent:'worker',stages:[{key:'s',agent:'worker',task:'w'}]}])",
        "contains unsupported fields", needs="lanes"),
    Row("L5", "return runs.lanes([{key:'a',stages:[{key:'w',agent:'worker',task:'w'},"
              "{key:'r',agent:'worker',resume:'previous',task:'r'}]}])",
        "stage 1 resume and agent are mutually exclusive", needs="lanes"),
    Row("H1", "return runs.host('ci',{kind:'command',command:'true',timeoutMs:120000})", "ok", needs="host"),
    Row("H2", "return runs.host('ci',{kind:'command',command:'true',timeoutMs:120000,cwd:'/repo/wt'})",
        "unsupported field 'cwd'", needs="host"),
    Row("H3", "return runs.host('ci',{kind:'command',command:'true'})", "require timeoutMs", needs="host"),
    Row("H4", "return runs.host('ci',{kind:'command',command:'true',timeoutMs:1000,output:'../ci.log'})",
        "traversal", needs="host"),
    Row("H5", "runs.host('ci',{kind:'command',command:'true',timeoutMs:1000}); return 1",
        "unawaited runs.host call(s): 'ci'", needs="host"),
]


def _hook_ready(name: str) -> bool:
    prelude = Path(__file__).parents[1] / "src/piflow/engine/worker/prelude.js"
    return f"subagentHooks.{name} = " in prelude.read_text(encoding="utf-8")


def _run(base: Path, row: Row) -> tuple[str, object]:
    """(`ok`, result) or (`error`, message) of `piflow run` on the row's script."""
    project = base / f"row-{row.id}"
    project.mkdir()
    (project / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\ntrust_project = true\n', encoding="utf-8")
    (project / "fixtures.yaml").write_text(FIXTURES, encoding="utf-8")
    script = project / "row.workflow.js"
    script.write_text("// piflow: pi-subagents\n" + row.script, encoding="utf-8")
    env = isolated_environment(base / "home-root", base / "home", base / "agent")
    done = subprocess.run(
        [sys.executable, "-m", "piflow", "run", str(script), "--json", "--fixtures", str(project / "fixtures.yaml")],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if lines:
        outcome = json.loads(lines[-1])
        if outcome["state"] == "completed":
            return "ok", outcome["result"]
        return "error", outcome["error"]["message"]
    return "error", (done.stderr + done.stdout).strip()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, object]]:
    base = tmp_path_factory.mktemp("section-d")
    runnable = [row for row in ROWS if row.needs is None or _hook_ready(row.needs)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = dict(zip([row.id for row in runnable], pool.map(lambda row: _run(base, row), runnable), strict=True))
    print("\n| # | expected | piflow run |")
    print("|---|---|---|")
    for row in ROWS:
        got = found.get(row.id, ("skipped", f"needs runs.{row.needs}"))
        print(f"| {row.id} | {row.expected[:60]} | {got[0]}: {str(got[1])[:90]} |")
    return found


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_section_d_example_has_its_expected_outcome(row: Row, outcomes: dict[str, tuple[str, object]]) -> None:
    if row.id not in outcomes:
        pytest.skip(f"needs runs.{row.needs} (S10d)")
    kind, value = outcomes[row.id]
    if row.expected == "ok":
        assert kind == "ok", value
        if row.result is not None:
            assert value == row.result
    else:
        assert kind == "error", value
        assert row.expected in str(value)
