"""Glob patterns as fd and rg read them."""

from __future__ import annotations

import pytest

from pitrio.actors.tool_executor.tools.globs import compile_glob, has_uppercase


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", ".py"], ["a.pyc", "d/a.py"]),
        ("**/*.py", ["a.py", "d/a.py", "d/e/a.py"], ["a.txt"]),
        ("src/**/test_*.py", ["src/test_a.py", "src/x/y/test_b.py"], ["src/a.py", "lib/test_a.py"]),
        ("**", ["anything", "a/b/c"], []),
        ("a?c", ["abc"], ["a/c", "abbc"]),
        ("[ab]x", ["ax", "bx"], ["cx"]),
        ("[!ab]x", ["cx"], ["ax"]),
        ("*.{ts,tsx}", ["a.ts", "b.tsx"], ["c.js"]),
        ("{src,lib}/**", ["src/a", "lib/b/c"], ["test/a"]),
        ("\\*.md", ["*.md"], ["a.md"]),
        ("file[", ["file["], ["file"]),
    ],
)
def test_globs(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    regex = compile_glob(pattern)
    for text in matching:
        assert regex.match(text), (pattern, text)
    for text in not_matching:
        assert not regex.match(text), (pattern, text)


def test_case() -> None:
    assert compile_glob("*.md", ignore_case=True).match("README.MD")
    assert not compile_glob("*.md").match("README.MD")
    assert has_uppercase("*.MD") and not has_uppercase("*.md")
