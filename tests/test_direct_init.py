"""Constructors that set slots through their descriptors give what attrs' ``__init__`` gives,
and refuse a class whose ``__init__`` does more."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pitrio._direct_init import direct_init
from pitrio.actors.host.feed import FramedEvent
from pitrio.actors.session.fanout import Sequenced
from pitrio.messages.events import MessageUpdate
from pitrio.messages.stream import TextDelta, ThinkingDelta


@pytest.mark.parametrize(
    ("cls", "args", "kwargs"),
    [
        (TextDelta, (), {"content_index": 2, "delta": "tok ", "partial": None}),
        (TextDelta, (), {"content_index": 0, "delta": "", "partial": 1, "extra": {"x": 1}}),
        (ThinkingDelta, (), {"content_index": 1, "delta": "hm", "partial": None}),
        (MessageUpdate, (), {"assistant_message_event": 1, "message": 2}),
        (Sequenced, (7, "event"), {}),
        (Sequenced, (), {"seq": 7, "event": "event"}),
        (FramedEvent, (7, "event", b"{}"), {}),  # a field of its own, two of its base's
    ],
)
def test_the_instance_is_the_one_init_makes(
    cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    made = direct_init(cls)(*args, **kwargs)
    expected = cls(*args, **kwargs)
    assert type(made) is cls
    assert made == expected and hash(made) == hash(expected)
    assert attrs.asdict(made, recurse=False) == attrs.asdict(expected, recurse=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.seq = 1  # still frozen


def test_arguments_init_would_refuse_are_refused() -> None:
    text_delta = direct_init(TextDelta)
    with pytest.raises(TypeError):
        text_delta(2, "tok ", None)  # keywords only, as TextDelta's own
    with pytest.raises(TypeError):
        text_delta(content_index=2, delta="tok ")  # partial is required
    with pytest.raises(TypeError):
        text_delta(content_index=2, delta="tok ", partial=None, type="other")  # not an init field


@attrs.frozen
class Checked:
    value: int = attrs.field(validator=attrs.validators.instance_of(int))


@attrs.frozen
class Made:
    items: list[int] = attrs.field(factory=list)


@attrs.frozen
class After:
    value: int

    def __attrs_post_init__(self) -> None:
        pass


@attrs.frozen(cache_hash=True)
class CachedHash:
    value: int


@attrs.frozen
class Private:
    _value: int  # attrs' __init__ takes it as ``value``


@attrs.frozen
class Base:
    value: int


@attrs.frozen(slots=False)
class Unslotted(Base):
    more: int


@attrs.frozen(cache_hash=True)
class CachedBelow(Base):
    more: int


@pytest.mark.parametrize("cls", [Checked, Made, After, CachedHash, Private, Unslotted, CachedBelow])
def test_a_class_whose_init_does_more_is_refused(cls: type) -> None:
    with pytest.raises(TypeError, match="does more"):
        direct_init(cls)
