"""Reading ``/proc``: state and start time of a process, zombies counted as ended."""

from __future__ import annotations

import os
import subprocess

from pitrio.actors.procfs import is_live, proc_stat, start_time


def test_a_running_process_a_zombie_and_a_reaped_one() -> None:
    me = proc_stat(os.getpid())
    assert me is not None and me[0] in (b"R", b"S")
    assert is_live(os.getpid())
    assert isinstance(start_time(os.getpid()), int)
    child = subprocess.Popen(["true"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped
    assert proc_stat(child.pid) is not None and not is_live(child.pid)  # a zombie
    assert start_time(child.pid) is not None  # the pid still names that process
    child.wait()
    assert proc_stat(child.pid) is None and not is_live(child.pid)
    assert start_time(child.pid) is None
