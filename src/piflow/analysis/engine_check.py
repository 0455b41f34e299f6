"""The authoritative syntax check: the reference's parser (acorn) and a body compile, in QuickJS.

pi-extensible-workflows parses a script with acorn (an ES module with top-level `return`) and then
compiles the body in V8 as `(async()=>{BODY\\n})`. piflow runs the same acorn (vendored, see
`vendor/README.md`) inside the embedded QuickJS engine, so acorn's errors come out with the
reference's exact messages and positions; the body compile is QuickJS's, mapped to V8's wording
where the two engines agree on what is an error (regular expressions). acorn without a JIT costs
~150 ms per thousand lines, so `syntax_check` asks it only when a native strict compile
(`strict_compiles`, a few ms) cannot vouch for the text; the server runs this on open and save.

One interpreter per thread (QuickJS contexts are not thread-safe), created on first use: a bare
QuickJS context of dukpy's extension (`piflow.native`), without the `dukpy` package, whose import
(its npm installer: urllib, http.client) and Node-like shims a check never uses.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from piflow.native import quickjs

_STACK_LIMIT_MESSAGE: Final = "Not enough stack space"
_POSITION_SUFFIX: Final = re.compile(r" \(\d+:\d+\)$")
_QUICKJS_LOCATION: Final = re.compile(r"at <dukpy>:(\d+)(?::(\d+))?")

_ACORN_PARSE: Final = """
(function () {
  try {
    __piflow_acorn.parse(dukpy.source, {
      ecmaVersion: "latest", sourceType: dukpy.sourceType,
      allowReturnOutsideFunction: dukpy.sourceType === "module"
    });
    return null;
  } catch (error) {
    if (typeof error.pos !== "number") throw error;
    return { message: error.message, pos: error.pos, raisedAt: error.raisedAt,
             line: error.loc ? error.loc.line : null, column: error.loc ? error.loc.column : null };
  }
})()
"""

_REGEX_CHECK: Final = """
(function () {
  return dukpy.regexes.map(function (item) {
    try { new RegExp(item[0], item[1]); return null; } catch (error) { return String(error.message); }
  });
})()
"""

_BODY_WRAPPER: Final = "(function () { return (async()=>{\n%s\n}); }); 0"
"""Compiled, never called: an early error is all this looks for (line 1 is the wrapper's)."""

_STRICT_WRAPPER: Final = '(function () { "use strict"; return (async()=>{\n%s\n}); }); 0'
"""The same, in strict mode: as close to acorn's strict module parse as a QuickJS script compile gets."""


@dataclass(frozen=True, slots=True)
class AcornError:
    """acorn's verdict: `message` without its `(line:column)`, `offset` a UTF-16 index of the source."""

    message: str
    offset: int
    end_offset: int
    line: int
    column: int

    @property
    def full_message(self) -> str:
        return f"{self.message} ({self.line}:{self.column})"


@dataclass(frozen=True, slots=True)
class CompileError:
    """A QuickJS compile failure of the body; `line` is 1-based in the body, when QuickJS gives one."""

    message: str
    line: int | None


class _QuickJS:
    """A QuickJS context: `evaljs` evaluates a script with its keyword arguments as the `dukpy` global
    (JSON), as `dukpy.JSInterpreter.evaljs` does, and returns its JSON result; it exports no Python
    function to the script."""

    def __init__(self) -> None:
        self._ctx = quickjs().create_context()  # the name dukpy's native layer reads

    def evaljs(self, code: str, **values: Any) -> Any:
        raw = quickjs().eval_string(self, code.encode(), json.dumps(values).encode(), False, "<dukpy>")
        return None if raw is None else json.loads(raw)

    # dukpy's native layer asks these of its host object
    def _check_exported_function_exists(self, name: bytes) -> bool:
        return False

    def _call_python(self, name: bytes, arguments: bytes) -> None:
        return None


class JavaScriptChecker:
    """QuickJS, with acorn loaded on its first use."""

    def __init__(self) -> None:
        self._interpreter = _QuickJS()
        self._acorn_loaded = False

    def _load_acorn(self) -> None:
        """Evaluate acorn (~50 ms): only a text the native strict compile cannot vouch for needs it,
        so a valid script's launch or check never pays for it."""
        if self._acorn_loaded:
            return
        source = resources.files("piflow.analysis").joinpath("vendor/acorn.js").read_text(encoding="utf-8")
        self._interpreter.evaljs(
            "var module = undefined, exports = undefined, define = undefined;\n"
            + source
            + "\n;globalThis.__piflow_acorn = acorn; 1"
        )
        self._acorn_loaded = True

    def acorn_error(self, source: str, *, module: bool = True) -> AcornError | None:
        """acorn's first error for `source` (None when it parses, or when QuickJS ran out of stack)."""
        self._load_acorn()
        result: Any = self._interpreter.evaljs(_ACORN_PARSE, source=source, sourceType="module" if module else "script")
        if result is None or str(result["message"]).startswith(_STACK_LIMIT_MESSAGE):
            return None
        raised = result["raisedAt"] if isinstance(result["raisedAt"], int) else result["pos"]
        return AcornError(
            _POSITION_SUFFIX.sub("", str(result["message"])),
            int(result["pos"]),
            max(int(raised), int(result["pos"])),
            int(result["line"] or 1),
            int(result["column"] or 0),
        )

    def regex_errors(self, regexes: list[tuple[str, str]]) -> list[str | None]:
        """QuickJS's error message (or None) for each `(pattern, flags)`."""
        if not regexes:
            return []
        result: list[str | None] = self._interpreter.evaljs(_REGEX_CHECK, regexes=[list(item) for item in regexes])
        return result

    def compile_error(self, body: str) -> CompileError | None:
        """Compile the body as the reference's V8 does (sloppy async arrow); None when it compiles.

        Only call this for a body acorn accepted: its statements are then complete, so the
        wrapper cannot be closed early and nothing runs.
        """
        try:
            self._interpreter.evaljs(_BODY_WRAPPER % body)
        except quickjs().JSRuntimeError as error:
            text = str(error)
            first = text.split("\n", 1)[0]
            message = first.removeprefix("SyntaxError: ")
            location = _QUICKJS_LOCATION.search(text)
            line = int(location.group(1)) - 1 if location else None
            if not first.startswith("SyntaxError"):
                return None
            return CompileError(message, line)
        return None

    def strict_compiles(self, source: str) -> bool:
        """Whether QuickJS compiles `source` as a strict async arrow body (a fast, native check).

        Only call this for a text tree-sitter parses without an error, for the reason
        `compile_error` gives; `syntax_check` decides when its verdict may stand for acorn's.
        """
        try:
            self._interpreter.evaljs(_STRICT_WRAPPER % source)
        except quickjs().JSRuntimeError:
            return False
        return True


_local = threading.local()


def checker() -> JavaScriptChecker:
    """This thread's checker."""
    instance: JavaScriptChecker | None = getattr(_local, "checker", None)
    if instance is None:
        instance = JavaScriptChecker()
        _local.checker = instance
    return instance
