"""Reading a workflow script from disk: the one reader `piflow check`, `piflow run` and the server share.

A script is read like any user file (`piflow.config.files`: regular files only, at most
`SCRIPT_LIMIT`), and bytes that are not UTF-8 are an INVALID_SYNTAX finding at the first one,
so `check` reports what `run` refuses, with the same words and position.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from piflow.analysis.findings import Finding
from piflow.analysis.positions import Position, Range
from piflow.config.files import SCRIPT_LIMIT, FileRefused, InvalidUtf8, decode_utf8, read_bytes
from piflow.errors import WorkflowError

__all__ = ["ScriptFile", "read_script_file", "unreadable_script"]


@dataclass(frozen=True, slots=True)
class ScriptFile:
    """A script's bytes and text; `text` has U+FFFD for invalid bytes so analysis still sees it all."""

    path: str
    data: bytes
    text: str
    encoding_error: InvalidUtf8 | None

    def findings(self) -> list[Finding]:
        """The encoding finding, when the file is not UTF-8 (analysis of `text` adds the rest)."""
        error = self.encoding_error
        if error is None:
            return []
        start = Position(error.line - 1, error.column - 1)
        end = Position(error.line - 1, error.column)
        where = Range(start, end, error.offset, error.offset + 1)
        return [Finding("INVALID_SYNTAX", error.description, "error", where)]

    def launch_text(self) -> str:
        """The text a run may execute: a script that is not UTF-8 never runs."""
        if self.encoding_error is not None:
            raise WorkflowError("INVALID_SYNTAX", str(self.encoding_error))
        return self.text


def read_script_file(path: str | os.PathLike[str]) -> ScriptFile:
    """Read a script; `OSError` and `FileRefused` propagate (word them with `unreadable_script`)."""
    name = os.fspath(path)
    data = read_bytes(name, SCRIPT_LIMIT)
    try:
        return ScriptFile(name, data, decode_utf8(data, name), None)
    except InvalidUtf8 as error:
        return ScriptFile(name, data, data.decode("utf-8", errors="replace"), error)


def unreadable_script(path: str, error: OSError | FileRefused) -> str:
    """What to tell the user about a script that cannot be read."""
    if isinstance(error, FileRefused):
        return f"{error}; give a workflow script"
    if isinstance(error, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(error, IsADirectoryError):
        return f"{path} is a directory; give a workflow script"
    return f"cannot read {path}: {error.strerror or error}"
