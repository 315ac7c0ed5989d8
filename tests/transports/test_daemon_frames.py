"""The daemon's frame of a streamed delta, written straight from its parts (issue 38, the
daemon target), is byte for byte the general encoder's frame."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.messages.events import AgentSessionEvent, MessageUpdate
from pitrio.transports.daemon.frames import delta_frame, event_frame

from ..actors.conftest import FAUX_1


def _updates(text: str) -> list[AgentSessionEvent]:
    """A text, a thinking and a tool call delta of ``text``, and the events around them."""
    builder = StreamBuilder.for_model(FAUX_1)
    builder.start()  # message_start's, not an update
    events = [builder.thinking_start(), builder.thinking_delta(text)]
    events += [builder.thinking_end(), builder.text_start(), builder.text_delta(text)]
    events += [builder.text_end(), builder.toolcall_start("call-1", "read")]
    events += [builder.toolcall_delta(text), builder.toolcall_end(arguments={})]
    return [MessageUpdate(assistant_message_event=e, message=e.partial) for e in events]


@given(text=st.text(), seq=st.integers(min_value=1, max_value=2**53))
def test_a_delta_frame_is_the_general_encoders_frame(text: str, seq: int) -> None:
    for event in _updates(text):
        assert delta_frame(seq, event) == event_frame(seq, event, "delta")


def test_a_lone_surrogate_is_escaped_as_the_general_encoder_does() -> None:
    # orjson refuses a lone surrogate: the general path escapes it (a frame, not an error).
    for event in _updates("a\ud800b"):
        frame = delta_frame(7, event)
        assert frame == event_frame(7, event, "delta")
        assert frame.endswith(b',"seq":7}')
