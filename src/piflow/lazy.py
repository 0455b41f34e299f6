"""Packages whose public names are imported on first use, so a process pays only for what it runs.

`import piflow` used to import the analysis, the dialects, config/pydantic and dukpy; the worker
(which needs tree-sitter and two analysis modules) and `piflow check` paid for all of it. A package
made lazy with `export_lazily` imports each public name from its module on first access (PEP 562
style) and then keeps it.

A public name may also be a submodule: `piflow.analysis.analyze` is the function `analyze` and the
module defining it. The import system binds every imported submodule on its package (`setattr`),
which would make `from piflow.analysis import analyze` return the module once the submodule was
imported first; a lazy package refuses that binding for its exported names, so they always name
what the package exports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any


class LazyPackage(ModuleType):
    """A package module whose exports (`name -> defining module`) are imported when first read."""

    _exports: Mapping[str, str]

    def __getattr__(self, name: str) -> Any:
        module = self._exports.get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        ModuleType.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name in self._exports and value.__name__ == f"{self.__name__}.{name}":
            return  # the import system binding a submodule whose name is an export: the export wins
        ModuleType.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted({*ModuleType.__dir__(self), *self._exports})


def export_lazily(package: str, exports: Mapping[str, str]) -> None:
    """Make the already-imported `package` lazy: each name of `exports` comes from its module on first use."""
    module = sys.modules[package]
    module._exports = dict(exports)  # type: ignore[attr-defined]  # set before the class that reads it
    module.__class__ = LazyPackage
