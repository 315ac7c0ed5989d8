"""Chat Completions chunks read from a learned template (issue 38): the events are the ones
a whole parse of every chunk gives, whatever the server's spacing, key order, escapes or
extra fields, and a chunk that only looks like the template is parsed whole."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.model_router.providers.chunk_template import ChunkTemplate, learn
from pitrio.actors.model_router.providers.openai_completions import OpenAICompletionsParser
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.messages import to_json
from pitrio.messages.delta_run import expand_events
from pitrio.messages.partial import PartialMessage, content_chars
from tests.actors.providers.support import make_model

MODEL = make_model("openai-completions", id="mock-model")


class WholeParser(OpenAICompletionsParser):
    """The reference: every chunk parsed whole (no template is ever learned)."""

    def _learn(self, data: str, chunk: dict[str, Any], delta: dict[str, Any]) -> None:
        return None


def events_of(parser: OpenAICompletionsParser, chunks: list[str]) -> list[Any]:
    parser.builder = StreamBuilder.for_model(MODEL, timestamp=7)  # one clock for both
    out: list[Any] = []
    for data in chunks:
        out.extend(parser.feed("message", data))
    out.extend(parser.end())
    return [to_json(event) for event in out]


def same_events(chunks: list[str]) -> OpenAICompletionsParser:
    """Assert both parsers give the same events for ``chunks``; the templated one back."""
    templated = OpenAICompletionsParser(MODEL)
    assert events_of(templated, chunks) == events_of(WholeParser(MODEL), chunks)
    return templated


def chunk(delta: dict[str, Any] | None, *, style: int = 0, **fields: Any) -> str:
    """A chunk as servers write it: ``style`` picks the spacing, escaping and key order."""
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk"}
    body["created"] = fields.pop("created", 1733000000)
    body["model"] = "mock-model"
    if delta is not None:
        choice = {"index": 0, "delta": delta, "finish_reason": fields.pop("finish", None)}
        if style % 2:
            choice = dict(reversed(list(choice.items())))  # finish_reason first
        body["choices"] = [choice]
    body.update(fields)
    separators = (",", ":") if style < 2 else (", ", ": ")
    return json.dumps(body, separators=separators, ensure_ascii=style == 3)


def test_a_mock_stream_is_read_from_the_template_after_its_first_text_chunk() -> None:
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": f"tok{i} "}) for i in range(50)]
    chunks += [chunk({}, finish="stop"), chunk(None, usage={"prompt_tokens": 1}), "[DONE]"]
    parser = same_events(chunks)
    assert parser._template_hits == 49  # the first text chunk taught the template


TEXTS = st.text(
    alphabet=st.sampled_from(
        ["a", " ", '"', "\\", "/", "\n", "\x00", "\u00e9", "\u2028", "😀", "}"]
    ),
    max_size=6,
)
STEP = st.one_of(
    st.tuples(st.just("content"), TEXTS),
    st.tuples(st.just("reasoning_content"), TEXTS),
    st.tuples(st.just("reasoning"), TEXTS),
    st.tuples(st.just("both"), TEXTS),
    st.tuples(st.just("created"), st.integers(1, 3)),
    st.tuples(st.just("extra"), TEXTS),
    st.tuples(st.just("call"), TEXTS),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEP, max_size=25), style=st.integers(0, 3), finish=st.booleans())
def test_templated_chunks_give_the_events_of_whole_parses(
    steps: list[tuple[str, Any]], style: int, finish: bool
) -> None:
    """Text and reasoning deltas, a chunk with both, a changing ``created``, an extra field
    holding a string, tool-call pieces: every event is the whole parse's, in order."""
    same_events(chunks_of(steps, style, finish))


def events_by_reads(
    parser: OpenAICompletionsParser, chunks: list[str], cuts: list[int]
) -> list[Any]:
    """The events ``feed_all`` gives for ``chunks`` cut into reads at ``cuts``, taken as the
    HTTP provider takes them (nothing after the final event)."""
    parser.builder = StreamBuilder.for_model(MODEL, timestamp=7)
    decoded = [("message", data) for data in chunks]
    bounds = sorted({0, len(decoded), *(min(cut, len(decoded)) for cut in cuts)})
    out: list[Any] = []
    for start, stop in itertools.pairwise(bounds):
        items, last, fed = parser.feed_all(decoded[start:stop])
        # A run of deltas stands for its events; their partials are read at the end, after
        # later reads appended to the block: each must still be the message as of its delta.
        read = expand_events(items)
        out += read + last
        for event in read + last:  # the size a subscriber's buffer weighs, as made
            partial = getattr(event, "partial", None)
            if isinstance(partial, PartialMessage):
                assert partial.text_chars == content_chars(partial.content)
        if parser.finished:
            assert last and 0 < fed <= stop - start
            return [to_json(event) for event in out]
        assert not last and fed == stop - start
    out.extend(parser.end())
    return [to_json(event) for event in out]


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(STEP, max_size=25),
    style=st.integers(0, 3),
    finish=st.booleans(),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    error_at=st.none() | st.integers(0, 25),
)
def test_chunks_fed_a_read_at_a_time_give_the_events_of_whole_parses(
    steps: list[tuple[str, Any]],
    style: int,
    finish: bool,
    cuts: list[int],
    error_at: int | None,
) -> None:
    """``feed_all`` (runs of templated chunks handed to the builder at once, issue 38) over
    reads cut anywhere, with a stream error anywhere: the events of one whole parse per
    chunk, up to and with the final event."""
    chunks = chunks_of(steps, style, finish)
    if error_at is not None:
        chunks.insert(min(error_at, len(chunks)), json.dumps({"error": {"message": "no"}}))
    expected = events_of(WholeParser(MODEL), chunks)
    assert events_by_reads(OpenAICompletionsParser(MODEL), chunks, cuts) == expected


def chunks_of(steps: list[tuple[str, Any]], style: int, finish: bool) -> list[str]:
    """The chunks of the generated ``steps`` (see ``STEP``), ending as ``finish`` says."""
    created = 1
    chunks: list[str] = []
    for kind, value in steps:
        if kind == "created":
            created = value
            continue
        if kind == "both":
            delta: dict[str, Any] = {"content": value, "reasoning_content": value + "r"}
        elif kind == "extra":
            chunks.append(chunk({"content": value}, style=style, created=created, x_note=value))
            continue
        elif kind == "call":
            piece = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": value}}
            delta = {"tool_calls": [piece]}
        else:
            delta = {kind: value}
        chunks.append(chunk(delta, style=style, created=created))
    if finish:
        chunks += [chunk({}, style=style, finish="stop"), "[DONE]"]
    return chunks


def test_a_chunk_that_only_looks_like_the_template_is_parsed_whole() -> None:
    """Between the learned head and tail: two fields, a number, an unterminated string, an
    empty string; each is parsed whole (a reasoning delta, errors, nothing)."""
    plain = chunk({"content": "tok "})
    head, _, tail = plain.partition('"tok "')
    two = head + '"a","reasoning_content":"b"' + tail
    assert json.loads(two)["choices"][0]["delta"] == {"content": "a", "reasoning_content": "b"}
    for odd in (two, head + '""' + tail, head + "7" + tail, head + '"a' + tail):
        same_events([plain, plain, odd, plain])
    same_events([plain, plain, head + '"a"' + tail[:-1]])  # cut short: malformed


def test_the_string_found_is_checked_against_the_parse() -> None:
    """A key ending in ``"content`` after the delta (escaped inside its name) is found by
    the text search; the probe parse refuses it and nothing is learned."""
    data = chunk({"content": "tok "}, **{'x"content': "decoy"})
    assert learn(data, ("choices", 0, "delta", "content"), "content") is None
    same_events([data, data.replace("tok ", "more")])
    good = chunk({"content": "tok "})
    template = learn(good, ("choices", 0, "delta", "content"), "content")
    assert isinstance(template, ChunkTemplate)
    assert template.value(chunk({"content": 'q"\\/\u00e9'})) == 'q"\\/\u00e9'
    assert template.value(chunk({"content": "x"}, created=2)) is None  # another head
