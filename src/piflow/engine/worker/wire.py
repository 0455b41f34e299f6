"""The worker's wire: limits, timings, the fixed lines and the encodings both ends of the pipe share.

The worker program imports this module alone (the typed calls of `protocol.py`, which re-exports
everything here, are the host's): each dataclass costs its import time, and the worker's start is
on the path of every launch and resume.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from piflow.errors import ERROR_CODES, WorkflowError

RPC_LIMIT_BYTES: Final = 10 * 1024 * 1024
"""Largest message, in UTF-8 bytes of its JSON, either way (spec A.1)."""
HEARTBEAT_INTERVAL: Final = 1.0
HEARTBEAT_TIMEOUT: Final = 5.0
DEFAULT_HEAP_LIMIT: Final = 512 * 1024 * 1024
"""QuickJS heap of a worker. The reference gives its worker 128 MiB of V8 heap; QuickJS needs about
3 KiB per pending agent task of a `parallel`, so this holds fan-outs of well over 100k agents."""
DEFAULT_MEMORY_LIMIT: Final = 1024 * 1024 * 1024
"""Address-space cap of a worker process: the heap plus Python, thread stacks, allocator arenas
and a few 10 MiB messages in flight."""

OVERSIZED: Final = "RPC value exceeds the 10 MB JSON boundary"
NOT_JSON: Final = "RPC values must be JSON-compatible"

SUBAGENTS_DIALECT: Final = "pi-subagents"
"""The dialect whose scripts get `runs`, `emit`, `console` and `state` (prelude.js's second section)
and their own instrumentation."""

HEARTBEAT_LINE: Final = b'{"t":"hb"}\n'
SETTLE_HEAD: Final = b'{"t":"settle","results":['
SETTLE_TAIL: Final = b"]}"
"""A settle line is `SETTLE_HEAD`, the results' JSON separated by commas, `SETTLE_TAIL`: the worker
hands such lines to QuickJS as they came, unparsed."""


SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""A lone surrogate: text containing one is not well-formed Unicode."""


def well_formed(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD: for messages that must reach the user anyway."""
    return text if text.isascii() else SURROGATE.sub("\ufffd", text)


def encode(message: Any) -> bytes:
    """One protocol line: compact JSON, no NaN/Infinity, newline-terminated."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode() + b"\n"


def error_json(error: WorkflowError) -> dict[str, Any]:
    """The wire form of a failure: `{code, message, failedAt?, authored}`."""
    return error.to_json() | {"authored": error.authored}


def error_from_json(data: Any) -> WorkflowError:
    """A failure the worker reported; codes outside the spec's list become authored INTERNAL_ERROR (spec C)."""
    if not isinstance(data, dict):
        return WorkflowError("INTERNAL_ERROR", "Workflow worker reported a malformed error")
    code = data.get("code")
    message = data.get("message")
    failed_at = data.get("failedAt")
    text = well_formed(message) if isinstance(message, str) else ""
    where = well_formed(failed_at) if isinstance(failed_at, str) else None
    if code not in ERROR_CODES:
        return WorkflowError("INTERNAL_ERROR", text, failed_at=where, authored=True)
    return WorkflowError(str(code), text, failed_at=where, authored=data.get("authored") is True)
