"""The `piflow` command: an argparse front end whose subcommands live in their own modules.

Each subcommand module exposes `register(commands)`, adding its parser(s) to argparse's
subcommands and setting `handler=<function(args) -> exit code>`. To add commands, append the
module's `register` to `REGISTRARS` (e.g. `piflow.cli_runs.register` for run/resume/runs/...).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from piflow import __version__, cli_check, cli_doctor, cli_runs, server
from piflow.errors import WorkflowError

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run `piflow` with `argv` (default: the process arguments); return the exit code."""
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
    return result


if __name__ == "__main__":
    sys.exit(main())
