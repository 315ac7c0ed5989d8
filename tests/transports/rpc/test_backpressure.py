"""Memory of ``pitrio --mode rpc`` stays bounded when the client stops reading (issue 21).

A real process over real pipes; its peak RSS (``VmHWM`` from ``/proc``) must stay under the
bound stated in DESIGN-NOTES ("Issue 21: RPC input and back-pressure"). Nothing here asserts
a time: the client stops reading until it has sent everything or stdin stopped moving (the
pipe full and the process not draining it), then reads, and the peak is what it is.
"""

from __future__ import annotations

import array
import fcntl
import os
import resource
import subprocess
import sys
import termios
import threading
from pathlib import Path

import orjson
import pytest

from tests.transports.rpc.harness import Dirs, environment

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")

RSS_BOUND_MB = 200
"""The stated bound (DESIGN-NOTES): the process's peak RSS with a client that does not read."""
QUIET_SECONDS = 5.0
"""How long the client waits, not reading, for stdin to move before it reads (not a bound)."""
IDLE_SECONDS = 1.0
"""A shorter wait that also ends it: stdin did not move although input waited in the pipe, and
the process slept all along without using any CPU (a process that reads is woken by that input,
so it is not reading by choice; one starved of CPU by a busy machine is runnable, not asleep)."""


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _stat_fields(pid: int) -> list[str]:
    # After the command name in parentheses (which may hold spaces): state, ppid, ...
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_ticks(pid: int) -> int:
    """The process's user and system CPU time so far, in clock ticks."""
    fields = _stat_fields(pid)
    return int(fields[11]) + int(fields[12])


def process_state(pid: int) -> str:
    """The process's state letter (``R`` running or runnable, ``S`` asleep, ...)."""
    return _stat_fields(pid)[0]


ADDRESS_SPACE = 3 << 30
"""The child's address-space limit: code that grows without bound fails (MemoryError) instead
of taking the machine's memory (the test then fails on a dead process)."""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def start(dirs: Dirs, *args: str, script: str = "fixture-rules") -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pitrio.transports.cli", "--mode", "rpc", *args]
    return subprocess.Popen(
        command,
        cwd=dirs.cwd,
        env=environment(dirs, {"PITRIO_FAUX_SCRIPT": script}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=_limit_memory,
    )


class Sender(threading.Thread):
    """Writes ``data`` to the process's stdin (blocking when the pipe is full)."""

    def __init__(self, process: subprocess.Popen[bytes], data: bytes) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.data = data
        self.sent = 0
        self.moved = threading.Event()

    def run(self) -> None:
        assert self.process.stdin is not None
        fd = self.process.stdin.fileno()
        view = memoryview(self.data)
        try:
            while self.sent < len(view):
                self.sent += os.write(fd, view[self.sent : self.sent + 65536])
                self.moved.set()
        except BrokenPipeError:
            pass

    def wait_stuck(self) -> None:
        """Return when everything is sent, or stdin did not move for QUIET_SECONDS, or for
        IDLE_SECONDS with input waiting and the process asleep throughout (``idle``)."""
        quiet = 0.0
        while self.is_alive():
            self.moved.clear()
            before = cpu_ticks(self.process.pid)
            if self.moved.wait(IDLE_SECONDS):
                quiet = 0.0
                continue
            quiet += IDLE_SECONDS
            if quiet >= QUIET_SECONDS or self.idle(before):
                return

    def idle(self, ticks_before: int) -> bool:
        """Whether input waits in the pipe while the process sleeps, having used no CPU since
        ``ticks_before``."""
        assert self.process.stdin is not None
        waiting = array.array("i", [0])
        fcntl.ioctl(self.process.stdin.fileno(), termios.FIONREAD, waiting)
        state = process_state(self.process.pid)
        return waiting[0] > 0 and state == "S" and cpu_ticks(self.process.pid) == ticks_before


def read_lines(process: subprocess.Popen[bytes], count: int) -> list[dict[str, object]]:
    """Read ``count`` lines of stdout."""
    assert process.stdout is not None
    return [orjson.loads(process.stdout.readline()) for _ in range(count)]


def test_a_flood_of_commands_from_a_client_that_does_not_read(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    process = start(dirs, "--model", "faux/faux-1")
    try:
        # 1.2 MB of commands: the process reads 128 KB of them before it stops (pipe and
        # reader); the code before the fix read them all and peaked near 300 MB, over the bound.
        lines = 40_000
        flood = b"".join(b'{"id":%d,"type":"get_state"}\n' % i for i in range(lines))
        sender = Sender(process, flood)
        sender.start()
        sender.wait_stuck()
        # Before the fix every line was read at once and waited as a task with its response.
        assert sender.sent < len(flood), "the process read the whole flood without answering"
        responses = read_lines(process, lines)  # reading again lets everything through
        sender.join()
        assert sorted(r["id"] for r in responses) == list(range(lines))  # type: ignore[type-var]
        assert all(r["success"] for r in responses)
        peak = peak_rss_mb(process.pid)
        print(f"peak RSS {peak:.0f} MB")
        assert peak < RSS_BOUND_MB, f"peak RSS {peak:.0f} MB"
    finally:
        process.kill()
        process.wait()


def test_a_long_full_form_reply_to_a_client_that_does_not_read(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    # faux/echo repeats the prompt: a 1 MB reply in 12-character deltas, each full-form
    # message_update carrying the whole partial message twice.
    process = start(dirs, "--model", "faux/echo", script="")  # the echoing default
    try:
        text = ("0123456789abcdef" * 65536)[: 1 << 20]
        commands = [
            {"id": "f", "type": "set_event_format", "updates": "full"},
            {"id": "p", "type": "prompt", "message": text},
        ]
        assert process.stdin is not None
        process.stdin.write(b"".join(orjson.dumps(c) + b"\n" for c in commands))
        process.stdin.flush()
        # Not reading: the run streams on (merging its updates) and writes its reply to the
        # session file; wait for that, then look at the peak.
        sessions = dirs.agent / "sessions"
        while True:
            files = list(sessions.rglob("*.jsonl")) if sessions.exists() else []
            done = [
                f
                for f in files
                if any(
                    b'"role":"assistant"' in line and b'"stopReason"' in line
                    for line in f.read_bytes().splitlines()
                )
            ]
            if done or process.poll() is not None:
                break
            threading.Event().wait(0.2)
        assert process.poll() is None, "the process died"
        peak = peak_rss_mb(process.pid)
        print(f"peak RSS {peak:.0f} MB")
        assert peak < RSS_BOUND_MB, f"peak RSS {peak:.0f} MB"
    finally:
        process.kill()
        process.wait()
