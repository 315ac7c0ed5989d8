"""The ignore-aware walk behind the pure-Python grep and find."""

from __future__ import annotations

import os
from pathlib import Path

from pitrio.actors.tool_executor.tools.walk import Walker, find_git_root


def make(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def rels(root: Path, **kwargs: object) -> list[str]:
    return [e.rel + ("/" if e.is_dir else "") for e in Walker(str(root), **kwargs)]  # type: ignore[arg-type]


def test_sorted_depth_first_with_hidden_files(tmp_path: Path) -> None:
    make(tmp_path, {"b.txt": "", "a/z.txt": "", ".hidden": "", "a/b/c.txt": ""})
    assert rels(tmp_path, require_git=False) == [
        ".hidden",
        "a/",
        "a/b/",
        "a/b/c.txt",
        "a/z.txt",
        "b.txt",
    ]


def test_gitignore_nested_and_negated(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "*.log\nbuild/\n",
            "keep.txt": "",
            "x.log": "",
            "build/out.txt": "",
            "sub/.gitignore": "!important.log\nlocal.txt\n",
            "sub/important.log": "",
            "sub/other.log": "",
            "sub/local.txt": "",
        },
    )
    assert rels(tmp_path, require_git=False) == [
        ".gitignore",
        "keep.txt",
        "sub/",
        "sub/.gitignore",
        "sub/important.log",
    ]


def test_require_git(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "*.log\n", "a.log": "", ".ignore": "b.txt\n", "b.txt": ""})
    # Outside a repository .gitignore does not count for rg, .ignore always does.
    assert rels(tmp_path, require_git=True) == [".gitignore", ".ignore", "a.log"]
    (tmp_path / ".git").mkdir()
    assert rels(tmp_path, require_git=True) == [".gitignore", ".ignore"]
    assert find_git_root(str(tmp_path / "deep" / "er")) == str(tmp_path)


def test_parent_gitignore_up_to_the_repository_root(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "secret*\n", "pkg/secret.txt": "", "pkg/open.txt": ""})
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("excluded.txt\n")
    make(tmp_path, {"pkg/excluded.txt": ""})
    assert rels(tmp_path / "pkg", require_git=True) == ["open.txt"]


def test_git_dir_symlinks_and_skip(tmp_path: Path) -> None:
    make(tmp_path, {"real/f.txt": "", ".git/config": "", "node_modules/m.js": ""})
    os.symlink(tmp_path / "real", tmp_path / "link")
    entries = {e.rel: e for e in Walker(str(tmp_path), require_git=False)}
    assert ".git" not in entries and ".git/config" not in entries
    assert entries["link"].is_symlink and not entries["link"].is_dir
    assert "link/f.txt" not in entries
    skipped = rels(tmp_path, require_git=False, skip_dir=lambda rel: rel == "node_modules")
    assert "node_modules/" not in skipped and "node_modules/m.js" not in skipped


def test_cancelled_walk_stops(tmp_path: Path) -> None:
    make(tmp_path, {f"d{i}/f.txt": "" for i in range(5)})
    seen: list[str] = []
    for entry in Walker(str(tmp_path), require_git=False, cancelled=lambda: bool(seen)):
        seen.append(entry.rel)
    assert seen == ["d0"]
