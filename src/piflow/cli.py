"""The `piflow` command: an argparse front end whose subcommands live in their own modules.

Each subcommand module exposes `register(commands)`, adding its parser(s) to argparse's
subcommands and setting `handler=<function(args) -> exit code>`. To add a command, name its module
in `COMMANDS`. Only the module of the command being run is imported (`piflow check` never loads
the engine, `piflow run` never loads the server, `piflow --version` none); help and usage errors
load them all.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from piflow import __version__
from piflow.cli_errors import UsageError
from piflow.collector import collector_paused
from piflow.errors import WorkflowError

EXIT_BROKEN_PIPE: Final = 128 + signal.SIGPIPE
EXIT_INTERRUPTED: Final = 128 + signal.SIGINT
EXIT_BUG: Final = 70
"""`EX_SOFTWARE`: piflow itself failed."""

Registrar = Callable[[Any], None]

# The interpreter's last garbage collections cost every command 25-60 ms and free nothing the
# exiting process needs back; objects are still released (files, the store) by reference counting.
atexit.register(gc.freeze)

COMMANDS: Final[dict[str, str]] = {
    "check": "piflow.cli_check",
    **dict.fromkeys(("run", "resume", "budget"), "piflow.cli_owner"),  # light: the worker spawns before the engine
    **dict.fromkeys(("runs", "show", "pause", "stop", "approve", "reject"), "piflow.cli_runs"),  # no anyio, no engine
    **dict.fromkeys(("delete", "gc"), "piflow.cli_gc"),
    "doctor": "piflow.cli_doctor",
    "worker": "piflow.cli_worker",
    "serve": "piflow.server",
}
"""Each command and the module that registers it, in the order `piflow --help` lists them."""


def registrars(argv: Sequence[str]) -> list[Registrar]:
    """The `register` functions `argv` needs: its command's module alone, none, or every module.

    The top-level options take no value, so the first argument that is not an option is the
    command; `--version` without one needs no command (and answers before the engine or the
    analysis would load); without a known one (help, a typo) every command is registered, to be listed.
    """
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        return []
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(module).register for module in modules]


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="piflow", description="Language server and durable engine for agent workflow scripts."
    )
    parser.add_argument("--version", action="version", version=f"piflow {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    with collector_paused():
        for register in registrars(argv):
            register(commands)
    return parser


def reap_own_children() -> None:
    """Undo an inherited `SIGCHLD` = ignore, under which the kernel reaps our children itself.

    A parent may leave SIGCHLD ignored, and that survives `exec`; then every worker and pi process
    piflow starts is reaped before asyncio can wait for it ("Unknown child process pid …, will
    report returncode 255"), and a worker's real exit code is lost. Only the main thread may do this.
    """
    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `piflow` with `argv` (default: the process arguments); return the exit code."""
    reap_own_children()
    try:
        result = _dispatch(argv)
        sys.stdout.flush()  # inside the try: a reader that went away (`| head`) is not an error
    except BrokenPipeError:
        from piflow.cli_runs import silence_stdout

        silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C outside a run's owner (which ends its runs cleanly itself)
        print("\npiflow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        report_bug(exc)
        return EXIT_BUG
    return result


def report_bug(exc: BaseException) -> None:
    """A bug of piflow's: one line for the user, the traceback in a file they can attach to a report."""
    import traceback  # ~3 ms: only a crash pays for it (`piflow check` loads nothing else that needs it)

    from piflow.config.paths import state_dir  # `piflow.config` loads pydantic: only a crash pays for it here

    where = state_dir() / "crashes" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    text = f"piflow {__version__}, Python {sys.version.split()[0]}, argv {sys.argv!r}\n" + "".join(
        traceback.format_exception(exc)
    )
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(text, encoding="utf-8", errors="backslashreplace")
        kept = f"the details are in {where}; please report it to the piflow maintainers with that file"
    except OSError as error:
        kept = f"the details could not be saved ({error.strerror}); please report it to the piflow maintainers"
    summary = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    print(f"piflow: internal error, a bug in piflow ({summary}); {kept} and the command you ran.", file=sys.stderr)


def _single(exc: BaseException) -> BaseException:
    """The one error inside nested exception groups (task groups wrap what their tasks raise)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _is_error(error: BaseException, module: str, name: str) -> bool:
    """Whether `error` is a `module.name`, without importing `module`: unloaded, it raised nothing."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(error, getattr(loaded, name))


def _dispatch(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:  # argparse exits 2 on usage errors, 0 for --help/--version
        return int(exit_.code or 0)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv = arguments
    try:
        result: int = handler(args)
    except (Exception, BaseExceptionGroup) as raised:  # a group may hold a KeyboardInterrupt
        error = _single(raised)
        if _is_error(error, "piflow.engine.store", "StoreError"):
            from piflow.cli_runs import store_failure_text

            print(store_failure_text(error, getattr(args, "owned", None)), file=sys.stderr)  # type: ignore[arg-type]
            return 1
        if isinstance(error, WorkflowError):
            print(f"piflow: {error.code}: {error.message}", file=sys.stderr)
            return 2
        if isinstance(error, UsageError):
            print(f"piflow {args.command}: {error}", file=sys.stderr)
            return 2
        if error is raised:
            raise
        raise error from None
    return result


if __name__ == "__main__":
    sys.exit(main())
