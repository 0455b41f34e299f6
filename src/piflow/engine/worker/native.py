"""C extensions loaded without their Python packages: each package's `__init__` imports modules a
worker never uses, and the worker's start is on the path of every launch and resume."""

from __future__ import annotations

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
        raise ImportError(f"{package} is not installed: the worker needs its extension {name}", name=qualified)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if package not in sys.modules:
        sys.modules.pop(spec.name, None)
    return module
