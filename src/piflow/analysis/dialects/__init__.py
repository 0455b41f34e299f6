"""Script dialects: pi-extensible-workflows (the default) and pi-subagents' `workflowScript`.

A document's dialect is, in order: the one the caller names (the server maps globs to dialects),
a first-line pragma `// piflow: <dialect>`, or pi-subagents when the text uses `runs.<method>`
and calls none of the workflow primitives; otherwise pi-extensible-workflows.
"""

from __future__ import annotations

import re
from typing import Final

from piflow.analysis.dialects import extensible, subagents
from piflow.analysis.rules import Dialect

DIALECTS: Final[dict[str, Dialect]] = {extensible.NAME: extensible.DIALECT, subagents.NAME: subagents.DIALECT}
DEFAULT: Final = extensible.NAME

_PRAGMA: Final = re.compile(rb"\A(?:\xef\xbb\xbf)?[ \t]*//[ \t]*piflow:[ \t]*([A-Za-z-]+)")
_RUNS_USE: Final = re.compile(rb"\bruns\s*\.\s*(?:run|all|lanes|host|steer|status|refs?)\b")
_PRIMITIVE_CALL: Final = re.compile(rb"\b(?:agent|conversation|parallel|pipeline|checkpoint|phase|withWorktree)\s*\(")


def dialect_names() -> tuple[str, ...]:
    return tuple(DIALECTS)


def detect_dialect(data: bytes, requested: str | None = None) -> Dialect:
    """The dialect of a script (see the module docstring); an unknown name is a `ValueError`."""
    if requested is not None:
        if requested not in DIALECTS:
            raise ValueError(f"unknown dialect {requested!r} (known: {', '.join(DIALECTS)})")
        return DIALECTS[requested]
    pragma = _PRAGMA.match(data)
    if pragma is not None and pragma.group(1).decode() in DIALECTS:
        return DIALECTS[pragma.group(1).decode()]
    # (`find` first: the search cannot skip ahead to `runs` past its leading `\b`)
    if data.find(b"runs") >= 0 and _RUNS_USE.search(data) and not _PRIMITIVE_CALL.search(data):
        return DIALECTS[subagents.NAME]
    return DIALECTS[DEFAULT]
