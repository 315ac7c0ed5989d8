"""``pitrio completion bash|zsh`` (issue 24): the script is generated from the real parsers,
and bash, sourcing it, completes subcommands, options and their choices."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pitrio.transports.cli import SUBCOMMAND_ENTRIES

TIMEOUT = 60


def pitrio(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.update(HOME=str(tmp_path), PITRIO_AGENT_DIR=str(tmp_path / "agent"))
    return subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", *args],
        cwd=tmp_path,
        env=env,
        input=b"",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for ``words`` (the last one being completed), with the script sourced."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on PATH")
    program = (
        f"source {script}\n"
        'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))\n'
        "_shtab_pitrio\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [bash, "--norc", "-c", program, "bash", *words],
        capture_output=True,
        timeout=TIMEOUT,
        check=True,
    )
    return done.stdout.decode().split()


@pytest.fixture
def bash_script(tmp_path: Path) -> Path:
    result = pitrio(tmp_path, "completion", "bash")
    assert (result.returncode, result.stderr) == (0, b"")
    path = tmp_path / "pitrio.bash"
    path.write_bytes(result.stdout)
    return path


def test_bash_completes_the_subcommands(bash_script: Path) -> None:
    assert complete(bash_script, "pitrio", "se") == ["serve", "sessions"]
    offered = complete(bash_script, "pitrio", "")
    assert set(SUBCOMMAND_ENTRIES) <= set(offered)


def test_bash_completes_options_and_their_choices(bash_script: Path) -> None:
    assert complete(bash_script, "pitrio", "--mo") == ["--mode", "--model", "--models"]
    assert complete(bash_script, "pitrio", "--mode", "") == ["text", "json", "rpc"]
    # pi 1.6.0 added the level max.
    assert complete(bash_script, "pitrio", "--thinking", "m") == ["minimal", "medium", "max"]
    assert complete(bash_script, "pitrio", "serve", "--faux") == ["--faux-chunk-delay"]
    assert complete(bash_script, "pitrio", "sessions", "") == [
        "check",
        "repair",
        "list",
        "export",
        "import",
    ]
    assert complete(bash_script, "pitrio", "completion", "") == ["bash", "zsh"]


def test_zsh_script(tmp_path: Path) -> None:
    result = pitrio(tmp_path, "completion", "zsh")
    assert result.returncode == 0
    script = result.stdout.decode()
    assert script.startswith("#compdef pitrio")
    for name in SUBCOMMAND_ENTRIES:
        assert name in script
    assert "--faux-chunk-delay" in script


def test_an_unknown_shell_is_a_one_line_error(tmp_path: Path) -> None:
    result = pitrio(tmp_path, "completion", "fish")
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr == b"Error: argument shell: invalid value 'fish' (choose from bash, zsh)\n"
