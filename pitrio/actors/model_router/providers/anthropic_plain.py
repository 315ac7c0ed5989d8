"""The turns of threaded and OAuth Anthropic Messages requests, kept between requests (issue 38:
a turn's cost flat in the session's length).

A request in a message thread is built from plain turns (a ``continue`` sends only the turns
after what the server holds, so the list is cut by turn), and an OAuth token's request names
tools in Claude Code's casing. Both were built from the whole transcript at every request, and
a thread's fingerprint hashed every turn twice a request. Here, as for the encoded requests
(:class:`~pitrio.actors.model_router.providers.convert.PrefixCache`), the state after a
transcript's messages is kept and only new messages are converted:

* :class:`PlainTurns` keeps the final turns (those before the newest user turn, which no
  later message changes) as plain dicts, tool names already renamed, and the thread
  fingerprint's chain link after each (:func:`~.anthropic_threads.chain_link`, worked out
  once, when first asked), so the fingerprint of the first ``k`` turns is a lookup, or a few
  links past the last final turn; the request's turns are not copied (:class:`JoinedList`);
* an OAuth request outside a thread is encoded as any other (:func:`oauth_turns`), the
  names renamed as the turns are made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from pitrio._prefix_anthropic import AnthropicPrefix
from pitrio.actors.model_router.providers.anthropic_threads import CHAIN_START, chain_link
from pitrio.actors.model_router.providers.anthropic_turns import (
    AnthropicTurns,
    final_turn,
    stored_prefix,
)
from pitrio.actors.model_router.providers.claude_code import claude_code_name
from pitrio.actors.model_router.providers.convert import JoinedList, PrefixCache
from pitrio.messages.agent import LlmMessage
from pitrio.messages.model import Model

ChainAt = Callable[[int], bytes]
"""The fingerprint chain after the first ``k`` turns of a request's messages."""


class PlainTurns(AnthropicTurns):
    """A plain (not encoded) :class:`AnthropicTurns` that keeps its final turns (``done``,
    never changed once there) and the chain link after each (``chains``)."""

    def __init__(self, model: Model, *, rename: Callable[[str], str] | None = None) -> None:
        super().__init__(model, encoded=False, rename=rename)
        self.done: list[dict[str, Any]] = []
        self.chains: list[bytes] = []

    @classmethod
    def restored(
        cls, model: Model, prefix: AnthropicPrefix, rename: Callable[[str], str] | None = None
    ) -> PlainTurns | None:
        """A builder in the state one fed the prefix's messages would be in (a resumed
        session's stored transcript: :func:`~.anthropic_turns.stored_prefix`), its final turns
        decoded from the prefix's encoded ones; ``None`` when the prefix was made for other
        facts than ``model``'s. The turns sent are the same bytes: the segments are orjson's
        own encoding of the same turns, which it decodes and encodes again unchanged (the
        tests compare every request of a resumed threaded session with the typed path's)."""
        encoded = AnthropicTurns.from_prefix(model, prefix)
        if encoded is None:
            return None
        builder = cls(model, rename=rename)
        parts = [part for part in (*prefix.segments, prefix.tail) if part]
        builder.done = orjson.loads(b"[" + b",".join(parts) + b"]") if parts else []
        builder.turns, builder.newest_user = encoded.turns, encoded.newest_user
        builder.preparer.pending = encoded.preparer.pending
        if rename is not None:  # Claude Code's casing, as the turns made here have it
            for turn in (*builder.done, *builder.turns):
                if turn["role"] == "assistant":
                    turn["content"] = [_renamed(block, rename) for block in turn["content"]]
        return builder

    def copy(self) -> PlainTurns:
        """An independent builder in the same state (rare: only when results are owed)."""
        twin = super().copy()
        assert isinstance(twin, PlainTurns)
        twin.done, twin.chains = list(self.done), list(self.chains)
        return twin

    def _add(self, turn: dict[str, Any]) -> None:
        self.turns.append(turn)
        if turn["role"] == "user":
            # Every turn before the newest user turn is final (linked when first asked).
            self.done.extend(final_turn(done) for done in self.turns[:-1])
            del self.turns[:-1]
            self.newest_user = len(self.turns) - 1

    def linked(self, count: int) -> bytes:
        """The chain after the first ``count`` final turns (at most ``len(done)``), each turn
        linked once, when first asked: a new thread's request goes out before its turns are
        hashed (its reply's record asks), and later requests link only their new turns."""
        chains, done = self.chains, self.done
        link = chains[-1] if chains else CHAIN_START
        for index in range(len(chains), count):
            link = chain_link(link, done[index])
            chains.append(link)
        return chains[count - 1] if count else CHAIN_START

    def request_turns(self, cache: dict[str, Any] | None) -> tuple[JoinedList, ChainAt]:
        """The request's turns (those of :meth:`finish`: the kept final turns, not copied, then
        fresh open ones) and its fingerprint chain (:data:`ChainAt`), this builder left as it
        was."""
        builder: PlainTurns = self
        tail = self.preparer.copy().finish()
        if tail:
            builder = self.copy()
            for message in tail:
                builder._emit(message)
        opens: list[Any] = []
        for index, open_turn in enumerate(builder.turns):
            # Copied: the kept open turn may still grow (a later result joins it) while this
            # request's plan is held (its resend and the reply's record read it).
            turn = final_turn(open_turn)
            content = list(turn["content"])
            if cache is not None and index == builder.newest_user:
                content[-1] = {**content[-1], "cache_control": cache}
            turn["content"] = content
            opens.append(turn)
        final = len(builder.done)
        out = JoinedList(builder.done, final, opens)
        return out, _chain_reader(builder, final, out)

    def finish(self, cache: dict[str, Any] | None = None) -> list[Any]:
        """Every turn, as :meth:`AnthropicTurns.finish` gives them."""
        return list(self.request_turns(cache)[0])


def _renamed(block: dict[str, Any], rename: Callable[[str], str]) -> dict[str, Any]:
    if block.get("type") != "tool_use":
        return block
    return {**block, "name": rename(block["name"])}


def _chain_reader(builder: PlainTurns, final: int, turns: JoinedList) -> ChainAt:
    # ``turns`` begins with the builder's first ``final`` final turns (the same dicts, never
    # changed, so the builder's links hold for them even after it has grown); past them the
    # few open turns are linked here (remembered: a plan and its record both ask).
    extra: list[bytes] = []

    def chain_at(count: int) -> bytes:
        if count <= final:
            return builder.linked(count)
        link = extra[-1] if extra else builder.linked(final)
        for turn in turns[final + len(extra) : count]:
            link = chain_link(link, turn)
            extra.append(link)
        return extra[count - final - 1]

    return chain_at


_PLAIN: dict[bool, PrefixCache[PlainTurns]] = {False: PrefixCache(), True: PrefixCache()}
_OAUTH_ENCODED: PrefixCache[AnthropicTurns] = PrefixCache()


def plain_turns(model: Model, messages: Sequence[LlmMessage], *, oauth: bool) -> PlainTurns:
    """The kept plain builder of ``messages`` (tool names in Claude Code's casing when
    ``oauth``), fed only the messages it has not seen (:class:`PrefixCache`)."""
    rename = claude_code_name if oauth else None

    def seed(messages: Sequence[LlmMessage]) -> tuple[PlainTurns, int] | None:
        # A resumed session's first request: the stored part from its JSON (issue 38).
        prefix = stored_prefix(model, messages)
        builder = None if prefix is None else PlainTurns.restored(model, prefix, rename)
        return None if builder is None or prefix is None else (builder, prefix.consumed)

    return _PLAIN[oauth].builder(model, messages, lambda: PlainTurns(model, rename=rename), seed)


def oauth_turns(
    model: Model, messages: Sequence[LlmMessage], cache: dict[str, Any] | None
) -> list[Any]:
    """The encoded turns of an OAuth request outside a thread (tool names in Claude Code's
    casing), resumed as :func:`~.anthropic.encoded_turns` resumes its own. Not seeded from a
    resumed session's stored JSON: that prefix holds the names as stored."""
    builder = _OAUTH_ENCODED.builder(
        model, messages, lambda: AnthropicTurns(model, encoded=True, rename=claude_code_name)
    )
    return builder.finish(cache)
