"""How long a resumed session's first request waits for the launcher's child (issue 38):
until its answer, at most about what converting in-process would take, then without it."""

from __future__ import annotations

import os
from typing import Any

import trio
import trio.testing

from pitrio.actors.session.resumed_prefix import LEAST_WAIT, WAIT_PER_MESSAGE, ResumedPrefix
from pitrio.messages.agent import UserMessage
from pitrio.messages.convert import ConvertedView
from tests.messages.stored_view import StoredView


class PipeJob:
    """A job answered by writing to its pipe; its result is ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.read, self.write = os.pipe()
        self.answer = answer
        self.closed = False
        self.taken = False

    def fileno(self) -> int:
        return -1 if self.closed else self.read

    def result(self) -> Any:
        self.taken = True
        self.close()
        return self.answer

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.read)
            os.close(self.write)


def view(count: int) -> ConvertedView:
    return ConvertedView(
        StoredView([UserMessage(content=str(i), timestamp=i) for i in range(count)])
    )


async def test_an_answer_in_time_is_put_on_the_view() -> None:
    job = PipeJob(answer="the prefix")
    prefix = ResumedPrefix(view(1000), job)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(prefix.settle)
        await trio.testing.wait_all_tasks_blocked()
        assert not job.taken  # waiting
        os.write(job.write, b"!")
    assert job.taken and prefix.view.offered == "the prefix"
    await prefix.settle()  # once: nothing more to wait for
    assert prefix.view.offered == "the prefix"


async def test_a_starved_child_is_given_up_after_its_patience(
    autojump_clock: trio.testing.MockClock,
) -> None:
    job = PipeJob(answer="late")
    prefix = ResumedPrefix(view(20_000), job)
    start = trio.current_time()
    await prefix.settle()
    waited = trio.current_time() - start
    assert waited == max(LEAST_WAIT, 20_000 * WAIT_PER_MESSAGE) == 0.2
    assert job.closed and not job.taken and prefix.view.offered is None


async def test_a_cancelled_wait_keeps_the_job_for_the_next_request() -> None:
    job = PipeJob(answer="the prefix")
    prefix = ResumedPrefix(view(10), job)
    with trio.CancelScope() as scope:
        scope.cancel()
        await prefix.settle()
    assert not job.closed and prefix.view.offered is None
    os.write(job.write, b"!")
    await prefix.settle()
    assert prefix.view.offered == "the prefix"


async def test_a_job_given_up_is_closed_and_waited_for_no_more() -> None:
    job = PipeJob(answer="never taken")
    prefix = ResumedPrefix(view(10), job)
    prefix.close()  # the session stopped before its first request
    assert job.closed and not job.taken
    with trio.fail_after(1):  # nothing left to wait for (a real clock: it must not block)
        await prefix.settle()
    assert prefix.view.offered is None
