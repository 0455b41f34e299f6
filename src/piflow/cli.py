"""The `piflow` command: an argparse front end whose subcommands live in their own modules.

Each subcommand module exposes `register(commands)`, adding its parser(s) to argparse's
subcommands and setting `handler=<function(args) -> exit code>`. To add commands, append the
module's `register` to `REGISTRARS` (e.g. `piflow.cli_runs.register` for run/resume/runs/...).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from piflow import __version__, cli_check, cli_doctor, cli_runs, server
from piflow.cli_check import UsageError
from piflow.errors import WorkflowError

EXIT_BROKEN_PIPE: Final = 128 + signal.SIGPIPE

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
    return result


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
    except WorkflowError as error:
        print(f"piflow: {error.code}: {error.message}", file=sys.stderr)
        return 2
    except UsageError as error:
        print(f"piflow {args.command}: {error}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
