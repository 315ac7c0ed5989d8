"""The acceptor's pure parts (``serve --workers``): session ownership and the wire formats."""

from __future__ import annotations

import pytest

from pitrio.transports.daemon.workers.table import NoWorkerError, Table
from pitrio.transports.daemon.workers.wire import (
    LENGTH,
    ControlDecoder,
    WireError,
    decode_ack,
    decode_handoff,
    encode_ack,
    encode_control,
    encode_handoff,
)


def test_sessions_spread_stick_to_their_owner_and_move_when_it_dies() -> None:
    table = Table(2)
    with pytest.raises(NoWorkerError):
        table.route("a")
    table.up(0)
    table.up(1)
    owners = [table.route(name) for name in "abcd"]
    assert sorted(owners) == [0, 0, 1, 1]  # the least loaded each time
    assert [table.route(name) for name in "abcd"] == owners  # sticky
    assert table.claim("a", 1 - owners[0]) == owners[0]  # a live owner keeps it
    dead = owners[0]
    lost = table.down(dead)
    assert sorted(lost) == sorted(name for name, o in zip("abcd", owners, strict=True) if o == dead)
    assert all(table.route(name) == 1 - dead for name in lost)  # to the live one
    assert table.place() == 1 - dead
    table.forget("a", 1 - dead)
    assert table.owner("a") is None
    table.down(1 - dead)
    with pytest.raises(NoWorkerError):
        table.place()


def test_a_new_session_goes_to_the_least_loaded_worker() -> None:
    table = Table(3)
    for slot in range(3):
        table.up(slot)
    table.claim("x", 0)
    table.claim("y", 0)
    table.claim("z", 1)
    assert table.place() == 2
    assert table.any() in (0, 1, 2)


def test_control_messages_survive_any_split() -> None:
    stream = encode_control({"id": 1, "op": "list"}) + encode_control({"re": 1, "ok": [1, "é"]})
    for cut in range(len(stream) + 1):
        decoder = ControlDecoder()
        messages = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert messages == [{"id": 1, "op": "list"}, {"re": 1, "ok": [1, "é"]}]
    with pytest.raises(WireError):
        ControlDecoder().feed(LENGTH.pack(1 << 30))
    with pytest.raises(WireError):
        encode_control({"name": "\ud800"})  # a lone surrogate from a client


def test_a_handoff_carries_its_meta_and_the_bytes_read() -> None:
    data = b"GET /v1/host HTTP/1.1\r\n\r\n\x81\x00"
    assert decode_handoff(encode_handoff({"head": 25}, data)) == ({"head": 25}, data)
    with pytest.raises(WireError):
        decode_handoff(b"no meta line")


def test_an_acknowledgement_names_its_handoff() -> None:
    assert decode_ack(encode_ack(7)) == 7
    for bad in (b"", b"{", b'{"ack": "7"}', b'{"ack": true}', b"[7]"):
        with pytest.raises(WireError):
            decode_ack(bad)
