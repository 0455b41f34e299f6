"""C extensions loaded without their Python packages: each package's `__init__` imports modules
piflow never uses (dukpy's its npm installer: urllib, http.client, ssl), and both the worker's start
and the host's exact syntax check are on the path of every launch and resume. Below every layer, so
the analysis and the worker share it."""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
from types import ModuleType


def extension(package: str, name: str) -> ModuleType:
    """The extension module `package.name`, executed without running `package`'s `__init__`.

    It is left out of `sys.modules` unless the package is imported, so a later `import package`
    (a test process) loads the package normally and binds its own copy of the name.
    """
    found = importlib.util.find_spec(package)  # finds the package without executing it
    where = found.submodule_search_locations if found is not None else None
    qualified = f"{package}.{name}"
    spec = importlib.machinery.PathFinder.find_spec(qualified, list(where or ()))
    if spec is None or spec.loader is None:
        raise ImportError(f"{package} is not installed: piflow needs its extension {name}", name=qualified)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if package not in sys.modules:
        sys.modules.pop(spec.name, None)
    return module


@functools.cache
def quickjs() -> ModuleType:
    """dukpy's QuickJS extension (`create_context`, `eval_string`, `JSRuntimeError`). A process that
    imported the `dukpy` package (a test) shares the package's: the same functions and error class."""
    return sys.modules.get("dukpy._dukpy") or extension("dukpy", "_dukpy")
