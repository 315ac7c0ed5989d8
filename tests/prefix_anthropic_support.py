"""What the prefix Anthropic tests share: the comparison of the JSON-level prefix with the typed
builder (:func:`check`) and the targets it runs under (see ``prefix_chat_support`` for the
stored messages made by hand, which both use)."""

from __future__ import annotations

import itertools
from typing import Any

from pitrio._prefix_anthropic import prepare_anthropic_prefix
from pitrio.actors.model_router.providers.anthropic import AnthropicTurns, facts_of
from pitrio.actors.model_router.providers.convert import body_bytes, encode_json_pieces
from pitrio.messages.model import Model
from pitrio.messages.wire import loads
from tests.prefix_chat_support import _decoded, make_model

CACHES: tuple[dict[str, str] | None, ...] = (
    None,
    {"type": "ephemeral"},
    {"type": "ephemeral", "ttl": "1h"},
)


def targets(provider: str, api: str, id: str) -> list[tuple[Model, bool]]:
    """The model of ``provider/api/id`` and another one (whose responses are foreign), each
    with and without image input, images blocked by the session or not."""
    out = []
    for other, image, block in itertools.product((False, True), repeat=3):
        model = make_model(provider, api, "another" if other else id, image=image)
        out.append((model, block))
    return out


def _pieces(items: list[Any]) -> list[tuple[str, bytes]]:
    """``finish()``'s items as their kinds and bytes (a segment, a fragment or a plain value,
    which may hold a lone surrogate: encoded as the request is)."""
    out = []
    for item in items:
        kind = type(item).__name__ if type(item).__name__ in ("FrozenSegment", "Fragment") else ""
        out.append((kind or "plain", body_bytes(encode_json_pieces([item]))))
    return out


def _state(builder: AnthropicTurns) -> Any:
    finished = [builder.finish(cache) for cache in CACHES]
    return (
        _pieces(builder.fragments.items()),
        len(builder.fragments),
        builder.turns,  # the open turns, their marks of grouped results included
        builder.newest_user,
        [(call.id, call.name) for call in builder.preparer.pending],
        [_pieces(turns) for turns in finished],
        [body_bytes(encode_json_pieces({"messages": turns})) for turns in finished],
    )


def check(datas: list[Any], model: Model, block: bool = False) -> int:
    """Compare the prefix with the typed path on ``datas``; how many messages it converted."""
    prefix = prepare_anthropic_prefix(datas, facts_of(model, block_images=block))
    if prefix is None:
        return 0
    assert 0 < prefix.consumed <= len(datas)
    typed = AnthropicTurns(model, encoded=True)
    values = [loads(data) for data in datas]  # the store's parse
    for value in values[: prefix.consumed]:
        message = _decoded(value, block)
        assert message is not None, f"converted what the typed path refuses: {value!r}"
        typed.feed(message)
    resumed = AnthropicTurns.from_prefix(model, prefix)
    assert resumed is not None
    assert _state(resumed) == _state(typed)
    rest = [m for m in (_decoded(v, block) for v in values[prefix.consumed :]) if m is not None]
    for message in rest:
        typed.feed(message)
        resumed.feed(message)
        if len(rest) < 40:  # each step of a short rest (a long one: at its end)
            assert _state(resumed) == _state(typed)
    assert _state(resumed) == _state(typed)
    # The prefix is not changed by the builder made from it (a kept offer may be used again).
    assert prefix == prepare_anthropic_prefix(datas, facts_of(model, block_images=block))
    return prefix.consumed


def check_all(datas: list[Any], provider: str = "mock", api: str = "a", id: str = "m") -> int:
    """:func:`check` for every target of ``provider/api/id``; the most messages converted."""
    return max(check(datas, *target) for target in targets(provider, api, id))
