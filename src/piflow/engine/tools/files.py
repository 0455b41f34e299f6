"""The file tools — `read`, `ls`, `find`, `grep`, `edit`, `write` — with pi's semantics and caps.

Each takes the workspace and the call's arguments and returns the reply text, or raises
`ToolError` with a message the model can act on. They block (file system, `git ls-files`), so
the runtime calls them on a worker thread.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Final

from piflow.engine.tools.arguments import Arguments
from piflow.engine.tools.confinement import ToolError, Workspace
from piflow.engine.tools.output import MAX_BYTES, head, short_line, size

LS_LIMIT: Final = 500
FIND_LIMIT: Final = 1000
GREP_LIMIT: Final = 100


def _text_of(path: Path, shown: str) -> str:
    if not path.exists():
        raise ToolError(f"File not found: {shown}")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory: use ls to list it")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ToolError(f"Cannot read {shown}: {error.strerror or error}") from None
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown} is a binary file ({size(len(data))}): use bash to inspect it")
    return data.decode("utf-8", "replace")


def read(workspace: Workspace, args: Arguments) -> str:
    """Line-numbered file contents from `offset` (1-based), at most `limit` lines, capped."""
    shown = args.string("path")
    text = _text_of(workspace.resolve(shown), shown)
    offset = args.optional_int("offset", minimum=1) or 1
    limit = args.optional_int("limit", minimum=1)
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if not lines:
        return f"({shown} is empty)"
    if offset > len(lines):
        raise ToolError(f"Offset {offset} is beyond end of file ({len(lines)} lines total)")
    start = offset - 1
    selected = lines[start : start + limit] if limit is not None else lines[start:]
    width = len(str(start + len(selected)))
    numbered = [f"{number:>{width}}\t{line}" for number, line in enumerate(selected, start=offset)]
    capped = head(numbered)
    if not capped.lines:
        return (f"[Line {offset} is larger than the {size(MAX_BYTES)} limit. "
                f"Use bash: sed -n '{offset}p' {shown} | head -c {MAX_BYTES}]")
    body = "\n".join(capped.lines)
    last = offset + len(capped.lines) - 1
    if capped.truncated:
        why = f" ({size(MAX_BYTES)} limit)" if capped.by_bytes else ""
        return f"{body}\n\n[Showing lines {offset}-{last} of {len(lines)}{why}. Use offset={last + 1} to continue.]"
    if last < len(lines):
        return f"{body}\n\n[{len(lines) - last} more lines in file. Use offset={last + 1} to continue.]"
    return body


def ls(workspace: Workspace, args: Arguments) -> str:
    """Entries of a directory, sorted case-insensitively, directories with a `/`, dotfiles included."""
    shown = args.optional_string("path") or "."
    directory = workspace.resolve(shown)
    if not directory.exists():
        raise ToolError(f"Path not found: {shown}")
    if not directory.is_dir():
        raise ToolError(f"Not a directory: {shown}")
    limit = args.optional_int("limit", minimum=1) or LS_LIMIT
    try:
        names = sorted(os.listdir(directory), key=str.lower)
    except OSError as error:
        raise ToolError(f"Cannot read directory: {error.strerror or error}") from None
    if not names:
        return "(empty directory)"
    entries = [name + ("/" if (directory / name).is_dir() else "") for name in names[:limit]]
    notices = [f"{limit} entries limit reached. Use limit={limit * 2} for more"] if len(names) > limit else []
    return _with_notices(entries, notices)


def _with_notices(lines: list[str], notices: list[str]) -> str:
    capped = head(lines)
    if capped.truncated:
        notices = [*notices, f"{size(MAX_BYTES)} limit reached"]
    body = "\n".join(capped.lines)
    return f"{body}\n\n[{'. '.join(notices)}]" if notices else body


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    """A glob as fd and ripgrep read it: `**` crosses directories, `*` and `?` do not."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = close + 1
        elif pattern[i] == "{" and (close := pattern.find("}", i)) != -1:
            out.append("(?:" + "|".join(re.escape(part) for part in pattern[i + 1 : close].split(",")) + ")")
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _matches(pattern: str, relative: str) -> bool:
    """`pattern` against a path relative to the search directory (its base name when it has no `/`)."""
    target = relative if "/" in pattern.rstrip("/") else relative.rsplit("/", 1)[-1]
    return _glob(pattern).match(target) is not None


def _files(workspace: Workspace, base: Path) -> Iterator[Path]:
    """Files under `base` (or `base` itself), honouring `.gitignore` inside a git work tree."""
    if base.is_file():
        yield base
        return
    listed = _git_files(base)
    candidates: Iterator[Path] = iter(listed) if listed is not None else _walk(base)
    for path in candidates:
        real = path.resolve()
        if workspace.contains(real) and real.is_file():  # a symlink leading out is not followed
            yield path


def _git_files(base: Path) -> list[Path] | None:
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=base, capture_output=True, timeout=60, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = sorted({name for name in done.stdout.decode("utf-8", "replace").split("\0") if name})
    return [base / name for name in names]


def _walk(base: Path) -> Iterator[Path]:
    for directory, subdirectories, names in os.walk(base):
        subdirectories[:] = sorted(name for name in subdirectories if name != ".git")
        for name in sorted(names):
            yield Path(directory) / name


def find(workspace: Workspace, args: Arguments) -> str:
    """Files matching a glob, relative to the search directory."""
    pattern = args.string("pattern")
    shown = args.optional_string("path") or "."
    base = workspace.resolve(shown)
    if not base.exists():
        raise ToolError(f"Path not found: {shown}")
    limit = args.optional_int("limit", minimum=1) or FIND_LIMIT
    found: list[str] = []
    more = False
    for path in _files(workspace, base):
        relative = path.relative_to(base).as_posix() if path != base else path.name
        if _matches(pattern, relative):
            if len(found) == limit:
                more = True
                break
            found.append(relative)
    if not found:
        return "No files found matching pattern"
    return _with_notices(found, [f"{limit} results limit reached"] if more else [])


def grep(workspace: Workspace, args: Arguments) -> str:
    """Matching lines as `path:line: text` (context lines as `path-line- text`)."""
    pattern = args.string("pattern")
    shown = args.optional_string("path") or "."
    base = workspace.resolve(shown)
    if not base.exists():
        raise ToolError(f"Path not found: {shown}")
    flags = re.IGNORECASE if args.flag("ignoreCase") else 0
    try:
        regex = re.compile(re.escape(pattern) if args.flag("literal") else pattern, flags)
    except re.error as error:
        raise ToolError(f"Invalid regular expression {pattern!r}: {error}") from None
    glob = args.optional_string("glob")
    context = args.optional_int("context") or 0
    limit = args.optional_int("limit", minimum=1) or GREP_LIMIT
    out: list[str] = []
    count = 0
    for path in _files(workspace, base):
        relative = path.relative_to(base).as_posix() if path != base else path.name
        if glob is not None and not _matches(glob, relative):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        lines = data.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
        shown_path = workspace.display(path)
        for index, line in enumerate(lines):
            if not regex.search(line):
                continue
            if count == limit:
                return _with_notices(out, [f"{limit} matches limit reached. Use limit={limit * 2} for more"])
            count += 1
            for number in range(max(0, index - context), min(len(lines), index + context + 1)):
                mark = ":" if number == index else "-"
                out.append(f"{shown_path}{mark}{number + 1}{mark} {short_line(lines[number])}")
    return _with_notices(out, []) if out else "No matches found"


def _edits(args: Arguments) -> list[tuple[str, str]]:
    """`edits: [{oldText, newText}]`, or the single `oldText`/`newText` older pi versions take."""
    raw = args.values.get("edits")
    edits: list[tuple[str, str]] = []
    if isinstance(raw, list):
        for item in raw:
            if not (isinstance(item, dict) and isinstance(item.get("oldText"), str)
                    and isinstance(item.get("newText"), str)):
                raise ToolError("Each of edits[] must be an object with string oldText and newText")
            edits.append((item["oldText"], item["newText"]))
    elif raw is not None:
        raise ToolError("edits must be an array of {oldText, newText}")
    old, new = args.values.get("oldText"), args.values.get("newText")
    if isinstance(old, str) and isinstance(new, str):
        edits.append((old, new))
    if not edits:
        raise ToolError("Edit tool input is invalid. edits must contain at least one replacement.")
    return edits


def edit(workspace: Workspace, args: Arguments) -> str:
    """Exact, unique, non-overlapping replacements, all matched against the original text."""
    shown = args.string("path")
    path = workspace.resolve(shown)
    original = _text_of(path, shown)
    edits = _edits(args)
    one = len(edits) == 1
    spans: list[tuple[int, int, str, int]] = []
    for index, (old, new) in enumerate(edits):
        which = "the text" if one else f"edits[{index}]"
        if not old:
            raise ToolError(f"oldText must not be empty in {shown}." if one
                            else f"edits[{index}].oldText must not be empty in {shown}.")
        found = original.count(old)
        if found == 0:
            raise ToolError(f"Could not find {'the exact text' if one else which} in {shown}. "
                            "The old text must match exactly including all whitespace and newlines.")
        if found > 1:
            raise ToolError(f"Found {found} occurrences of {which} in {shown}. The text must be unique. "
                            "Please provide more context to make it unique.")
        start = original.index(old)
        spans.append((start, start + len(old), new, index))
    spans.sort()
    for previous, current in itertools.pairwise(spans):
        if previous[1] > current[0]:
            raise ToolError(f"edits[{previous[3]}] and edits[{current[3]}] overlap in {shown}. "
                            "Merge them into one edit or target disjoint regions.")
    updated = original
    for start, end, new, _ in reversed(spans):
        updated = updated[:start] + new + updated[end:]
    if updated == original:
        raise ToolError(f"No changes made to {shown}. The replacement produced identical content.")
    path.write_text(updated, encoding="utf-8")
    return f"Successfully replaced {len(edits)} block(s) in {shown}."


def write(workspace: Workspace, args: Arguments) -> str:
    """Create or overwrite a file, creating its parent directories."""
    shown = args.string("path")
    content = args.string("content")
    path = workspace.resolve(shown)
    if path.is_dir():
        raise ToolError(f"{shown} is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    except OSError as error:
        raise ToolError(f"Cannot write {shown}: {error.strerror or error}") from None
    return f"Successfully wrote {len(content.encode('utf-8'))} bytes to {shown}"
