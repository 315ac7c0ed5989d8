"""The fixture tests find ``shared/`` from a clone made anywhere."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.shared_dir import find_shared_dir


def clone(source: Path, target: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(source), str(target)], check=True)
    return target


def test_a_clone_elsewhere_finds_shared_beside_its_origin(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    (workspace / "shared").mkdir(parents=True)
    origin = workspace / "main"
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(origin),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    elsewhere = clone(origin, tmp_path / "elsewhere" / "ci-check")
    assert find_shared_dir(origin, {}) == workspace / "shared"  # beside the checkout
    assert find_shared_dir(elsewhere, {}).resolve() == (workspace / "shared").resolve()
    named = tmp_path / "named"
    assert find_shared_dir(elsewhere, {"PITRIO_SHARED_DIR": str(named)}) == named
    # Nothing anywhere: the place beside the checkout, which the fixture tests then report.
    lone = tmp_path / "lone" / "repo"
    subprocess.run(["git", "init", "-q", str(lone)], check=True)
    assert find_shared_dir(lone, {}) == lone.parent / "shared"
