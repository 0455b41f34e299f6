"""Resident memory of an idle `piflow serve` (DESIGN section 11: <= 80 MB with 20 open scripts).

A real server over stdio (the client and script generator of `bench/lsp.py`). Prints VmRSS after
`initialize` with no document, after opening 1 and then 20 scripts of 300 lines (each waited for
until its diagnostics are published and the server has gone idle), the cost of one more open
document, after closing them all (what a closed document leaves behind: the allocator keeps most
freed pages) and after reopening them (whether closing really freed them: reopening reuses them).

Usage: `.venv/bin/python bench/memory.py [--lines 300] [--documents 20]`
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp import BARS, _generator, open_script, start  # a sibling script, not a package

IDLE_SECONDS = 3.0
"""Long enough for the opens' compiles to end and the server to trim its heap on a loaded machine."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--documents", type=int, default=20)
    args = parser.parse_args()
    text = _generator()(args.lines)
    with tempfile.TemporaryDirectory(prefix="piflow-memory-") as temp:
        root = Path(temp)
        server = start(root)
        try:
            uris = [(root / "project" / f"open-{n}.workflow.js").as_uri() for n in range(args.documents)]
            server.drain(IDLE_SECONDS)
            empty = server.rss_mb()
            print(f"idle, no document:                {empty:6.1f} MB")
            open_script(server, uris[0], text)
            server.drain(IDLE_SECONDS)
            one = server.rss_mb()
            print(f"idle, 1 open script:              {one:6.1f} MB")
            for uri in uris[1:]:
                open_script(server, uri, text)
            server.drain(IDLE_SECONDS)
            full = server.rss_mb()
            verdict = "OVER" if full > BARS["rss_mb"] else "ok"
            print(f"idle, {args.documents} open scripts of {args.lines} lines: {full:6.1f} MB "
                  f"(bar {BARS['rss_mb']:.0f} MB: {verdict})")
            if args.documents > 1:
                print(f"each further open script:         {(full - one) / (args.documents - 1) * 1024:6.0f} kB")
            for uri in uris:
                server.send({"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
            server.drain(IDLE_SECONDS)
            print(f"idle, all closed again:           {server.rss_mb():6.1f} MB")
            for uri in uris:  # what closing freed is reused: reopening should not grow much
                open_script(server, uri, text)
            server.drain(IDLE_SECONDS)
            print(f"idle, {args.documents} reopened:                {server.rss_mb():6.1f} MB")
        finally:
            server.close()
    return 1 if full > BARS["rss_mb"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
