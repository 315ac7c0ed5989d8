"""Path rules (spec §5.1): ``@``, Unicode spaces, ``~``, relative paths, read fallbacks."""

from __future__ import annotations

from pitrio.actors.tool_executor.tools.paths import (
    expand_path,
    read_path_candidates,
    resolve_read_path,
    resolve_to_cwd,
)


def test_expand() -> None:
    assert expand_path("@src/a.py") == "src/a.py"
    assert expand_path("@@x") == "@x"  # only one
    assert expand_path("my\u00a0file\u2003name") == "my file name"
    assert expand_path("~", home="/home/u") == "/home/u"
    assert expand_path("~/notes", home="/home/u") == "/home/u/notes"
    assert expand_path("~other/x", home="/home/u") == "~other/x"


def test_resolve() -> None:
    assert resolve_to_cwd("a/b.txt", "/work") == "/work/a/b.txt"
    assert resolve_to_cwd("../x", "/work/sub") == "/work/x"
    assert resolve_to_cwd("dir/", "/work") == "/work/dir"
    assert resolve_to_cwd("/abs/path", "/work") == "/abs/path"
    assert resolve_to_cwd("@/abs", "/work") == "/abs"
    assert resolve_to_cwd("~/f", "/work", home="/h") == "/h/f"
    assert resolve_to_cwd("", "/work") == "/work"


def test_read_fallbacks() -> None:
    screenshot = "/s/Screenshot 2024-01-01 at 10.00.00 AM.png"
    candidates = read_path_candidates(screenshot)
    assert candidates[0] == "/s/Screenshot 2024-01-01 at 10.00.00\u202fAM.png"
    assert read_path_candidates("/x/it's.txt")[-1] == "/x/it\u2019s.txt"
    existing = {"/x/it\u2019s.txt"}
    assert resolve_read_path("it's.txt", "/x", existing.__contains__) == "/x/it\u2019s.txt"
    assert resolve_read_path("gone.txt", "/x", existing.__contains__) == "/x/gone.txt"
    nfd = "/x/cafe\u0301.txt"
    assert resolve_read_path("café.txt", "/x", {nfd}.__contains__) == nfd
