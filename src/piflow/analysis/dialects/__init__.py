"""Script dialects: pi-extensible-workflows (the default) and pi-subagents' `workflowScript`.

A document's dialect is, in order: the one the caller forces (`piflow check --dialect`), a
first-line pragma `// piflow: <dialect>`, the project's `[dialects]` globs naming the script's path,
or pi-subagents when the text uses `runs.<method>` and calls none of the workflow primitives;
otherwise pi-extensible-workflows. `piflow check`, the editor and launch all decide here, once per
document version, and pass the name down.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from piflow.analysis.dialects import extensible, subagents
from piflow.analysis.rules import Dialect

if TYPE_CHECKING:
    from pathlib import Path

    from piflow.config.project import ProjectConfig

DIALECTS: Final[dict[str, Dialect]] = {extensible.NAME: extensible.DIALECT, subagents.NAME: subagents.DIALECT}
DEFAULT: Final = extensible.NAME

_PRAGMA: Final = re.compile(rb"\A(?:\xef\xbb\xbf)?[ \t]*//[ \t]*piflow:[ \t]*([A-Za-z-]+)")
_RUNS_USE: Final = re.compile(rb"\bruns\s*\.\s*(?:run|all|lanes|host|steer|status|refs?)\b")
_PRIMITIVE_CALL: Final = re.compile(rb"\b(?:agent|conversation|parallel|pipeline|checkpoint|phase|withWorktree)\s*\(")


def dialect_names() -> tuple[str, ...]:
    return tuple(DIALECTS)


def detect_dialect(
    data: bytes, requested: str | None = None, *, path: Path | str | None = None, project: ProjectConfig | None = None
) -> Dialect:
    """The dialect of a script (see the module docstring); an unknown name is a `ValueError`.

    `path` and `project` (the script's file and its project's settings) let `[dialects]` globs decide.
    """
    if requested is not None:
        if requested not in DIALECTS:
            raise ValueError(f"unknown dialect {requested!r} (known: {', '.join(DIALECTS)})")
        return DIALECTS[requested]
    pragma = _PRAGMA.match(data)
    if pragma is not None and pragma.group(1).decode() in DIALECTS:
        return DIALECTS[pragma.group(1).decode()]
    by_glob = project.dialect_for(path) if project is not None else None
    if by_glob is not None:
        return DIALECTS[by_glob]
    # (`find` first: the search cannot skip ahead to `runs` past its leading `\b`)
    if data.find(b"runs") >= 0 and _RUNS_USE.search(data) and not _PRIMITIVE_CALL.search(data):
        return DIALECTS[subagents.NAME]
    return DIALECTS[DEFAULT]
