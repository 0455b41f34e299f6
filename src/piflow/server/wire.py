"""The LSP wire: `Content-Length` frames read from a byte stream that may be hostile or broken.

pygls' reader believes the peer: it allocates whatever `Content-Length` claims, reads a header
line until a newline that may never come, and silently drops a header block it cannot parse. This
reader bounds every read (header lines, bodies), answers what it cannot frame with an error the
protocol sends back, and resynchronises on the next `Content-Length` header, so one bad frame never
costs the frames after it. It is blocking on purpose: it runs in its own daemon thread, so a peer
that never closes the stream cannot keep the process from exiting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Final

from lsprotocol.types import ErrorCodes

MAX_BODY: Final = 64 * 1024 * 1024
"""The largest message body read (bytes); a larger one is answered with an error and skipped."""
MAX_HEADER_LINE: Final = 8 * 1024
"""The longest header line kept (bytes); longer ones are junk, read in pieces of this size."""

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*$", re.IGNORECASE)


@dataclass(frozen=True)
class WireError:
    """A frame that cannot be read as a message: answered with a JSON-RPC error whose id is null."""

    code: int
    message: str


def read_frames(stream: BinaryIO, max_body: int = MAX_BODY) -> Iterator[bytes | WireError]:
    """The bodies of the frames on `stream` (and an error for each one that cannot be read), until EOF.

    A header block is a run of non-empty lines ended by an empty one; it must carry one valid
    `Content-Length`. A `Content-Length` line that follows junk on the same line (the rest of a
    frame whose length lied) starts a new block: that is how the reader finds its footing again.
    """
    length: int | None = None  # the block's Content-Length; -1 when present but not a number
    in_block = False
    skipping = False  # after an oversized frame: drop its body, line by line, up to the next header
    while True:
        line = stream.readline(MAX_HEADER_LINE)
        if not line:
            return
        if not line.endswith(b"\n"):  # a piece of an overlong line: never a header
            in_block = in_block or not skipping
            continue
        text = line.rstrip(b"\r\n")
        if match := _CONTENT_LENGTH.search(text):
            skipping, in_block = False, True
            value = match.group(1)
            # (-1: not a number; more digits than any real length are "too large": int() refuses 4,300+)
            length = -1 if not value.isdigit() else int(value) if len(value) <= 18 else max_body + 1
            continue
        if text.strip():
            in_block = in_block or not skipping
            continue
        if not in_block:  # a stray empty line (or the tail of a skipped body)
            continue
        claimed, length, in_block = length, None, False
        if claimed is None or claimed < 0:
            yield WireError(ErrorCodes.ParseError, "Parse error: a message header without a valid Content-Length")
        elif claimed > max_body:
            skipping = True
            yield WireError(
                ErrorCodes.InvalidRequest,
                f"Invalid Request: a message larger than {max_body} bytes (Content-Length too large)",
            )
        else:
            body = stream.read(claimed)
            if len(body) < claimed:
                return
            yield body
