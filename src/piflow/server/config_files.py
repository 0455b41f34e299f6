"""Findings for the files a workflow depends on: settings.json, role files, models.json, piflow.toml.

The checks are the config loaders' own (same codes and messages as a launch reports); this module
only finds where in the file each error is. Role files are checked as typed (`parse_role_markdown`
takes text). `settings.json`, `models.json` and `piflow.toml` are loaded the way a launch loads
them, from disk, so they are checked when opened and on every save; syntax errors show as typed.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from piflow.analysis.findings import Finding
from piflow.analysis.positions import TextIndex
from piflow.config import load_settings, parse_role_markdown
from piflow.config.json_text import JsonDocument, JsonSyntaxError, parse_json_document
from piflow.config.paths import user_config_path
from piflow.config.project import read_piflow_file
from piflow.config.registry import load_model_registry
from piflow.errors import WorkflowError

Locator = Callable[[re.Match[str]], tuple[tuple[str | int, ...], bool]]
"""A message's JSON path, and whether the error is about the key (else its value)."""

_SETTINGS_LOCATORS: Final[tuple[tuple[re.Pattern[str], Locator], ...]] = (
    (re.compile(r"^Unknown workflow setting at .*: (?P<key>.+)$"), lambda m: ((m["key"],), True)),
    (re.compile(r"\.concurrency must be"), lambda m: (("concurrency",), False)),
    (re.compile(r"^modelAliases must be an object"), lambda m: (("modelAliases",), False)),
    (
        re.compile(r"^Invalid model alias name: (?P<name>.*) \(settings: "),
        lambda m: (("modelAliases", m["name"]), True),
    ),
    (
        re.compile(r"^Invalid model alias target for (?P<name>[A-Za-z][A-Za-z0-9_-]*)"),
        lambda m: (("modelAliases", m["name"]), False),
    ),
    (re.compile(r"\.disabledAgentResources(?P<rest>(?:\.[A-Za-z]+|\[\d+\])*)"), lambda m: _resource_path(m["rest"])),
)

_ROLE_KEYS: Final = (
    ("Role model", "model"),
    ("Invalid role thinking level", "thinking"),
    ("Role description", "description"),
    ("Role tools", "tools"),
    (".disabledAgentResources", "disabledAgentResources"),
)
_YAML_LINE: Final = re.compile(r" at line (\d+), column (\d+)")
_FILE_LINE: Final = re.compile(r"^.*?:(\d+): ")
_FILE_LINE_COLUMN: Final = re.compile(r"^.*?:(\d+):(\d+): ")


def _resource_path(rest: str) -> tuple[tuple[str | int, ...], bool]:
    path: list[str | int] = ["disabledAgentResources"]
    for part in re.findall(r"\.([A-Za-z]+)|\[(\d+)\]", rest):
        path.append(part[0] if part[0] else int(part[1]))
    return tuple(path), len(path) == 2 and "is not supported" in rest


def _finding(index: TextIndex, error: WorkflowError, start: int, end: int) -> Finding:
    return Finding(error.code, error.message, "error", index.range(start, max(start, end)))


def _line_span(index: TextIndex, line: int) -> tuple[int, int]:
    """Byte span of a 0-based line's content (an out-of-range line is the last one)."""
    line = min(max(line, 0), index.line_count - 1)
    return index.line_start_byte(line), index.offset_at(line, 1 << 30)


def _token_end(text: str, start: int) -> int:
    """End (UTF-16 index) of the JSON token starting at `start`: a whole string, or up to a delimiter."""
    if start < len(text) and text[start] == '"':
        escaped = False
        for position in range(start + 1, len(text)):
            char = text[position]
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                return position + 1
        return len(text)
    if start < len(text) and text[start] in "{[":
        return start + 1
    match = re.compile(r"[,}\]\s]").search(text, start)
    return match.start() if match else len(text)


def _json_syntax(index: TextIndex, error: JsonSyntaxError, message: str) -> Finding:
    offset = index.utf16_to_byte(error.location.position) if error.location else len(index.data)
    return _finding(index, WorkflowError("CONFIG_ERROR", message), offset, min(offset + 1, len(index.data)))


def settings_findings(index: TextIndex, path: Path, saved: bool) -> list[Finding]:
    """Syntax errors of the text as typed; the launch's checks of the saved file (when `saved`)."""
    try:
        document = parse_json_document(index.text)
    except JsonSyntaxError as error:
        return [_json_syntax(index, error, f"Invalid workflow settings JSON at {path}: {error.message}")]
    if not saved:
        return []
    try:
        load_settings(path)
    except WorkflowError as error:
        return [_locate_settings_error(index, document, error)]
    return []


def _locate_settings_error(index: TextIndex, document: JsonDocument, error: WorkflowError) -> Finding:
    for pattern, locate in _SETTINGS_LOCATORS:
        match = pattern.search(error.message)
        if match is None:
            continue
        json_path, on_key = locate(match)
        location = (document.key_locations if on_key else document.locations).get(json_path) or document.location(
            json_path
        )
        if location is not None:
            start = location.position
            end = _token_end(index.text if index.is_ascii else _js_text(index), start)
            return _finding(index, error, index.utf16_to_byte(start), index.utf16_to_byte(end))
    return _finding(index, error, *_line_span(index, 0))


def _js_text(index: TextIndex) -> str:
    """The text with each astral character as two units, so UTF-16 indexes address it directly."""
    return "".join(char if ord(char) < 0x10000 else char + "\0" for char in index.text)


def role_findings(index: TextIndex, path: Path) -> list[Finding]:
    """A role file checked strictly, as every launch checks all role files."""
    try:
        parse_role_markdown(index.text, True, str(path))
    except WorkflowError as error:
        return [_finding(index, error, *_role_span(index, error.message))]
    return []


def _role_span(index: TextIndex, message: str) -> tuple[int, int]:
    yaml_position = _YAML_LINE.search(message)
    if yaml_position is not None:  # lines count from the frontmatter's first line, after `---`
        return _line_span(index, int(yaml_position.group(1)))
    for prefix, key in _ROLE_KEYS:
        if prefix in message:
            found = re.search(rf"^{re.escape(key)}\s*:", index.text, re.MULTILINE)
            if found is not None:
                line = index.text.count("\n", 0, found.start())
                return _line_span(index, line)
    return _line_span(index, 0)


def piflow_toml_findings(index: TextIndex, path: Path, saved: bool) -> list[Finding]:
    """piflow.toml (or the user's config.toml): TOML syntax as typed, the schema when saved."""
    try:
        tomllib.loads(index.text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", 1) or 1
        wrapped = WorkflowError("CONFIG_ERROR", f"{path}:{line}: invalid TOML: {getattr(error, 'msg', error)}")
        return [_finding(index, wrapped, *_line_span(index, line - 1))]
    if not saved:
        return []
    try:
        read_piflow_file(path, allow_trusted_projects=path == user_config_path())
    except WorkflowError as error:
        match = _FILE_LINE.match(error.message)
        line = int(match.group(1)) - 1 if match else 0
        return [_finding(index, error, *_line_span(index, line))]
    return []


def models_findings(index: TextIndex, path: Path, saved: bool) -> list[Finding]:
    """pi's models.json: JSON syntax as typed, the registry's checks when saved (`<file>:<line>:<col>:`)."""
    try:
        parse_json_document(index.text)
    except JsonSyntaxError as error:
        where = f"{path}:{error.location.line}:{error.location.column}" if error.location else str(path)
        return [_json_syntax(index, error, f"{where}: invalid JSON: {error.message}")]
    if not saved:
        return []
    try:
        load_model_registry(path)
    except WorkflowError as error:
        match = _FILE_LINE_COLUMN.match(error.message)
        if match is None:
            return [_finding(index, error, *_line_span(index, 0))]
        start = index.offset_at(int(match.group(1)) - 1, int(match.group(2)) - 1)
        end = _token_end(index.text if index.is_ascii else _js_text(index), index.byte_to_utf16(start))
        return [_finding(index, error, start, index.utf16_to_byte(end))]
    return []


def saved_text_matches(path: Path, index: TextIndex) -> bool:
    """Whether the buffer holds what is on disk (then the loaders' verdict applies to it)."""
    try:
        return path.read_bytes() == index.data
    except OSError:
        return False
