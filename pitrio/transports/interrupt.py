"""SIGINT in the one-session modes (RPC, print, JSON): end as pi does, killed by the signal.

pi installs no SIGINT handler in these modes, so Node dies of the signal (a parent sees exit
by signal 2). pitrio does the same after a clean shutdown of the session (run aborted, store
flushed): the signal cancels the work (never the session's actors), the mode returns
:data:`INTERRUPTED`, and :func:`exit_code` re-raises the signal with its default action once
trio has returned. Outside the receiver (before trio starts, after it ends) SIGINT has its
default action too (:func:`default_sigint`): Python's ``KeyboardInterrupt``, and the traceback
or exception group it would print, never comes up.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import trio

INTERRUPTED = -signal.SIGINT
"""The code a mode returns when SIGINT ended it (negative: "killed by", as ``subprocess``)."""


def default_sigint() -> None:
    """Give SIGINT its default action (trio then installs no ``KeyboardInterrupt`` handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def exit_code(code: int) -> int:
    """``code`` unchanged when it is an exit status; for a negative one, die by that signal.

    The handler is set back to the default before the process signals itself, so it ends
    as if it had had no handler; 128 + the signal is returned only if it somehow survives."""
    if code >= 0:
        return code
    signum = -code
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum


async def cancel_on_signal(signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
    """Cancel ``scope`` at the first signal of ``signals`` (the work it holds, not the
    session's actors: they must live on to abort the run and flush the store)."""
    async for _ in signals:
        scope.cancel()
        return
