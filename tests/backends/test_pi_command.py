"""How the pi backend finds and starts the `pi` CLI, and what it says when it cannot (no real pi
needed: stand-in executables play pi and npx)."""

from __future__ import annotations

from pathlib import Path

import pytest
from attempt_control import BudgetControl, attempt_request

from piflow.engine.backends.pi import PI_PACKAGE, PiBackend, PiCommand, find_pi
from piflow.errors import WorkflowError

INSTALL = f"npm install -g {PI_PACKAGE}"


def executable(directory: Path, name: str, script: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    path.chmod(0o755)
    return path


def test_the_configured_command_line_wins(tmp_path: Path) -> None:
    executable(tmp_path / "bin", "pi", "")
    environ = {"PIFLOW_PI_COMMAND": "node '/opt/pi agent/cli.js' --offline", "PATH": str(tmp_path / "bin")}

    assert find_pi(environ) == PiCommand(("node", "/opt/pi agent/cli.js", "--offline"))


def test_pi_on_path_comes_before_npx(tmp_path: Path) -> None:
    pi = executable(tmp_path / "bin", "pi", "")
    executable(tmp_path / "bin", "npx", "")

    assert find_pi({"PATH": str(tmp_path / "bin")}) == PiCommand((str(pi),))


def test_npx_runs_an_installed_pi_package_without_downloading(tmp_path: Path) -> None:
    npx = executable(tmp_path / "bin", "npx", "")

    command = find_pi({"PATH": str(tmp_path / "bin")})

    assert command == PiCommand((str(npx), "--no-install", f"--package={PI_PACKAGE}", "pi"), via_npx=True)


def test_without_pi_or_npx_the_error_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError) as caught:
        find_pi({"PATH": str(tmp_path)})

    assert caught.value.code == "CONFIG_ERROR"
    assert INSTALL in caught.value.message
    assert "PIFLOW_PI_COMMAND" in caught.value.message


async def test_a_command_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    backend = PiBackend(command=[str(tmp_path / "missing" / "pi")], environ={"PATH": ""})

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(), BudgetControl())

    assert caught.value.code == "CONFIG_ERROR"
    assert "No such file or directory" in caught.value.message
    assert INSTALL in caught.value.message


async def test_npx_without_an_installed_pi_is_a_config_error(tmp_path: Path) -> None:
    message = "npm error npx canceled due to missing packages and no YES option"
    executable(tmp_path / "bin", "npx", f"echo '{message}' >&2\nexit 1\n")
    backend = PiBackend(environ={"PATH": str(tmp_path / "bin")})

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(), BudgetControl())

    assert caught.value.code == "CONFIG_ERROR"
    assert message in caught.value.message
    assert INSTALL in caught.value.message


async def test_pi_failing_to_start_is_an_agent_failure_with_its_message(tmp_path: Path) -> None:
    error = 'Error: Model "local/m1" not found. Use --list-models to see available models.'
    pi = executable(tmp_path / "bin", "pi", f"echo '{error}' >&2\nexit 1\n")
    backend = PiBackend(command=[str(pi)], environ={"PATH": ""})

    with pytest.raises(WorkflowError) as caught:
        await backend.run_attempt(attempt_request(), BudgetControl())

    assert (caught.value.code, caught.value.message) == ("AGENT_FAILED", error)


async def test_pi_gets_the_agent_dir_and_the_attempts_arguments(tmp_path: Path) -> None:
    record = tmp_path / "record"
    script = f'echo "$PI_CODING_AGENT_DIR" > {record}\nfor a in "$@"; do echo "$a"; done >> {record}\n'
    pi = executable(tmp_path / "bin", "pi", script)
    backend = PiBackend(command=[str(pi)], agent_dir=tmp_path / "agent", environ={"PATH": ""})
    request = attempt_request(thinking="low", system_append="Role body.")

    with pytest.raises(WorkflowError):
        await backend.run_attempt(request, BudgetControl())

    agent_dir, *args = record.read_text(encoding="utf-8").splitlines()
    assert agent_dir == str(tmp_path / "agent")
    assert args[:8] == ["--mode", "rpc", "--model", "local/m1", "--thinking", "low", "--tools", "read"]
    assert args[8] == "--append-system-prompt"
    assert args[10:13] == ["--name", "demo:writer:attempt-1", "-e"]
