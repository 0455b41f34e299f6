"""One direction of dependency (DESIGN 3): config <- analysis <- engine <- server/cli.

Every import in the source tree counts, including those inside functions and `TYPE_CHECKING`
blocks: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src" / "piflow"
FORBIDDEN = {
    "config": ("piflow.analysis", "piflow.engine", "piflow.server", "piflow.cli"),
    "analysis": ("piflow.engine", "piflow.server", "piflow.cli"),
    "engine": ("piflow.server", "piflow.cli"),
}


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module `path` (a module of `package`) imports, and every name it imports from one."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def violations(layer: str) -> list[str]:
    banned = FORBIDDEN[layer]
    return sorted(
        f"{path.relative_to(SOURCE)} imports {module}"
        for path in (SOURCE / layer).rglob("*.py")
        for module in imported_modules(path, ".".join(path.relative_to(SOURCE.parent).parts[:-1]))
        if any(
            module == prefix or module.startswith(prefix + ".") or module.startswith(prefix + "_") for prefix in banned
        )
    )


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_nothing_above_it(layer: str) -> None:
    assert violations(layer) == []


def test_the_check_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from ..server import app\n    import piflow.engine.runs\n", encoding="utf-8")
    assert imported_modules(module, "piflow.config") == {"piflow.server", "piflow.server.app", "piflow.engine.runs"}
