"""A resumed transcript's request prefix, made by the launcher's parsing child (issue 38).

The child that read and parsed the session file on the idle core (:mod:`pitrio._preparse`)
holds every line's message where it found it. Once the parent knows its model, it asks that
same child to run :func:`pitrio._prefix_chat.prepare_chat_prefix` (or, for the Anthropic
Messages API, :func:`pitrio._prefix_anthropic.prepare_anthropic_prefix`) over the base
transcript's messages (:func:`request_prefix`); the child does it on its core while the
parent answers ``get_state`` and ``get_messages``, and the parent takes the result at the
first prompt (:meth:`PrefixJob.result`, once :meth:`PrefixJob.fileno` is readable).

The protocol: the child is spawned with a request pipe (it reads) and an answer pipe (it
writes); the parent writes a request into the memory file after the records (from the next
page on: ``marshal``'s ``(facts, lines, inline, idle, kind)``, the line numbers as
``array("Q")``'s bytes) and sends its place (:data:`~pitrio._preparse.REQUEST`, 16 bytes: a
pipe takes them at once, so the caller never waits for the child) and closes the request
pipe. The child answers in the
memory file after the request (:func:`pitrio._preparse_child.serve`) and sends the answer's
place (:data:`~pitrio._preparse.ANSWER`), then exits. 48,000 line numbers are ~380 KB, the
answer ~8 MB: neither goes through a pipe.

Lifetimes (no zombie is left, and the child never keeps the parent from exiting: it holds
none of its streams):

* offer never taken, or taken from a child still parsing (caught up with): killed and reaped
  as before (:func:`~pitrio._preparse.discard`, :func:`~pitrio._preparse.discarded_after`,
  the end of :meth:`~pitrio._preparse.Offer.records`); no request can be made;
* offer taken whole: the child is kept, waiting (no CPU) for one request;
* a request made: :meth:`PrefixJob.close` (which :meth:`PrefixJob.result` calls) kills what
  is left of the child and reaps it, at once or by a daemon thread once it exits;
* no request to be made: :func:`~pitrio._preparse.release` kills and reaps it; at the
  parent's exit nothing is needed: the request pipe's end is the child's EOF, it exits and
  init reaps it. A kept child that died meanwhile is a zombie until one of those (or
  :func:`request_prefix`, which finds it dead) reaps it.

The memory the request and the answer take in the memory file is given back (the file cut
back to the records: the parent's mappings of them keep the file) once the child can no
longer write. Only the standard library is imported here (:mod:`pitrio._prefix_chat` or
:mod:`pitrio._prefix_anthropic` when a result is read).
"""

from __future__ import annotations

import contextlib
import marshal
import os
from array import array
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pitrio import _preparse as preparse
from pitrio._preparse import ANSWER, LENGTH, PAGE, REQUEST, write_all

if TYPE_CHECKING:
    from pitrio._prefix_anthropic import AnthropicPrefix
    from pitrio._prefix_chat import ChatPrefix

KINDS = ("chat", "anthropic")
"""What the child makes: a :class:`~pitrio._prefix_chat.ChatPrefix` (Chat Completions), an
:class:`~pitrio._prefix_anthropic.AnthropicPrefix` (Anthropic Messages)."""


def child_waits() -> bool:
    """Whether a child kept after its records were taken waits for a request (so
    :func:`request_prefix` may be worth its arguments)."""
    return bool(preparse._KEPT)


def request_prefix(
    facts: tuple[Any, ...],
    lines: Sequence[int],
    identity: preparse.Identity | None = None,
    inline: Mapping[int, bytes] | None = None,
    idle: bool = True,
    kind: str = "chat",
) -> PrefixJob | None:
    """Ask the child kept after its records were taken for the prefix of ``kind``
    (:data:`KINDS`: ``"chat"`` for Chat Completions, ``"anthropic"`` for Anthropic Messages)
    of the messages on ``lines`` (the file's 1-based line numbers, as ``StoredEntry.line``
    holds them, the base transcript's messages in order) for ``facts`` (a
    :class:`~pitrio._prefix_chat.ChatFacts` or
    :class:`~pitrio._prefix_anthropic.AnthropicFacts`, sent as a plain tuple). ``identity``,
    if given, is the file's the lines are of (:func:`~pitrio._preparse.identity`): a child that read
    another file is not asked. A message built by the parent (a compaction's summary, a
    custom message as the user's) has line 0 and its JSON text in ``inline``, by position.
    ``idle``: the child works under ``SCHED_IDLE`` (only on a core nothing else wants), so
    it may be starved on a busy machine: the caller bounds its wait.

    ``None`` at once when no child waits (none started, its offer not taken whole, killed,
    released, dead, or already asked); else the job, which the caller must close
    (:meth:`PrefixJob.close`, or :meth:`PrefixJob.result`). Never waits for the child."""
    numbers = array("Q", lines)
    try:
        offer = preparse._KEPT.pop()
    except IndexError:
        return None
    if (identity is not None and identity != offer.read) or not offer.alive():
        offer.close()
        return None
    memory, requests = offer.memory, offer.requests
    offer.requests = -1
    at = -(-offer.end // PAGE) * PAGE
    try:
        request = marshal.dumps((tuple(facts), numbers.tobytes(), dict(inline or {}), idle, kind))
        write_all(memory, request, at)
        # 16 bytes into an empty pipe: written whole, at once (atomic under PIPE_BUF); not
        # blocking all the same, whatever the child does.
        os.set_blocking(requests, False)
        if os.write(requests, REQUEST.pack(at, len(request))) != REQUEST.size:
            raise OSError("a short request")
    except (OSError, ValueError):
        os.close(requests)
        job = PrefixJob(offer, tuple(facts), len(numbers), at, kind)
        job.close()
        return None
    os.close(requests)  # one request: the child reads it, then the end of the pipe
    return PrefixJob(offer, tuple(facts), len(numbers), at, kind)


class PrefixJob:
    """A prefix request made to the child: :meth:`fileno` becomes readable when the answer is
    there or the child died; :meth:`result` reads it; :meth:`close` releases the descriptors
    and the child."""

    __slots__ = (
        "_answered",
        "_count",
        "_done",
        "_facts",
        "_kind",
        "_offer",
        "_prefix",
        "_records_end",
    )

    def __init__(
        self,
        offer: preparse.Offer,
        facts: tuple[Any, ...],
        count: int,
        records_end: int,
        kind: str = "chat",
    ) -> None:
        self._offer = offer
        self._kind = kind
        self._facts = facts
        self._count = count
        self._records_end = records_end
        """Where the request begins: the memory file is cut back to this."""
        self._prefix: ChatPrefix | AnthropicPrefix | None = None
        self._done = False
        self._answered = False
        """Whether the child's answer came: it writes nothing after it."""

    def fileno(self) -> int:
        """The answer pipe's read end: readable once the answer is in, or the child exited
        without one (to wait for with ``trio.lowlevel.wait_readable``). -1 once closed."""
        return self._offer.answers

    def result(self) -> ChatPrefix | AnthropicPrefix | None:
        """The child's prefix (:class:`~pitrio._prefix_chat.ChatPrefix`, or
        :class:`~pitrio._prefix_anthropic.AnthropicPrefix` for that kind), or ``None`` where it
        made none (it refused the first message, failed, died or was killed); then the job
        is closed. Returns at once once :meth:`fileno` is readable (waits for it before);
        later calls return the same."""
        if self._done:
            return self._prefix
        self._done = True
        offer = self._offer
        try:
            message = os.read(offer.answers, ANSWER.size) if offer.answers >= 0 else b""
            if len(message) == ANSWER.size:
                self._answered = True
                at, size = ANSWER.unpack(message)
                if size:
                    self._prefix = self._read(offer.memory, at, size)
        except (OSError, ValueError, TypeError, EOFError):
            self._prefix = None
        finally:
            self.close()
        return self._prefix

    def _read(self, memory: int, at: int, size: int) -> ChatPrefix | AnthropicPrefix | None:
        """The answer at ``at``: its ``marshal`` header, then each segment read into its own
        ``bytes`` (one copy, no joined buffer)."""
        (length,) = LENGTH.unpack(_read_all(memory, LENGTH.size, at))
        header = marshal.loads(_read_all(memory, length, at + LENGTH.size))
        facts, consumed, lengths, tail, items, *state = header
        if tuple(facts) != self._facts or not 0 < consumed <= self._count:
            return None
        start = at + LENGTH.size + length
        if start + sum(lengths) != at + size:
            return None
        segments = []
        for segment_length in lengths:
            segments.append(_read_all(memory, segment_length, start))
            start += segment_length
        if self._kind == "anthropic":
            from pitrio._prefix_anthropic import AnthropicFacts, AnthropicPrefix

            turns, newest_user, pending = state
            return AnthropicPrefix(
                facts=AnthropicFacts(*facts),
                consumed=consumed,
                segments=tuple(segments),
                tail=tail,
                items=items,
                turns=tuple(turns),
                newest_user=newest_user,
                pending=tuple(map(tuple, pending)),
            )
        from pitrio._prefix_chat import ChatFacts, ChatPrefix

        last_role, pending, images = state
        return ChatPrefix(
            facts=ChatFacts(*facts),
            consumed=consumed,
            segments=tuple(segments),
            tail=tail,
            items=items,
            last_role=last_role,
            pending=tuple(map(tuple, pending)),
            images=tuple(map(tuple, images)),
        )

    def close(self) -> None:
        """Close the answer pipe, give the request's and the answer's memory back (once the
        child can no longer write) and reap the child without waiting for it (a daemon
        thread waits if it has not exited yet). Idempotent; a later :meth:`result` is
        ``None`` if none was read."""
        self._done = True
        offer = self._offer
        if offer.answers < 0 and offer.memory < 0:
            return
        if offer.answers >= 0:
            os.close(offer.answers)
            offer.answers = -1
        memory, end = offer.memory, self._records_end
        offer.memory = -1

        def given_back() -> None:
            with contextlib.suppress(OSError):
                os.ftruncate(memory, end)  # the parent's mappings of the records stay
            os.close(memory)

        if self._answered:  # nothing more to come from the child: at once
            given_back()
            offer.stop()
        else:
            offer.stop(given_back)


def _read_all(memory: int, size: int, at: int) -> bytes:
    data = os.pread(memory, size, at)
    if len(data) != size:
        raise ValueError("a short answer")
    return data


__all__ = ["PrefixJob", "child_waits", "request_prefix"]
