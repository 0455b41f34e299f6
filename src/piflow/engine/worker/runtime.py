"""One script execution inside the worker: a QuickJS context (through dukpy) running prelude.js.

dukpy's public `JSInterpreter` installs Node-like shims on creation — `process.env` with the whole
environment, a `require` that reads files through exported Python functions, `console` — none of
which a workflow script may reach (spec A.2). So this class talks to dukpy's native layer directly
and exports two Python functions: `inbox`, through which prelude.js pulls the request of the
current evaluation, and `tick`, its progress report. Every evaluation returns the JSON lines the
script produced for the host.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Final, NamedTuple

from piflow.engine.worker.wire import NOT_JSON
from piflow.errors import WorkflowError
from piflow.native import quickjs

_dukpy: Any = quickjs()
"""dukpy's QuickJS extension alone: the `dukpy` package's `__init__` imports its npm installer
(urllib, http.client, ssl), ~30 ms of every worker's start for nothing a worker uses. A test
process that imported `dukpy` shares its extension (functions and error class)."""

_ENTRY: Final = "__pi_extensible_workflows_worker"
_FILENAME: Final = "workflow.js"
# Read beside this module: `importlib.resources` (zipfile, tempfile, pathlib) would cost the worker's
# start ~15 ms, and the worker runs from an unpacked package only.
with open(os.path.join(os.path.dirname(__file__), "prelude.js"), encoding="utf-8") as _source:
    _PRELUDE: Final = _source.read()


class Step(NamedTuple):
    """What one evaluation produced: the protocol lines for the host (each newline-terminated), the
    number of host calls still unanswered, and whether the script has finished (its `done` is in
    `lines`). A named tuple, not a dataclass: `dataclasses` (with `inspect`, `ast`, `dis`) would
    add ~7 ms to every worker's start."""

    lines: bytes
    pending: int
    finished: bool


class ScriptRuntime:
    """The QuickJS side of a worker; not thread-safe (dukpy holds the GIL while JavaScript runs).

    `evaluating` and `progress` are read by the heartbeat thread: while JavaScript runs, the worker
    counts as alive only if `progress` (host calls made and settled, in steps of 1024) advances.
    """

    def __init__(self, heap_limit: int) -> None:
        self._ctx = _dukpy.create_context()
        self._request: bytes | None = None
        self.evaluating = False
        self.progress = 0
        _set_heap_limit(self._ctx, heap_limit)
        self._eval(_PRELUDE)

    # -- dukpy's native layer calls these two ------------------------------------------------
    def _check_exported_function_exists(self, name: bytes) -> bool:
        return name in (b"inbox", b"tick")

    def _call_python(self, name: bytes, arguments: bytes) -> bytes | None:
        """`inbox` returns the request's JSON text, which QuickJS parses itself."""
        if name == b"tick":
            self.progress += 1
            return None
        request, self._request = self._request, None
        return request

    # -- the worker's steps -------------------------------------------------------------------
    def compile(self, source: str) -> None:
        """Compile an instrumented body (`instrument.instrumented`, done by the host) without running
        it; raise INVALID_SYNTAX with QuickJS's message."""
        self._request = b'{"op":"compile"}'
        try:
            self._eval(f"{_ENTRY}({source});")
        except _dukpy.JSRuntimeError as exc:
            raise WorkflowError("INVALID_SYNTAX", f"Invalid workflow syntax: {_first_line(exc)}") from None
        finally:
            self._request = None

    def launch(
        self, args: Any, functions: list[str], variables: dict[str, Any], dialect: str | None = None,
        workflow: dict[str, Any] | None = None,
    ) -> Step:
        """Install args, extension functions and variables (or the dialect's globals, with a
        pi-subagents run's pragma fields `workflow`), then start the body."""
        request = {"op": "launch", "args": args, "functions": functions, "variables": variables,
                   "dialect": dialect, "workflow": workflow or {}}
        return self._step(json.dumps(request).encode())

    def settle(self, lines: list[bytes]) -> Step:
        """Resolve finished host calls, in the given order, in one evaluation.

        `lines` are settle lines as the host sent them (`SETTLE_HEAD`...): QuickJS parses their JSON
        once, so no value is decoded and encoded again in Python on its way to the script.
        """
        return self._step(b'{"op":"settle","batches":[' + b",".join(line.rstrip(b"\n") for line in lines) + b"]}")

    def _step(self, request: bytes) -> Step:
        self._request = request
        try:
            report = self._eval(f"{_ENTRY}();")
        except _dukpy.JSRuntimeError:
            # dukpy reports a promise still rejected without a handler once the job queue has
            # drained. The script may attach one later (JavaScript allows it), so the step stands;
            # its messages are fetched separately. A broken context fails this second evaluation.
            self._request = b'{"op":"flush"}'
            report = self._eval(f"{_ENTRY}();")
        finally:
            self._request = None
        if isinstance(report, dict) and report.get("malformed") is True:
            raise WorkflowError("RPC_LIMIT_EXCEEDED", NOT_JSON)
        if not isinstance(report, dict) or not isinstance(report.get("lines"), str):
            raise WorkflowError("INTERNAL_ERROR", "Workflow worker runtime returned no messages")
        return Step(report["lines"].encode(), int(report["pending"]), report["finished"] is True)

    def _eval(self, code: str) -> Any:
        self.evaluating = True
        try:
            raw = _dukpy.eval_string(self, code.encode("utf-8", "surrogatepass"), b"{}", False, _FILENAME)
        finally:
            self.evaluating = False
        return None if raw is None else json.loads(raw)


def _first_line(error: Exception) -> str:
    text = str(error).split("\n", 1)[0]
    return text.removeprefix("SyntaxError: ")


_KNOWN_LAYOUT: Final = "0.6.0"


def _installed_dukpy_is(version: str) -> bool:
    """Whether the dukpy installed beside its extension is `version` alone, from its dist-info name
    (`importlib.metadata` would cost ~30 ms of the worker's start to read the same)."""
    site = os.path.dirname(os.path.dirname(_dukpy.__file__))
    installed = [name for name in os.listdir(site) if name.startswith("dukpy-") and name.endswith(".dist-info")]
    return installed == [f"dukpy-{version}.dist-info"]


def _set_heap_limit(capsule: object, limit: int) -> None:
    """Set QuickJS's heap limit (dukpy fixes it at 128 MiB, too small for a 50k-agent fan-out).

    dukpy exposes no setting, but its extension exports QuickJS's C API and its context capsule
    points to a struct whose first two fields are the JSRuntime and JSContext. That layout is known
    for dukpy 0.6.0 only, and is double-checked (the context must belong to the runtime); with any
    other version the default limit stays.
    """
    if not _installed_dukpy_is(_KNOWN_LAYOUT):
        return
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    state = get_pointer(capsule, b"DUKPY_CONTEXT_CAPSULE")
    runtime, context = (ctypes.c_void_p * 2).from_address(state)
    quickjs = ctypes.CDLL(_dukpy.__file__)
    quickjs.JS_GetRuntime.restype = ctypes.c_void_p
    quickjs.JS_GetRuntime.argtypes = [ctypes.c_void_p]
    if not runtime or quickjs.JS_GetRuntime(context) != runtime:
        return
    quickjs.JS_SetMemoryLimit.restype = None
    quickjs.JS_SetMemoryLimit.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    quickjs.JS_SetMemoryLimit(runtime, limit)
