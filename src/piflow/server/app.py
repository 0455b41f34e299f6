"""`piflow serve`: the language server, wired from its features (each lives in its own module)."""

from __future__ import annotations

import logging
import sys
from typing import Final

from piflow.server.base import PiflowServer
from piflow.server.code_actions import CodeActions
from piflow.server.commands import Commands
from piflow.server.completion import Completion
from piflow.server.definition import Definition
from piflow.server.diagnostics import Diagnostics
from piflow.server.documents import DocumentTable
from piflow.server.hover import Hover
from piflow.server.inlay_hints import InlayHints
from piflow.server.lenses import Lenses
from piflow.server.outcomes import Outcomes
from piflow.server.progress import RunNotifications
from piflow.server.projects import Projects
from piflow.server.runs import Runs
from piflow.server.symbols import Symbols
from piflow.server.workspace_problems import WorkspaceProblems

GIL_SWITCH_SECONDS: Final = 0.001


def create_server() -> PiflowServer:
    """A server with every feature added; services first, so later features may look them up."""
    server = PiflowServer()
    for feature in (
        DocumentTable(server),
        Projects(server),
        Runs(server),
        Outcomes(server),
        Diagnostics(server),
        WorkspaceProblems(server),
        Hover(server),
        Completion(server),
        Definition(server),
        Symbols(server),
        CodeActions(server),
        InlayHints(server),
        Lenses(server),
        Commands(server),
        RunNotifications(server),
    ):
        server.add_feature(feature)
    return server


def serve(tcp_port: int | None = None, host: str = "127.0.0.1") -> None:
    """Run until the client exits: on stdio (the default) or on a TCP port."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="piflow: %(levelname)s %(name)s: %(message)s")
    # Threads take turns on the GIL every millisecond instead of every 5: a background burst (a
    # progress payload, a catch-up read of a big run's events) then holds up typing's next step
    # (the loop, the analysis thread) by at most that.
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    server = create_server()
    if tcp_port is None:
        server.start_io()
    else:
        server.start_tcp(host, tcp_port)
