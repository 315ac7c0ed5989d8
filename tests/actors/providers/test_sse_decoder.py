"""The providers' SSE decoder agrees with httpx-sse (which it replaced) on any input and split."""

from __future__ import annotations

import codecs

from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from hypothesis import given
from hypothesis import strategies as st

from pitrio.actors.model_router.providers.http import SseDecoder


def reference(chunks: list[bytes]) -> list[tuple[str, str]]:
    """httpx + httpx-sse: UTF-8 text (replacing bad bytes), lines, events."""
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines = SSELineDecoder()
    events = SSEDecoder()
    out: list[tuple[str, str]] = []

    def take(line: str) -> None:
        sse = events.decode(line.rstrip("\n"))
        if sse is not None:
            out.append((sse.event, sse.data))

    for chunk in chunks:
        decoded = text.decode(chunk)
        if decoded:
            for line in lines.decode(decoded):
                take(line)
    tail = text.decode(b"", final=True)
    if tail:
        for line in lines.decode(tail):
            take(line)
    for line in lines.flush():
        take(line)
    return out


def ours(chunks: list[bytes]) -> list[tuple[str, str]]:
    decoder = SseDecoder()
    out: list[tuple[str, str]] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.end()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def test_typical_stream_and_edge_cases() -> None:
    body = (
        b': keep-alive\r\n\r\nevent: delta\r\ndata: {"a":1}\r\ndata: two\r\n\r\n'
        b"id: 7\rretry: 30\r\rdata: \xc3\xa9t\xc3\xa9\n\ndata:no space\n\nevent:x\ndata: tail"
    )
    expected = [
        ("delta", '{"a":1}\ntwo'),
        ("message", ""),
        ("message", "été"),
        ("message", "no space"),
    ]
    assert ours([body]) == expected == reference([body])
    # Every split point: CRLF and UTF-8 sequences cut in two.
    for cut in range(len(body) + 1):
        assert ours([body[:cut], body[cut:]]) == expected


@given(
    st.lists(
        st.sampled_from(
            [
                *(b"data: x", b"data:", b"event: e", b"id: 1", b"id: \x00", b"retry: 5"),
                *(b"retry: z", b": c", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xff", b"text"),
                *(b":", b" "),
            ]
        ),
        max_size=40,
    ),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_agrees_with_httpx_sse(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    chunks = split(data, cuts)
    assert ours(chunks) == reference(chunks)


def test_runs_of_one_line_data_events_cut_anywhere() -> None:
    # The decoder's quick path takes whole events of one ``data: `` line up to a read's last
    # blank line; whatever else a read holds, or a line split across reads, goes the line
    # rules' way. Every cut of such a body, in two and in three, decodes as httpx-sse does.
    events = b"".join(b'data: {"n":%d}\n\n' % n for n in range(6))
    bodies = [
        events,
        events + b"data: a\ndata: b\n\n" + events,  # an event of two data lines
        events + b": ping\n\n" + events + b"event: e\ndata: x\n\n",  # a comment, a name
        events.replace(b"\n\n", b"\r\n\r\n", 2) + b"data:tight\n\ndata: \n\n",
        b"data: " + "é".encode() * 3 + b"\n\n" + events + b"data: end",
    ]
    for body in bodies:
        whole = reference([body])
        assert ours([body]) == whole
        for cut in range(len(body) + 1):
            assert ours([body[:cut], body[cut:]]) == whole
            later = min(len(body), cut + 9)
            assert ours([body[:cut], body[cut:later], body[later:]]) == whole
