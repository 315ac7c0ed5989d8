"""Output into a closed pipe ends the command quietly, as a Unix tool's does.

Each test starts ``pitrio`` with stdout (or stderr) the write end of a real pipe whose read
end is already closed, so the first write fails with ``EPIPE``: the process must exit 0
without a word on stderr (no ``BrokenPipeError`` traceback, no complaint at the final flush).
A broken pipe that is not about a standard stream stays an error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pitrio.transports import cli_pipe

TIMEOUT = 60


def run_into_closed(
    tmp_path: Path, *args: str, stream: str = "stdout"
) -> subprocess.CompletedProcess[bytes]:
    """Run ``pitrio args`` with ``stream`` a pipe nobody reads (the other one captured)."""
    home, agent, cwd = tmp_path / "home", tmp_path / "agent", tmp_path / "cwd"
    for folder in (home, agent, cwd):
        folder.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.update(HOME=str(home), PITRIO_AGENT_DIR=str(agent), OPENAI_API_KEY="k")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        streams = (
            {"stdout": write_end, "stderr": subprocess.PIPE}
            if stream == "stdout"
            else {"stdout": subprocess.PIPE, "stderr": write_end}
        )
        return subprocess.run(
            [sys.executable, "-m", "pitrio.transports.cli", *args],
            cwd=cwd,
            env=env,
            input=b"",
            timeout=TIMEOUT,
            check=False,
            **streams,  # type: ignore[call-overload]
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ("--list-models", "--all"),
        ("--list-models",),
        ("--help",),
        ("--version",),
        ("--model", "faux/faux-1", "--no-session", "-p", "hi"),
        ("--model", "faux/faux-1", "--no-session", "--mode", "json", "-p", "hi"),
        ("completion", "bash"),
        ("sessions", "--help"),
    ],
    ids=lambda a: " ".join(a),
)
def test_closed_stdout_ends_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = run_into_closed(tmp_path, *args)
    assert done.stderr == b""
    assert done.returncode == 0


def test_closed_stderr_keeps_the_failure_status(tmp_path: Path) -> None:
    done = run_into_closed(tmp_path, "--no-such-flag", stream="stderr")
    assert done.stdout == b""
    assert done.returncode == 1  # the usage error's status: only the text could not be shown
    done = run_into_closed(tmp_path, "--version", stream="stderr")
    assert done.stdout.startswith(b"pitrio ") and done.returncode == 0  # nothing on stderr


def test_the_list_is_written_where_a_reader_remains(tmp_path: Path) -> None:
    # The same command with a reader: the whole list arrives (the quiet exit is for EPIPE only).
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.update(HOME=str(home), PITRIO_AGENT_DIR=str(tmp_path / "agent"))
    done = subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", "--list-models", "--all"],
        env=env,
        input=b"",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == b""
    assert len(done.stdout.splitlines()) > 100


def test_a_broken_pipe_elsewhere_stays_an_error() -> None:
    def write_to_a_dead_child() -> int:
        raise BrokenPipeError(32, "Broken pipe")  # stdout and stderr still have readers

    with pytest.raises(BrokenPipeError):
        cli_pipe.quiet_exit_on_closed_output(write_to_a_dead_child)


def test_reader_gone_tells_a_closed_pipe_from_an_open_one() -> None:
    read_end, write_end = os.pipe()
    try:
        assert not cli_pipe.reader_gone(write_end)
        os.close(read_end)
        assert cli_pipe.reader_gone(write_end)
    finally:
        os.close(write_end)
