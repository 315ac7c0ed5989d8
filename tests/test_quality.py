"""Code quality the test suite enforces: ruff and mypy clean, no import circles, transports
reach actors only through the SDK (issue 22)."""

from __future__ import annotations

import ast
import functools
import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    result = run(str(BIN / "ruff"), "check", "pitrio", "tests", "bench", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def mypy_cache_dir() -> Path:
    """mypy's incremental cache for this checkout, kept outside it: a fresh clone's first run
    is otherwise a cold check of every module (~25 s of CPU quiet, ~60 s loaded), every time
    the CI clones again into the same place. mypy re-checks whatever changed and what depends
    on it (by content hash), so a kept cache never hides an error; one per checkout path, so
    two checkouts never write the same cache at once."""
    key = hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
    return Path.home() / ".cache" / "pitrio-mypy" / key


def test_mypy_is_clean() -> None:
    result = run(str(BIN / "mypy"), "--cache-dir", str(mypy_cache_dir()))
    assert result.returncode == 0, result.stdout + result.stderr


# -- the import graph (issue 22) ---------------------------------------------------------------
#
# Drawn from the source with ``ast``, not by importing: every ``import`` and ``from ... import``
# anywhere in a module counts, at module level, inside functions (the lazy imports that keep
# start-up fast) and under ``if TYPE_CHECKING:`` alike, since each is a dependency a reader has
# to follow. An edge goes to the module named (``from a.b import c`` to ``a.b.c`` when that is a
# module, else to ``a.b``); importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``,
# but those implicit parent edges are not drawn (every module would otherwise sit in a circle with
# its package).

# Circles still to break, by name (issue 22 broke the last ones: none is left). A circle found
# must lie inside one of these; an entry that is no longer a circle fails too, so the list
# cannot go stale.
KNOWN_CIRCLES: dict[str, frozenset[str]] = {}


def package_modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module of ``package`` under ``root``: dotted name -> (file, is a package)."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    return modules


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports (see above)."""
    modules = package_modules(root, package)

    def known(name: str) -> str | None:
        while name and name not in modules:  # ``import a.b.C``-style names: their module
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: up from this module's package
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else known(base))
        graph[name] = {target for target in targets if target and target != name}
    return graph


@functools.cache
def _drawn_pitrio_graph() -> dict[str, frozenset[str]]:
    """pitrio's import graph, drawn once for the module's three checks (parsing every module
    is ~1.5 s of CPU; the source does not change during a run)."""
    return {name: frozenset(targets) for name, targets in import_graph(ROOT, "pitrio").items()}


def pitrio_graph() -> dict[str, set[str]]:
    """pitrio's import graph (see :func:`import_graph`), a fresh copy for each caller."""
    return {name: set(targets) for name, targets in _drawn_pitrio_graph().items()}


def import_circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_import_graph_counts_every_kind_of_import(tmp_path: Path) -> None:
    """The drawing itself: function-level, ``TYPE_CHECKING``, relative and ``from pkg import
    module`` imports are edges; a circle through any of them is found, an acyclic chain is not."""
    package = tmp_path / "demo"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from demo import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.c import X\n",
        "sub/__init__.py": "",
        "sub/c.py": "from ..a import f\nimport demo.d\n",
        "d.py": "import os\nfrom demo.sub import e\n",
        "sub/e.py": "from demo.sub.c import something_else as y\n",
        "f.py": "import demo.d\nfrom . import a\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(tmp_path, "demo")
    assert graph["demo.a"] == {"demo.b"}
    assert graph["demo.b"] == {"demo.sub.c"}
    assert graph["demo.sub.c"] == {"demo.a", "demo.d"}
    assert graph["demo.d"] == {"demo.sub.e"}
    assert graph["demo.sub.e"] == {"demo.sub.c"}
    assert graph["demo.f"] == {"demo.d", "demo.a"}
    assert sorted(map(sorted, import_circles(graph))) == [
        ["demo.a", "demo.b", "demo.d", "demo.sub.c", "demo.sub.e"]
    ]
    del graph["demo.sub.e"]
    graph["demo.d"] = set()
    assert import_circles(graph) == [frozenset({"demo.a", "demo.b", "demo.sub.c"})]
    graph["demo.a"] = set()
    assert import_circles(graph) == []


def test_no_import_circles() -> None:
    """No module of pitrio imports itself back through others, but the known circles named in
    ``KNOWN_CIRCLES`` (printed, so the merge that breaks one can delete it)."""
    circles = import_circles(pitrio_graph())
    unknown = [c for c in circles if not any(c <= known for known in KNOWN_CIRCLES.values())]
    assert not unknown, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in unknown)
    for name, modules in KNOWN_CIRCLES.items():
        alive = [c for c in circles if c <= modules]
        assert alive, f"known circle {name!r} is gone: delete it from KNOWN_CIRCLES"
        print(f"known import circle, still to break: {name}: {', '.join(sorted(alive[0]))}")


def test_transports_reach_actors_only_through_the_sdk() -> None:
    """``DESIGN.md`` §1: nothing under ``pitrio/transports/`` imports ``pitrio.actors``; the
    handles, options and errors come from ``pitrio`` and ``pitrio.sdk``."""
    graph = pitrio_graph()
    reaching = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("pitrio.transports")
        for target in targets
        if target == "pitrio.actors" or target.startswith("pitrio.actors.")
    )
    assert not reaching, "transports import actors directly: " + ", ".join(reaching)


def test_nothing_imports_upward() -> None:
    """``DESIGN.md`` §1, the layers around the SDK: actors import neither the SDK (``pitrio``,
    ``pitrio.sdk``) nor a transport; the SDK imports no transport; ``messages`` imports nothing
    of pitrio but itself and ``errors``, and ``errors`` nothing at all."""

    def layer(module: str) -> str:
        for prefix in ("pitrio.transports", "pitrio.sdk", "pitrio.actors", "pitrio.messages"):
            if module == prefix or module.startswith(prefix + "."):
                return prefix
        return module

    forbidden = {
        "pitrio.actors": {"pitrio", "pitrio.sdk", "pitrio.transports"},
        "pitrio.sdk": {"pitrio", "pitrio.transports"},
    }
    allowed_only = {
        "pitrio.messages": {"pitrio.messages", "pitrio.errors"},
        "pitrio.errors": set(),
    }
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in pitrio_graph().items()
        for target in targets
        if layer(target) in forbidden.get(layer(module), set())
        or layer(target) not in allowed_only.get(layer(module), {layer(target)})
    )
    assert not upward, "imports against the layers: " + ", ".join(upward)
