"""Anthropic message threads as pi 1.6.0 uses them, sans-IO: when a request joins a thread,
what it sends, how a rejection is answered, and where the next request may continue.

A thread lets a request send only the messages its server has not seen yet: the first request
of a session says ``thread: {"type": "create"}``; once a reply has come back cleanly, the next
request whose transcript still begins with everything the server holds sends only the newer
messages, without ``system`` and ``tools``, and ``thread: {"type": "continue",
"previous_message_id": <the reply's id>}``. Every such request (and every request of a session
threads apply to, even after they were turned off) names the ``message-threads-2026-08-12``
beta.

Threads apply when the model's ``compat.supportsMessageThreads`` says so (default: the base
URL is on ``api.anthropic.com``), caching is on and the request has a session id. A session's
state (:class:`ThreadStates`) is one of: nothing known (the next request creates a thread), a
:class:`ThreadMark` (the next matching request continues it; used once), or :data:`OFF` (the
endpoint refused threads: plain requests from then on).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
import orjson

# Re-exported: its home is the light module a session's start may import.
from pitrio._prefix_anthropic import threads_supported as threads_supported
from pitrio.actors.model_router.providers.convert import escape_surrogates
from pitrio.messages.model import Model

MESSAGE_THREADS_BETA = "message-threads-2026-08-12"
"""The ``anthropic-beta`` feature every request of a threaded session names."""
MAX_THREAD_SESSIONS = 10_000
"""Sessions whose state is kept; the least recently updated is dropped beyond this (its thread
has most likely expired on the server; at worst its next request starts a new one)."""
NEW_THREAD_CODES = frozenset(
    {
        "thread_not_found",
        "thread_already_continued",
        "thread_continue_in_flight",
        "thread_fingerprint_mismatch",
    }
)
"""``error.details.error_code`` values of a refused ``continue`` that a new thread mends."""
UNSUPPORTED_CODE = "thread_unsupported_request"
"""The code of a request the endpoint cannot thread at all."""

OFF: Literal["off"] = "off"
"""A session whose endpoint refused threads: no ``thread`` field from then on."""

Rejection = Literal["new-thread", "unsupported"]

# The request fields a thread keeps fixed: a `continue` leaves out system and tools (the
# server keeps the thread's own), so only this check notices they changed.
_FIXED_FIELDS = ("model", "system", "tools", "thinking", "output_config", "tool_choice")
_FIXED_LATER = ("fallbacks",)


@attrs.frozen(kw_only=True)
class ThreadMark:
    """Where a session's next request may continue: after ``reply_id``, when its first
    ``prefix_count`` messages hash to ``prefix_hash`` with the same fixed settings."""

    prefix_count: int
    prefix_hash: str
    reply_id: str


ThreadState = ThreadMark | Literal["off"]


class ThreadStates:
    """Every session's thread state, oldest update first, at most ``limit`` sessions."""

    def __init__(self, limit: int = MAX_THREAD_SESSIONS) -> None:
        self.limit = limit
        self._states: dict[str, ThreadState] = {}

    def get(self, session_id: str) -> ThreadState | None:
        """The session's state (``None``: nothing known)."""
        return self._states.get(session_id)

    def set(self, session_id: str, state: ThreadState) -> None:
        """Record ``state`` as the session's newest (dropping the stalest beyond the limit)."""
        self._states.pop(session_id, None)  # re-inserted: dict order is update order
        self._states[session_id] = state
        while len(self._states) > self.limit:
            del self._states[next(iter(self._states))]

    def forget(self, session_id: str | None = None) -> None:
        """Drop one session's state (a session that ended), or every one (``None``)."""
        if session_id is None:
            self._states.clear()
        else:
            self._states.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._states)


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def _normalized(value: Any) -> Any:
    # Cache markers move (the newest user turn carries one, the turn that had it loses it), so
    # they do not count; a string content means the same as one text block. (Exact types are
    # tested first: the ABC check is most of the walk's time on a long first request.)
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return value
    if kind is dict or isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "cache_control":
                continue
            if key == "content" and isinstance(item, str):
                out[key] = [{"type": "text", "text": item}]
            else:
                out[key] = _normalized(item)
        return out
    if kind is list or isinstance(value, list | tuple):
        return [_normalized(item) for item in value]
    return value


CHAIN_START = bytes(32)
"""The fingerprint chain of no turns (see :func:`chain_link`)."""


def _canonical(value: Any) -> bytes:
    # Keys sorted, so equal turns encode alike whatever their dict order.
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as refused:
        if "surrogates" not in str(refused):
            raise
        return orjson.dumps(escape_surrogates(value), option=orjson.OPT_SORT_KEYS)


def chain_link(previous: bytes, turn: Any) -> bytes:
    """The fingerprint chain after one more turn: the digest of the chain so far (32 bytes)
    followed by the turn normalized (cache markers left out, a string content as one text
    block) and encoded with sorted keys. Two chains are equal exactly when their turns are,
    normalized (short of a SHA-256 collision), and a kept link extends by the new turns only
    (issue 38: a thread's bookkeeping costs a turn its new turns, not the session)."""
    return hashlib.sha256(previous + _canonical(_normalized(turn))).digest()


def chain_of(messages: Sequence[Any], start: bytes = CHAIN_START) -> bytes:
    """The chain ``start`` extended by each of ``messages``."""
    link = start
    for turn in messages:
        link = chain_link(link, turn)
    return link


def fixed_digest(model: Model, body: Mapping[str, Any], betas: Sequence[str]) -> bytes:
    """The digest of what a ``continue`` keeps from the thread: the endpoint, the request
    fields a thread keeps fixed (as sent, cache markers included) and the betas."""
    fixed = [model.provider, model.base_url, *(body.get(key) for key in _FIXED_FIELDS)]
    fixed += [list(betas), *(body.get(key) for key in _FIXED_LATER)]
    return hashlib.sha256(_canonical(fixed)).digest()


def mark_hash(fixed: bytes, chain: bytes) -> str:
    """A thread mark's hash: the fixed settings' digest and the turns' chain together."""
    return hashlib.sha256(fixed + chain).hexdigest()[:32]


def prefix_hash(
    model: Model, body: Mapping[str, Any], betas: Sequence[str], messages: Sequence[Any]
) -> str:
    """A digest of what a ``continue`` builds on: the fixed settings (:func:`fixed_digest`)
    and ``messages`` normalized (:func:`chain_link`). Local bookkeeping only: never sent."""
    return mark_hash(fixed_digest(model, body, betas), chain_of(messages))


def _chain_reader(messages: Sequence[Any]) -> Callable[[int], bytes]:
    # The chain after the first ``count`` messages, extended from the longest asked so far.
    reached, link = 0, CHAIN_START

    def chain_at(count: int) -> bytes:
        nonlocal reached, link
        if count < reached:
            return chain_of(messages[:count])
        reached, link = count, chain_of(messages[reached:count], link)
        return link

    return chain_at


@attrs.frozen(kw_only=True)
class ThreadPlan:
    """A request sent in a thread: ``body`` goes out; ``full`` is the whole request (what a
    fallback resends and what the reply is recorded against)."""

    session_id: str
    kind: Literal["create", "continue"]
    body: dict[str, Any]
    full: dict[str, Any]
    betas: tuple[str, ...]
    fixed: bytes | None = None
    """:func:`fixed_digest` of ``full`` and ``betas`` (``None``: not worked out yet)."""
    chain_at: Callable[[int], bytes] | None = attrs.field(default=None, eq=False)
    """The chain after the first ``k`` of ``full``'s messages, when the caller keeps it
    (``None``: worked out from the messages); asked for all of them by the reply's record."""


def create_plan(
    session_id: str,
    full: dict[str, Any],
    betas: Sequence[str],
    *,
    fixed: bytes | None = None,
    chain_at: Callable[[int], bytes] | None = None,
) -> ThreadPlan:
    """The whole request starting a new thread (``fixed`` and ``chain_at`` as
    :class:`ThreadPlan` keeps them, when known)."""
    return ThreadPlan(
        session_id=session_id,
        kind="create",
        body={**full, "thread": {"type": "create"}},
        full=full,
        betas=tuple(betas),
        fixed=fixed,
        chain_at=chain_at,
    )


def plan_request(
    states: ThreadStates,
    model: Model,
    session_id: str,
    full: dict[str, Any],
    betas: Sequence[str],
    chain_at: Callable[[int], bytes] | None = None,
) -> ThreadPlan | None:
    """How a session's request goes out: ``None`` (threads are off: as it is), a new thread,
    or the continuation of the last reply when the transcript still starts with what the
    server holds and the fixed settings are the same (a mark is used once: it is dropped).
    ``chain_at`` gives the chain after the first ``k`` of ``full``'s messages when the
    caller keeps it (:mod:`.anthropic_plain`); else it is worked out here."""
    state = states.get(session_id)
    if state == OFF:
        return None
    messages = full["messages"]
    at = chain_at if chain_at is not None else _chain_reader(messages)
    fixed = fixed_digest(model, full, betas)
    if (
        isinstance(state, ThreadMark)
        and len(messages) > state.prefix_count
        and mark_hash(fixed, at(state.prefix_count)) == state.prefix_hash
    ):
        states.forget(session_id)  # each reply continues once, even for a concurrent request
        body = {key: value for key, value in full.items() if key not in ("system", "tools")}
        body["messages"] = messages[state.prefix_count :]
        body["thread"] = {"type": "continue", "previous_message_id": state.reply_id}
        return ThreadPlan(
            session_id=session_id,
            kind="continue",
            body=body,
            full=full,
            betas=tuple(betas),
            fixed=fixed,
            chain_at=at,
        )
    # Its turns are linked when the reply is recorded: the request goes out first.
    return create_plan(session_id, full, betas, fixed=fixed, chain_at=at)


def error_code(document: Any) -> str | None:
    """The ``error.details.error_code`` of an Anthropic error body (thread rejections)."""
    error = document.get("error") if isinstance(document, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    code = details.get("error_code") if isinstance(details, Mapping) else None
    return code if isinstance(code, str) else None


def classify_rejection(status: int | None, body: bytes) -> tuple[Rejection | None, str]:
    """What a refused thread request calls for, and the reason its diagnostic names:
    ``new-thread`` (the old thread cannot be continued), ``unsupported`` (the endpoint cannot
    thread this request, or knows no ``thread`` field: a 400 with no code that mentions it),
    or ``None`` (not about the thread: the error stands)."""
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        document = None
    code = error_code(document)
    reason = code if code is not None else str(status)
    if code is not None and code in NEW_THREAD_CODES:
        return "new-thread", reason
    if code == UNSUPPORTED_CODE:
        return "unsupported", reason
    if code is None and status == 400 and b"thread" in body:
        return "unsupported", reason
    return None, reason


def record_reply(
    states: ThreadStates,
    model: Model,
    plan: ThreadPlan,
    reply_turns: Sequence[Any],
    reply_id: str | None,
    served_model: str | None,
) -> None:
    """Remember where the session's next request may continue after a clean reply to
    ``plan``: its whole request's messages plus ``reply_turns`` (the reply as the next
    request will send it). A reply without an id, or one a fallback model wrote (the server
    keeps none of those), leaves nothing to continue."""
    if reply_id is None or (served_model is not None and served_model != model.id):
        return
    messages = plan.full["messages"]
    fixed = plan.fixed if plan.fixed is not None else fixed_digest(model, plan.full, plan.betas)
    chain = plan.chain_at(len(messages)) if plan.chain_at is not None else chain_of(messages)
    states.set(
        plan.session_id,
        ThreadMark(
            prefix_count=len(messages) + len(reply_turns),
            prefix_hash=mark_hash(fixed, chain_of(reply_turns, chain)),
            reply_id=reply_id,
        ),
    )
