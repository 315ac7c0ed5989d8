"""The daemon's modules import one another without a circle (issue 22, item 4), counting every
import: at the top, inside a function, and under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import pitrio.transports.daemon as daemon

PACKAGE = "pitrio.transports.daemon"


def imports_of(path: Path) -> set[str]:
    """The modules of the daemon package that ``path`` imports, wherever the import is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == PACKAGE:
                found.update(f"{PACKAGE}.{alias.name}" for alias in node.names)
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE + "."))
    return found


def graph() -> dict[str, set[str]]:
    root = Path(daemon.__file__).parent
    modules = {f"{PACKAGE}.{p.stem}": p for p in root.glob("*.py") if p.stem != "__init__"}
    return {name: imports_of(path) & modules.keys() for name, path in modules.items()}


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle (its modules, the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (circle := visit(target)) is not None:
                return circle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (circle := visit(start)) is not None:
            return circle
    return None


def test_the_finder_sees_a_circle() -> None:
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_in_the_daemon() -> None:
    edges = graph()
    assert f"{PACKAGE}.sockets" in edges and edges[f"{PACKAGE}.server"]
    assert find_circle(edges) is None, " -> ".join(find_circle(edges) or [])
