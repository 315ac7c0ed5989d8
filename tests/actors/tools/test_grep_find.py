"""The grep and find tools (spec §5.6, §5.7): the pure-Python search, and rg/fd when present.

``rg`` and ``fd`` are not installed here; their paths are checked against stand-in programs
that record their arguments and print canned output, so our parsing, relativising and early
stop are exercised with real processes.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import trio

from pitrio.actors.tool_executor.tools import grep as grep_module
from pitrio.actors.tool_executor.tools.find import create_find_tool, effective_pattern
from pitrio.actors.tool_executor.tools.grep import (
    GrepQuery,
    Match,
    create_grep_tool,
    format_matches,
)
from pitrio.errors import ToolError

from .support import alive_with_marker, run_one, text


def make(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    make(
        tmp_path,
        {
            ".gitignore": "build/\n*.log\n",
            "src/app.py": (
                "def greet(name):\n    return 'Hello, ' + name\n\n\nprint(greet('world'))\n"
            ),
            "src/util.py": "import os\nHELLO = 'hello'\n",
            "README.md": "# Demo\nhello there\n",
            "build/out.py": "hello from build\n",
            "debug.log": "hello log\n",
            ".hidden/h.txt": "hello hidden\n",
            "bin.dat": b"hello\0binary",
            "crlf.txt": "hello\r\nworld\r\n",
        },
    )
    return tmp_path


async def grep(root: Path, **args: object) -> tuple[str, object]:
    result, _ = await run_one(create_grep_tool(str(root), use_ripgrep=False), dict(args))
    return text(result), result.details


async def test_grep_matches_with_relative_paths(tree: Path) -> None:
    out, details = await grep(tree, pattern="hello")
    assert out.split("\n") == [
        ".hidden/h.txt:1: hello hidden",
        "README.md:2: hello there",
        "crlf.txt:1: hello",
        "src/util.py:2: HELLO = 'hello'",
    ]
    assert details is None


async def test_grep_options(tree: Path) -> None:
    assert (await grep(tree, pattern="HELLO", path="src"))[0] == "util.py:2: HELLO = 'hello'"
    out, _ = await grep(tree, pattern="hello", ignoreCase=True, glob="*.py")
    assert out == "src/app.py:2:     return 'Hello, ' + name\nsrc/util.py:2: HELLO = 'hello'"
    assert (await grep(tree, pattern="greet(", literal=True))[0] == (
        "src/app.py:1: def greet(name):\nsrc/app.py:5: print(greet('world'))"
    )
    assert (await grep(tree, pattern="world", path="src/app.py"))[0] == (
        "app.py:5: print(greet('world'))"
    )
    assert (await grep(tree, pattern="zzz"))[0] == "No matches found"
    out, _ = await grep(tree, pattern="hello", glob="!src")
    assert "src/" not in out and "README.md" in out


async def test_grep_context_lines(tree: Path) -> None:
    out, _ = await grep(tree, pattern="return", context=1)
    assert out == (
        "src/app.py-1- def greet(name):\nsrc/app.py:2:     return 'Hello, ' + name\nsrc/app.py-3- "
    )


async def test_grep_limit_and_notices(tmp_path: Path) -> None:
    make(tmp_path, {"many.txt": "\n".join(["match me"] * 10), "long.txt": "match " + "x" * 600})
    out, details = await grep(tmp_path, pattern="match", path="many.txt", limit=3)
    assert out.endswith("\n\n[3 matches limit reached. Use limit=6 for more, or refine pattern]")
    assert details == {"matchLimitReached": 3}
    out, details = await grep(tmp_path, pattern="match", path="long.txt")
    assert out == (
        "long.txt:1: match " + "x" * 494 + "... [truncated]\n\n"
        "[Some lines truncated to 500 chars. Use read tool to see full lines]"
    )
    assert details == {"linesTruncated": True}


async def test_grep_byte_limit(tmp_path: Path) -> None:
    make(tmp_path, {"f.txt": "\n".join(f"hit {'y' * 400}" for _ in range(200))})
    out, details = await grep(tmp_path, pattern="hit", limit=500)
    assert out.endswith("\n\n[50.0KB limit reached]")
    assert details["truncation"]["truncated"] is True  # type: ignore[index]


async def test_grep_errors(tree: Path) -> None:
    with pytest.raises(ToolError, match=f"^Path not found: {tree}/nope$"):
        await grep(tree, pattern="x", path="nope")
    with pytest.raises(ToolError, match=r"^regex parse error:"):
        await grep(tree, pattern="(unclosed")


async def test_grep_walk_reads_regular_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A FIFO (or a device: a walk of "/" meets /dev/console) would block the read for ever;
    # rg searches only the regular files a walk finds. Opening one here fails instead.
    make(tmp_path, {"a.txt": "hello\n"})
    os.mkfifo(tmp_path / "pipe")

    def checked_open(path: str, *args: object, **kwargs: object) -> object:
        assert not stat.S_ISFIFO(os.stat(path).st_mode), f"opened the FIFO {path}"
        return open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(grep_module, "open", checked_open, raising=False)
    out, _ = await grep(tmp_path, pattern="hello")
    assert out == "a.txt:1: hello"


def test_format_matches_with_unreadable_file() -> None:
    query = GrepQuery(pattern="x", root="/r", is_dir=True, context=2)
    out, _ = format_matches(
        query, [Match("/r/a.txt", 3, "x")], limit_reached=False, lines_of=lambda _: []
    )
    assert out == "a.txt:3: (unable to read file)"


async def find(root: Path, **args: object) -> tuple[str, object]:
    result, _ = await run_one(create_find_tool(str(root), use_fd=False), dict(args))
    return text(result), result.details


async def test_find_by_name_and_by_path(tree: Path) -> None:
    assert (await find(tree, pattern="*.py"))[0] == "src/app.py\nsrc/util.py"
    assert (await find(tree, pattern="src/*.py"))[0] == "src/app.py\nsrc/util.py"
    assert (await find(tree, pattern="*.PY"))[0] == "No files found matching pattern"
    assert (await find(tree, pattern="*.md"))[0] == "README.md"
    assert (await find(tree, pattern="s*"))[0] == "src/"
    assert (await find(tree, pattern="*.txt", path="src"))[0] == "No files found matching pattern"
    assert effective_pattern("a/b") == ("**/a/b", True)
    assert effective_pattern("/abs/*.py") == ("/abs/*.py", True)
    assert effective_pattern("**") == ("**", False)


async def test_find_includes_hidden_and_honours_gitignore(tree: Path) -> None:
    out, _ = await find(tree, pattern="*")
    assert out.split("\n") == [
        ".gitignore",
        ".hidden/",
        ".hidden/h.txt",
        "README.md",
        "bin.dat",
        "crlf.txt",
        "src/",
        "src/app.py",
        "src/util.py",
    ]


async def test_find_limit_and_errors(tree: Path) -> None:
    out, details = await find(tree, pattern="*", limit=2)
    assert out == (
        ".gitignore\n.hidden/\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
    )
    assert details == {"resultLimitReached": 2}
    with pytest.raises(ToolError) as caught:
        await find(tree, pattern="*", path="README.md")
    assert str(caught.value) == f"[fd error]: Search path '{tree}/README.md' is not a directory."


# -- rg and fd ------------------------------------------------------------------------------

STAND_IN = """#!{python}
import json, os, sys, time
with open(os.environ["STAND_IN_ARGS"], "w") as f:
    json.dump(sys.argv[1:], f)
sys.stdout.write(open(os.environ["STAND_IN_OUT"]).read())
sys.stdout.flush()
sys.stderr.write(os.environ.get("STAND_IN_ERR", ""))
if os.environ.get("STAND_IN_HANG"):
    time.sleep(float(os.environ["STAND_IN_HANG"]))
sys.exit(int(os.environ.get("STAND_IN_CODE", "0")))
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("rg", "fd"):
        program = bin_dir / name
        program.write_text(STAND_IN.format(python=sys.executable))
        program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STAND_IN_ARGS", str(tmp_path / "args.json"))
    monkeypatch.setenv("STAND_IN_OUT", str(tmp_path / "out.txt"))
    return tmp_path


def rg_match(path: Path, line: int, text_: str) -> str:
    return json.dumps(
        {
            "type": "match",
            "data": {"path": {"text": str(path)}, "line_number": line, "lines": {"text": text_}},
        }
    )


async def test_ripgrep_output_is_parsed_and_stopped_at_the_limit(
    stand_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = stand_in / "proj"
    make(root, {"a.txt": "one\ntwo\n"})
    lines = [json.dumps({"type": "begin"})] + [
        rg_match(root / "a.txt", i, f"hit {i}\r\n") for i in range(1, 6)
    ]
    (stand_in / "out.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("STAND_IN_HANG", "30")  # must be stopped, not waited for
    tool = create_grep_tool(str(root), use_ripgrep=True)
    with trio.fail_after(10):
        result, _ = await run_one(
            tool, {"pattern": "hit", "limit": 2, "ignoreCase": True, "glob": "*.txt"}
        )
    assert text(result) == (
        "a.txt:1: hit 1\na.txt:2: hit 2\n\n"
        "[2 matches limit reached. Use limit=4 for more, or refine pattern]"
    )
    args = json.loads((stand_in / "args.json").read_text())
    assert args == [
        "--json", "--line-number", "--color=never", "--hidden", "--ignore-case",
        "--glob", "*.txt", "--", "hit", str(root),
    ]  # fmt: skip
    assert not alive_with_marker(str(root))  # the stand-in's command line names the root


async def test_ripgrep_failure(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (stand_in / "out.txt").write_text("")
    monkeypatch.setenv("STAND_IN_CODE", "2")
    monkeypatch.setenv("STAND_IN_ERR", "regex parse error: oops\n")
    tool = create_grep_tool(str(stand_in), use_ripgrep=True)
    with pytest.raises(ToolError, match=r"^regex parse error: oops$"):
        await run_one(tool, {"pattern": "("})
    monkeypatch.setenv("STAND_IN_CODE", "1")
    result, _ = await run_one(tool, {"pattern": "x"})
    assert text(result) == "No matches found"


async def test_fd_output_is_relativised(stand_in: Path) -> None:
    root = stand_in / "proj"
    root.mkdir()
    (stand_in / "out.txt").write_text(f"{root}/src/\n{root}/src/a.py\n")
    tool = create_find_tool(str(root), use_fd=True)
    result, _ = await run_one(tool, {"pattern": "src/**", "limit": 5})
    assert text(result) == "src/\nsrc/a.py"
    args = json.loads((stand_in / "args.json").read_text())
    assert args == [
        "--glob", "--color=never", "--hidden", "--no-require-git", "--max-results", "5",
        "--full-path", "--", "**/src/**", str(root),
    ]  # fmt: skip


async def test_missing_native_tools_when_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        ToolError, match=r"^ripgrep \(rg\) is not available and could not be downloaded$"
    ):
        await run_one(create_grep_tool(str(tmp_path), use_ripgrep=True), {"pattern": "x"})
    with pytest.raises(ToolError, match=r"^fd is not available and could not be downloaded$"):
        await run_one(create_find_tool(str(tmp_path), use_fd=True), {"pattern": "x"})
