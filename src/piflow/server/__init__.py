"""The piflow language server (`piflow serve`): pygls, one module per LSP feature (wired in `app`).

Only the command-line entry lives here, so `piflow --help` does not import the server.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(commands: Any) -> None:
    """Add `piflow serve [--stdio | --tcp PORT]` to the command line."""
    parser = commands.add_parser(
        "serve",
        help="run the language server",
        description="Run the piflow language server for VS Code, Neovim, Helix or any LSP client.",
    )
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (the default)")
    transport.add_argument("--tcp", type=int, metavar="PORT", help="listen for one client on a TCP port")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on with --tcp (default 127.0.0.1)")
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from piflow.server.app import serve

    serve(args.tcp, args.host)
    return 0
