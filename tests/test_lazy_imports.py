"""Fast start: a piflow process imports only what its command runs (issue 15).

Each check runs in a fresh interpreter, since what a process has imported is the behaviour tested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from piflow.cli import COMMANDS, build_parser
from piflow.engine.store import RunStore, default_store_path
from piflow.engine.worker.client import WorkerProcess
from piflow.engine.worker.protocol import WorkerCall

MIB = 1024 * 1024


def run_python(code: str, cwd: Path | None = None) -> str:
    environment = None
    if cwd is not None:  # a project of the test's own: its run store and user config too
        home = str(cwd)
        environment = {**os.environ, "HOME": home, "XDG_STATE_HOME": f"{home}/state", "XDG_CONFIG_HOME": home}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd, env=environment, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def loaded(code: str, modules: list[str], cwd: Path | None = None) -> list[str]:
    """The `modules` loaded after running `code` in a fresh interpreter."""
    probe = f"{textwrap.dedent(code)}\nimport sys\nprint('loaded:', *(m for m in {modules!r} if m in sys.modules))"
    return run_python(probe, cwd).splitlines()[-1].split()[1:]


def test_analyze_and_preflight_stay_functions_when_their_modules_are_imported_first() -> None:
    out = run_python("""
        import piflow.analysis.analyze, piflow.analysis.preflight
        import types
        from piflow.analysis import analyze, preflight
        from piflow import analyze as top_analyze, preflight as top_preflight
        import piflow.analysis
        assert isinstance(analyze, types.FunctionType) and analyze.__module__ == "piflow.analysis.analyze"
        assert isinstance(preflight, types.FunctionType) and preflight.__module__ == "piflow.analysis.preflight"
        assert top_analyze is analyze and top_preflight is preflight
        assert piflow.analysis.analyze is analyze and piflow.analysis.preflight is preflight
        print(len(analyze("await agent('x', {label: 'a'});", piflow.analysis.Capabilities.from_json(
            {"models": [], "tools": [], "agentTypes": []}))))
    """)
    assert out.isdigit()


def test_every_public_name_is_the_object_of_its_defining_module() -> None:
    out = run_python("""
        import importlib, piflow, piflow.analysis
        for package in (piflow, piflow.analysis):
            for name in package.__all__:
                value = getattr(package, name)
                exported = package._exports.get(name)
                assert exported is not None or name == "__version__", name
                if exported is not None:
                    assert value is getattr(importlib.import_module(exported), name), name
            assert set(package._exports) <= set(package.__all__), package
            assert set(package.__all__) <= set(dir(package)), package
        try:
            piflow.no_such_name
        except AttributeError as error:
            print(error)
    """)
    assert out == "module 'piflow' has no attribute 'no_such_name'"


WORKER_IMPORTS = "import piflow.engine.worker.__main__, piflow.engine.worker.runtime"
"""What a worker process imports (the runtime once its stdin is being read)."""


def test_the_worker_imports_neither_config_nor_the_dialects_nor_pydantic() -> None:
    heavy = ["piflow.config", "piflow.analysis.dialects", "piflow.analysis.analyze", "pydantic", "jsonschema", "anyio",
             "tree_sitter", "piflow.engine.worker.instrument"]  # the host instruments the script
    assert loaded(WORKER_IMPORTS, heavy) == []


def test_the_worker_creates_no_dataclasses_and_formats_no_tracebacks_until_it_fails() -> None:
    """`dataclasses` (with `inspect`, `ast`, `dis`) and `traceback` cost every worker's start ~10 ms."""
    assert loaded(WORKER_IMPORTS, ["dataclasses", "inspect", "traceback"]) == []


def test_the_worker_loads_only_dukpys_extension_and_reads_no_package_metadata() -> None:
    heavy = ["dukpy", "dukpy.install", "urllib.request", "http.client", "importlib.metadata"]
    assert loaded(WORKER_IMPORTS, heavy) == []


def test_the_cheap_dukpy_version_check_agrees_with_the_package_metadata() -> None:
    out = run_python("""
        from importlib.metadata import version
        from piflow.engine.worker.runtime import _installed_dukpy_is
        print(_installed_dukpy_is(version("dukpy")), _installed_dukpy_is("0.0.0"))
    """)
    assert out == "True False"


async def test_the_worker_still_lifts_the_quickjs_heap_limit_above_dukpys_128_mib() -> None:
    """A big fan-out needs more than dukpy's fixed heap: the limit is set once the version is known."""
    worker = WorkerProcess(heap_limit=512 * MIB)
    await worker.start(body="const hoard = []; for (let i = 0; i < 160; i++) hoard.push('x'.repeat(1e6) + i);"
                       " return hoard.length;")

    def no_calls(call: WorkerCall) -> None:
        raise AssertionError(f"unexpected host call {call.op}")

    assert await worker.serve(no_calls) == 160


def test_check_imports_neither_the_engine_nor_the_server(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['check', 'one.workflow.js']) == 0"
    assert loaded(code, ["piflow.engine.engine", "piflow.engine.store", "anyio", "piflow.server.app",
                         "traceback"], tmp_path) == []  # (only a crash report formats one)


def test_check_without_piflow_toml_or_roles_imports_neither_pydantic_nor_yaml(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['check', 'one.workflow.js']) == 0"
    heavy = ["pydantic", "piflow.config.piflow_toml", "ruamel.yaml", "jsonschema"]
    assert loaded(code, heavy, tmp_path) == []


def test_check_without_the_compile_does_not_import_dukpy(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['check', '--no-compile', 'one.workflow.js']) == 0"
    assert loaded(code, ["dukpy", "urllib.request"], tmp_path) == []


def test_a_piflow_toml_is_still_validated_with_the_line_of_the_bad_key(tmp_path: Path) -> None:
    (tmp_path / "piflow.toml").write_text('[piflow]\nbackend = "scripted"\ncolour = "blue"\n', encoding="utf-8")
    (tmp_path / "one.workflow.js").write_text("await agent('hello', {label: 'a'});\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "piflow", "check", "one.workflow.js"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 2
    assert f"{tmp_path / 'piflow.toml'}:3: unknown key piflow.colour" in done.stderr


def test_running_a_script_whose_agents_have_no_output_schema_does_not_import_jsonschema(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("return await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['run', 'one.workflow.js', '--json']) == 0"
    assert loaded(code, ["jsonschema", "pydantic", "piflow.cli_check", "piflow.server.app"], tmp_path) == []


def test_running_a_workflow_script_loads_nothing_of_pi_subagents_or_the_pi_backend(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("return await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['run', 'one.workflow.js', '--json']) == 0"
    other = ["piflow.analysis.dialects.subagents", "piflow.config.agent_definitions", "piflow.engine.subagents.views",
             "piflow.config.pi_tools", "piflow.engine.backends.pi", "piflow.engine.worker.subagents_protocol"]
    assert loaded(code, other, tmp_path) == []


def test_a_launchs_exact_syntax_check_loads_quickjs_without_the_dukpy_package(tmp_path: Path) -> None:
    """dukpy's package imports its npm installer (urllib, http.client): a launch compiles natively with
    the bare extension (`piflow.native`)."""
    (tmp_path / "one.workflow.js").write_text("return await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['run', 'one.workflow.js', '--json']) == 0"
    probe = ["piflow.analysis.engine_check", "dukpy", "urllib.request", "http.client"]
    assert loaded(code, probe, tmp_path) == ["piflow.analysis.engine_check"]


def test_a_run_without_installed_extensions_reads_no_package_metadata(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("return await agent('hello', {label: 'a'});\n", encoding="utf-8")
    code = "from piflow.cli import main\nassert main(['run', 'one.workflow.js', '--json']) == 0"
    assert loaded(code, ["importlib.metadata", "zipfile"], tmp_path) == []


def test_an_unchanged_cold_resume_neither_analyses_the_script_nor_loads_quickjs(tmp_path: Path) -> None:
    """The launch's F.3 verdict stands for an unchanged resume: no preflight, dialects or dukpy in the host."""
    (tmp_path / "ship.workflow.js").write_text(
        "const a = await agent('build', {label: 'a'});\n"
        "await checkpoint({name: 'ship', prompt: 'Ship?', context: null});\nreturn a;\n", encoding="utf-8")
    home = str(tmp_path)
    environment = {**os.environ, "HOME": home, "XDG_STATE_HOME": f"{home}/state", "XDG_CONFIG_HOME": home}
    owner = subprocess.Popen([sys.executable, "-m", "piflow", "run", "ship.workflow.js"], cwd=tmp_path,
                             env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert owner.stdout is not None
        run_id = owner.stdout.readline().strip()
        with RunStore.open(default_store_path(tmp_path, environment)) as store:
            deadline = time.monotonic() + 60
            while not store.awaiting_checkpoints(run_id):
                assert time.monotonic() < deadline and owner.poll() is None
                time.sleep(0.05)
    finally:
        owner.send_signal(signal.SIGKILL)  # the owner dies at the checkpoint: the run is interrupted
        owner.wait()
    code = f"from piflow.cli import main\nassert main(['resume', {run_id!r}, '--answer', 'ship=approve']) == 0"
    heavy = ["piflow.analysis.preflight", "piflow.analysis.dialects", "piflow.analysis.document", "dukpy",
             "importlib.metadata",
             # nor what only other commands, backends or dialects read (issue 15: a resume's start-up)
             "piflow.analysis.script_file", "piflow.analysis.launch", "piflow.config.agent_definitions",
             "piflow.config.pi_tools", "piflow.engine.subagents.views", "piflow.engine.worker.subagents_protocol",
             "piflow.cli_check", "pydantic",
             # the launch snapshot's instrumented source is handed to the worker as it is
             "tree_sitter", "piflow.engine.worker.instrument",
             # every agent replays: no agent runner, and no backend is made (the openai and pi
             # backends take 55-65 ms to import)
             "piflow.engine.agents", "piflow.engine.children", "piflow.engine.backends.base",
             "piflow.engine.backends.scripted",
             "piflow.engine.backends.openai", "piflow.engine.backends.pi",
             # a resume makes no run id: its lease token needs no `uuid` (which loads `platform`)
             "uuid", "platform",
             # nor does it show an agent's details (only `piflow show` and an editor's Show Agent do), and
             # without an installed extension no extension's functions, variables or tools are made
             "piflow.engine.agent_details", "piflow.engine.extension_parts"]
    assert loaded(code, heavy, tmp_path) == []


def test_run_commands_share_usage_errors_without_importing_check() -> None:
    assert loaded("import piflow.cli_runs, piflow.cli_owning", ["piflow.cli_check"]) == []


def test_a_dialect_module_loads_only_for_a_script_of_its_dialect() -> None:
    """A pi-extensible-workflows launch never loads pi-subagents' rules and agent definitions; each
    dialect's module is registered under its own `NAME`."""
    code = """
        from piflow.analysis.dialects import detect_dialect
        print(detect_dialect(b"await agent('x');").name)
    """
    assert loaded(code, ["piflow.analysis.dialects.subagents", "piflow.config.agent_definitions"]) == []
    out = run_python("""
        import importlib
        from piflow.analysis.dialects import _MODULES, dialect
        for name, module in _MODULES.items():
            assert importlib.import_module(f"piflow.analysis.dialects.{module}").NAME == name == dialect(name).name
        print(len(_MODULES))
    """)
    assert out == "2"


def test_run_and_resume_parse_their_arguments_without_the_engine_or_the_analysis() -> None:
    """What `piflow run`/`resume` import before they spawn the run's worker (`cli_owner`)."""
    heavy = ["piflow.engine.engine", "piflow.engine.runs", "piflow.engine.views", "piflow.cli_owning",
             "piflow.cli_runs", "piflow.analysis.launch", "piflow.analysis.dialects", "piflow.config.availability",
             "dukpy",
             # pi's settings and `uuid` (which loads `platform`) come after the spawn
             "piflow.config.settings", "uuid"]
    code = "from piflow.cli import build_parser\nbuild_parser(['run', 'x.workflow.js'])\nbuild_parser(['resume', 'x'])"
    assert loaded(code, heavy) == []


def test_run_commands_do_not_import_the_language_server() -> None:
    code = "from piflow.cli import main\nassert main(['runs', '--help']) == 0"
    assert loaded(code, ["piflow.server.app", "pygls", "lsprotocol"]) == []


EXECUTION = ["asyncio", "anyio", "piflow.engine.engine", "piflow.engine.runs", "piflow.engine.worker.client",
             "piflow.analysis.analyze", "piflow.analysis.capabilities", "pydantic", "piflow.cli_follow",
             "piflow.cli_owner"]
"""What runs a workflow or analyses a script: a command that only reads or controls runs loads none of it."""


def test_version_answers_without_loading_any_command() -> None:
    code = "from piflow.cli import main\nassert main(['--version']) == 0"
    assert loaded(code, [*EXECUTION, "piflow.cli_runs", "piflow.cli_check", "piflow.engine.store"]) == []


def test_reading_and_controlling_a_run_loads_neither_the_engine_nor_anyio_nor_the_analysis(tmp_path: Path) -> None:
    (tmp_path / "one.workflow.js").write_text("return await agent('hello', {label: 'a'});\n", encoding="utf-8")
    out = run_python("from piflow.cli import main\nassert main(['run', 'one.workflow.js', '--json']) == 0", tmp_path)
    run_id = json.loads(out.splitlines()[-1])["runId"]
    for argv, code in ((["runs"], 0), (["runs", "--json"], 0), (["show", run_id], 0), (["show", run_id, "--json"], 0),
                       (["stop", run_id], 0), (["approve", run_id, "ship"], 1), (["reject", run_id, "ship"], 1)):
        command = f"from piflow.cli import main\nassert main({argv!r}) == {code}"
        assert loaded(command, EXECUTION, tmp_path) == [], argv


def test_the_command_table_names_every_command_in_help_order() -> None:
    parser = build_parser([])  # no command: every module registers its commands
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    assert list(commands.choices) == list(COMMANDS)  # type: ignore[arg-type]


def test_a_run_owner_imports_the_engine_without_collections_and_then_freezes_what_start_up_made(
    tmp_path: Path,
) -> None:
    (tmp_path / "one.workflow.js").write_text("return await agent('hello', {label: 'a'});\n", encoding="utf-8")
    out = run_python("""
        import gc
        from piflow.cli import main
        assert main(['run', 'one.workflow.js', '--json']) == 0
        print(gc.isenabled(), gc.get_freeze_count() > 20_000)
    """, tmp_path)
    assert out.splitlines()[-1] == "True True"


def test_the_garbage_collector_is_back_on_once_the_commands_are_imported() -> None:
    out = run_python("""
        import gc
        from piflow.cli import build_parser
        build_parser(["run"])
        was_on = gc.isenabled()
        gc.disable()
        build_parser([])  # a caller's choice to run without it stands
        print(was_on, gc.isenabled())
    """)
    assert out == "True False"
