"""The `piflow` command: an argparse front end whose subcommands live in their own modules.

Each subcommand module exposes `register(commands)`, adding its parser(s) to argparse's
subcommands and setting `handler=<function(args) -> exit code>`. To add commands, append the
module's `register` to `REGISTRARS` (e.g. `piflow.cli_runs.register` for run/resume/runs/...).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Final

from piflow import __version__, cli_check, cli_doctor, cli_runs, server
from piflow.cli_check import UsageError
from piflow.config.paths import state_dir
from piflow.engine.store import StoreError
from piflow.errors import WorkflowError

EXIT_BROKEN_PIPE: Final = 128 + signal.SIGPIPE
EXIT_INTERRUPTED: Final = 128 + signal.SIGINT
EXIT_BUG: Final = 70
"""`EX_SOFTWARE`: piflow itself failed."""

Registrar = Callable[[Any], None]

REGISTRARS: Final[list[Registrar]] = [cli_check.register, cli_runs.register, cli_doctor.register, server.register]


def build_parser(registrars: Sequence[Registrar] = REGISTRARS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="piflow", description="Language server and durable engine for agent workflow scripts."
    )
    parser.add_argument("--version", action="version", version=f"piflow {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in registrars:
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
        cli_runs.silence_stdout()
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


def _dispatch(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on usage errors, 0 for --help/--version
        return int(exit_.code or 0)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        result: int = handler(args)
    except (WorkflowError, UsageError, BaseExceptionGroup) as raised:
        error = _single(raised)
        if isinstance(error, StoreError):
            print(cli_runs.store_failure_text(error, getattr(args, "owned", None)), file=sys.stderr)
            return 1
        if isinstance(error, WorkflowError):
            print(f"piflow: {error.code}: {error.message}", file=sys.stderr)
            return 2
        if isinstance(error, UsageError):
            print(f"piflow {args.command}: {error}", file=sys.stderr)
            return 2
        raise error from None
    return result


if __name__ == "__main__":
    sys.exit(main())
