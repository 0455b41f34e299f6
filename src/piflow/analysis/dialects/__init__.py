"""Script dialects: pi-extensible-workflows (the default) and pi-subagents' `workflowScript`.

A document's dialect is, in order: the one the caller forces (`piflow check --dialect`), a
first-line pragma `// piflow: <dialect>`, the project's `[dialects]` globs naming the script's path,
or pi-subagents when the text uses `runs.<method>` and calls none of the workflow primitives;
otherwise pi-extensible-workflows. `piflow check`, the editor and launch all decide here, once per
document version, and pass the name down.
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pathlib import Path

    from piflow.analysis.rules import Dialect
    from piflow.config.project import ProjectConfig

EXTENSIBLE: Final = "pi-extensible-workflows"
SUBAGENTS: Final = "pi-subagents"
_MODULES: Final = {EXTENSIBLE: "extensible", SUBAGENTS: "subagents"}
"""Each dialect's name (its module's `NAME`) and module, imported when a script of that dialect is
first seen: launching a pi-extensible-workflows script never loads pi-subagents' rules."""
DEFAULT: Final = EXTENSIBLE


def dialect(name: str) -> Dialect:
    """The dialect called `name` (one of `dialect_names()`)."""
    found: Dialect = importlib.import_module(f"{__name__}.{_MODULES[name]}").DIALECT
    return found

_PRAGMA: Final = re.compile(rb"\A(?:\xef\xbb\xbf)?[ \t]*//[ \t]*piflow:[ \t]*([A-Za-z-]+)")
_RUNS_USE: Final = re.compile(rb"\bruns\s*\.\s*(?:run|all|lanes|host|steer|status|refs?)\b")
_PRIMITIVE_CALL: Final = re.compile(rb"\b(?:agent|conversation|parallel|pipeline|checkpoint|phase|withWorktree)\s*\(")


def dialect_names() -> tuple[str, ...]:
    return tuple(_MODULES)


def detect_dialect(
    data: bytes, requested: str | None = None, *, path: Path | str | None = None, project: ProjectConfig | None = None
) -> Dialect:
    """The dialect of a script (see the module docstring); an unknown name is a `ValueError`.

    `path` and `project` (the script's file and its project's settings) let `[dialects]` globs decide.
    """
    if requested is not None:
        if requested not in _MODULES:
            raise ValueError(f"unknown dialect {requested!r} (known: {', '.join(_MODULES)})")
        return dialect(requested)
    pragma = _PRAGMA.match(data)
    if pragma is not None and pragma.group(1).decode() in _MODULES:
        return dialect(pragma.group(1).decode())
    by_glob = project.dialect_for(path) if project is not None else None
    if by_glob is not None:
        return dialect(by_glob)
    # (`find` first: the search cannot skip ahead to `runs` past its leading `\b`)
    if data.find(b"runs") >= 0 and _RUNS_USE.search(data) and not _PRIMITIVE_CALL.search(data):
        return dialect(SUBAGENTS)
    return dialect(DEFAULT)
