"""A resumed session's first request, its stored part converted on the idle core (issue 38).

The first turn after resuming a long session sends the whole stored transcript. The run
keeps it undecoded (a :class:`~pitrio.messages.convert.ConvertedView` over the store's view)
and the Chat Completions builder starts from the items :mod:`pitrio._prefix_chat` makes from
the stored JSON (the Anthropic Messages builder from :mod:`pitrio._prefix_anthropic`'s).
Where the launcher's parsing child still waits (``pitrio --mode rpc --session``,
:mod:`pitrio._preparse_prefix`), that conversion is asked of it at the start, once the model
is known, so it runs on the other core while ``get_state`` and ``get_messages`` are
answered: :func:`request_resumed_prefix` asks; the session's converter waits for the answer
before the first request (:meth:`ResumedPrefix.settle`) and hands it to the builder on the
view (``ConvertedView.offered``). Anything else (no child, another API, the child failing)
leaves the builder converting in-process, as it would without a child.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import trio

from pitrio.messages.agent import AgentMessage
from pitrio.messages.convert import ConvertedView
from pitrio.messages.model import Model

CHAT_API = "openai-completions"
"""An API whose request the child can build (:mod:`pitrio._prefix_chat`)."""
ANTHROPIC_API = "anthropic-messages"
"""Another (:mod:`pitrio._prefix_anthropic`), where the request is built encoded."""


WAIT_PER_MESSAGE = 10e-6
"""How long the first request waits for the child, per message: about what converting a
message costs here (7.5 us measured on 48,000). The child works under ``SCHED_IDLE`` and a
busy machine may starve it; past this wait the session converts in-process, so the first
request never costs more than about twice what it would without a child."""
LEAST_WAIT = 0.05


class PrefixAnswer(Protocol):
    """What :class:`ResumedPrefix` needs of a job (:class:`pitrio._preparse_prefix.PrefixJob`)."""

    def fileno(self) -> int:
        """Readable once the answer is in (or the child died); -1 once closed."""
        ...

    def result(self) -> Any:
        """The prefix or ``None``; closes the job."""
        ...

    def close(self) -> None:
        """Give the job up (idempotent)."""
        ...


class ResumedPrefix:
    """The conversion of a resumed transcript's stored part, and the child's job making its
    Chat Completions items. Used by the session's converter alone (its task)."""

    __slots__ = ("_job", "view")

    def __init__(self, view: ConvertedView, job: PrefixAnswer | None) -> None:
        self.view = view
        """The stored part converted as a view: the converter uses it for that part."""
        self._job = job

    async def settle(self) -> None:
        """Wait for the child's answer, if one is awaited, and put it on the view (once), at
        most about what converting here would take (:data:`WAIT_PER_MESSAGE`): then the
        child is given up and the provider converts in-process. Cancellable: a cancelled
        wait (an aborted run) leaves the job for the next request."""
        job = self._job
        if job is None:
            return
        patience = max(LEAST_WAIT, len(self.view) * WAIT_PER_MESSAGE)
        fd = job.fileno()
        if fd >= 0:
            with trio.move_on_after(patience) as waited:
                await trio.lowlevel.wait_readable(fd)
            if waited.cancelled_caught:
                self._job = None
                job.close()  # no task waits on it any more: closing is safe
                return
        self._job = None
        self.view.offered = job.result()  # closes the job: the child is reaped

    def close(self) -> None:
        """Give the job up (the session ends before its first request)."""
        job, self._job = self._job, None
        if job is not None:
            job.close()


def request_resumed_prefix(
    messages: Sequence[AgentMessage], model: Model, *, block_images: bool
) -> ResumedPrefix | None:
    """Where the launcher's child waits and ``model`` speaks Chat Completions or Anthropic
    Messages (threaded or not: a threaded session's first request is built from the prefix
    too, ``anthropic_plain``): the view of a resumed transcript's stored part (``messages``,
    the store's context view), the child asked for its items; else ``None`` (nothing asked,
    nothing made)."""
    from pitrio import _preparse_prefix

    if (
        model.api not in (CHAT_API, ANTHROPIC_API)
        or not _preparse_prefix.child_waits()
        or not hasattr(messages, "stored_roles")
        or not len(messages)
    ):
        return None  # the converter makes its view at the first request, as it needs it
    facts: Any
    if model.api == ANTHROPIC_API:
        from pitrio._prefix_anthropic import facts_for

        kind, facts = "anthropic", facts_for(model, block_images=block_images)
    else:
        from pitrio.actors.model_router.providers.openai_compat import compat_of, facts_of

        kind, facts = "chat", facts_of(model, compat_of(model), block_images=block_images)
    view = ConvertedView(messages, block_images)
    job = _preparse_prefix.request_prefix(
        tuple(facts), view.stored_lines(), inline=view.built_texts(), kind=kind
    )
    return ResumedPrefix(view, job)


__all__ = ["ResumedPrefix", "request_resumed_prefix"]
