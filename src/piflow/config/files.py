"""The one way piflow reads a file a user (or a cloned repository) points it at.

Only regular files are read (a FIFO, a device such as `/dev/zero`, a socket or a directory is
refused before a byte is read, so nothing blocks or reads without end), symbolic links are
followed to a regular file, and every kind of file has a size cap. Scripts must be UTF-8: the
first invalid byte is an `InvalidUtf8` with its line and column, not a traceback. pi's own files
keep Node's reading (`read_text_as_node`: invalid bytes become U+FFFD) so they mean what they
mean to pi.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Final

__all__ = [
    "CONFIG_LIMIT",
    "SCRIPT_LIMIT",
    "FileRefused",
    "InvalidUtf8",
    "decode_utf8",
    "node_error_text",
    "read_bytes",
    "read_text",
    "read_text_as_node",
]

MIB: Final = 1024 * 1024
SCRIPT_LIMIT: Final = 10 * MIB
"""Scripts: the worker's RPC message limit, which a launch has to carry the script through."""
CONFIG_LIMIT: Final = 4 * MIB
"""settings.json, models.json, role files, piflow.toml, fixtures: far above any real one."""

_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_LINE_BREAK: Final = re.compile(rb"\r\n|\r|\n")

# libuv's texts for the errors Node's readFileSync reports (`<CODE>: <text>, open '<path>'`).
_LIBUV_TEXTS: Final = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "not a directory",
    errno.ELOOP: "too many symbolic links encountered",
    errno.ENAMETOOLONG: "name too long",
    errno.EIO: "i/o error",
    errno.EMFILE: "too many open files",
}


class FileRefused(Exception):
    """A path piflow will not read: not a regular file, or larger than the cap for its kind."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


class InvalidUtf8(ValueError):
    """A file that is not UTF-8, located at its first invalid byte.

    `line` and `column` count from 1 (columns in UTF-16 units, as `piflow check` prints them);
    `offset` is the UTF-16 offset of that byte's U+FFFD in the text decoded with replacement.
    """

    def __init__(self, path: str, data: bytes, error: UnicodeDecodeError) -> None:
        prefix = data[: error.start]
        breaks = list(_LINE_BREAK.finditer(prefix))
        line_start = breaks[-1].end() if breaks else 0
        self.path = path
        self.byte = data[error.start]
        self.line = len(breaks) + 1
        self.column = _utf16_length(prefix[line_start:]) + 1
        self.offset = _utf16_length(prefix)
        self.description = f"Invalid UTF-8: byte 0x{self.byte:02X} ({error.reason}); save the file as UTF-8"
        super().__init__(f"{path}:{self.line}:{self.column}: {self.description}")


def _utf16_length(valid_utf8: bytes) -> int:
    return len(valid_utf8.decode("utf-8").encode("utf-16-le")) // 2


def _check_regular(name: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    what = next((f"is {kind}, not a regular file" for test, kind in _KINDS if test(mode)), "is not a regular file")
    raise FileRefused(name, what)


def read_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """The content of a regular file of at most `limit` bytes.

    Raises `FileRefused` for anything else but a directory, which is `IsADirectoryError` as
    Node's EISDIR; `FileNotFoundError` and other `OSError`s propagate for the caller to word.
    The file is opened non-blocking, so opening a FIFO returns at once (and is then refused)
    instead of waiting for a writer.
    """
    name = os.fspath(path)
    _check_regular(name, os.stat(name).st_mode)  # before opening: opening a device may act on it
    descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _check_regular(name, os.fstat(descriptor).st_mode)  # the path may have changed since
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(descriptor, min(limit + 1 - size, MIB)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FileRefused(name, f"is larger than {_size(limit)}")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def decode_utf8(data: bytes, path: str) -> str:
    """Strict UTF-8 (a byte order mark is kept, as Node keeps it); `InvalidUtf8` otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidUtf8(path, data, error) from None


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """`read_bytes` then `decode_utf8`: piflow's own formats (piflow.toml, scripts, fixtures)."""
    return decode_utf8(read_bytes(path, limit), os.fspath(path))


def read_text_as_node(path: str, limit: int = CONFIG_LIMIT) -> str | None:
    """Read a file as `readFileSync(path, "utf8")` does; None when it does not exist.

    Invalid UTF-8 becomes U+FFFD and a byte order mark is kept, as in Node. `FileRefused` and
    other OS errors propagate.
    """
    try:
        data = read_bytes(path, limit)
    except FileNotFoundError:
        return None
    return data.decode("utf-8", errors="replace")


def node_error_text(error: OSError | FileRefused, path: str) -> str:
    """The message Node's `readFileSync(path)` gives for an OS error (ours for a refused file)."""
    if isinstance(error, FileRefused):
        return str(error)
    if error.errno == errno.EISDIR:
        return "EISDIR: illegal operation on a directory, read"
    code = errno.errorcode.get(error.errno or 0, "EIO")
    text = _LIBUV_TEXTS.get(error.errno or 0, (error.strerror or "unknown error").lower())
    return f"{code}: {text}, open '{path}'"
