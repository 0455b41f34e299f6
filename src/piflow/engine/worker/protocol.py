"""The worker's JSON-lines protocol: limits, timings and the encodings both ends share.

host → worker: `start` (once), then `settle` batches. worker → host: `hb` heartbeats, `call`
messages (ids increase in script call order) and one final `done`. The shapes of each message are
documented in `client.py`, the host's side of the pipe.
"""

from __future__ import annotations

import json
from typing import Any, Final

from piflow.engine.worker.boundary import well_formed
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

HEARTBEAT_LINE: Final = b'{"t":"hb"}\n'
CALL_PREFIX: Final = '{"t":"call","id":'
DONE_PREFIX: Final = '{"t":"done",'


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
