"""RPC records: parse errors, unknown commands, response envelopes, output lines."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.model_router import FAUX_MODELS
from pitrio.messages.codec import to_json
from pitrio.transports.rpc.framing import Oversize
from pitrio.transports.rpc.protocol import (
    MISSING,
    EncodedData,
    Request,
    StreamedPieces,
    _dump_plain,
    array_pieces,
    dump_line,
    dump_output,
    failure,
    parse_record,
    success,
)


def test_commands_parse_with_or_without_id() -> None:
    request = parse_record('{"id":"a","type":"get_state"}')
    assert request == Request("a", "get_state", {"id": "a", "type": "get_state"})
    bare = parse_record('{"type":"abort"}')
    assert isinstance(bare, Request) and bare.id is MISSING
    numeric = parse_record('{"id":42,"type":"abort"}')
    assert isinstance(numeric, Request) and numeric.id == 42


def test_parse_errors_have_no_id() -> None:
    assert parse_record("") == {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": "Failed to parse command: Unexpected end of JSON input",
    }
    broken = parse_record('{"id":"bad1","type":"get_state"')
    assert isinstance(broken, dict) and "id" not in broken
    assert broken["error"].startswith("Failed to parse command: ")
    oversize = parse_record(Oversize(100, 10))
    assert isinstance(oversize, dict) and "100 bytes" in oversize["error"]


def test_values_without_a_type() -> None:
    # pi: {"type":"response","success":false,"error":"Unknown command: undefined"}
    assert parse_record("42") == {
        "type": "response",
        "success": False,
        "error": "Unknown command: undefined",
    }
    assert parse_record("[1]") == parse_record("42")
    # With an id we keep it, so a client waiting on it gets its answer.
    assert parse_record('{"id":"x"}') == {
        "id": "x",
        "type": "response",
        "success": False,
        "error": "Unknown command: undefined",
    }


def test_response_key_order_and_data() -> None:
    request = Request("gs", "get_state", {})
    line = dump_line(success(request, {"model": FAUX_MODELS[0], "cost": 0.0}))
    assert line.startswith(b'{"id":"gs","type":"response","command":"get_state","success":true,')
    assert b'"cost":0}' in line and line.endswith(b"\n")
    assert dump_line(success(Request(MISSING, "abort", {}))) == (
        b'{"type":"response","command":"abort","success":true}\n'
    )
    assert orjson.loads(dump_line(failure(request, "nope"))) == {
        "id": "gs",
        "type": "response",
        "command": "get_state",
        "success": False,
        "error": "nope",
    }


def test_output_keeps_non_ascii_raw_and_escapes_lone_surrogates() -> None:
    assert dump_line({"s": "é\u2028"}) == '{"s":"é\u2028"}\n'.encode()
    assert dump_line({"s": "a\udc80"}) == b'{"s":"a\\udc80"}\n'


def test_array_pieces_join_to_the_plain_encoding() -> None:
    values = [
        {"n": index, "text": "é\u2028" if index % 2 else "a\udc80", "model": FAUX_MODELS[0]}
        for index in range(7)
    ]
    for batch in (1, 2, 3, 7, 100):
        pieces = list(array_pieces(values, batch))
        assert b"".join(pieces) + b"\n" == dump_line(to_json(values))
        assert len(pieces) == 2 + -(-7 // batch) * 2 - 1  # brackets, batches, commas
    assert b"".join(array_pieces([])) == b"[]"


def test_a_response_with_encoded_data_is_written_in_its_pieces() -> None:
    request = Request("gm", "get_messages", {})
    data = {"messages": [{"role": "user", "content": "caf\u00e9"}] * 3}
    encoded = EncodedData((b'{"messages":', *array_pieces(data["messages"], 2), b"}"))
    response = success(request, encoded)
    assert response["data"] is encoded  # not turned into plain values
    pieces = dump_output(response)
    assert isinstance(pieces, tuple) and len(pieces) == 9  # head, 7 of the data, tail
    assert b"".join(pieces) == dump_line(success(request, data)) == dump_line(response)
    plain = success(request, {"x": 1})
    assert dump_output(plain) == dump_line(plain)  # other responses stay one bytes object


def test_deep_nesting_is_refused_before_it_can_break_the_encoder() -> None:
    deep = "[" * 1000 + "]" * 1000
    refused = parse_record(f'{{"id":"a","type":"prompt","message":{deep}}}')
    assert refused == {
        "id": "a",
        "type": "response",
        "command": "prompt",
        "success": False,
        "error": "Failed to parse command: nested deeper than 64 levels",
    }
    assert dump_line(refused).endswith(b'levels"}\n')
    anonymous = parse_record(f'{{"id":{deep},"type":{deep}}}')
    assert isinstance(anonymous, dict) and "id" not in anonymous
    assert anonymous["command"] == "parse"
    # 64 levels (the command object counts as one) are fine.
    fine = parse_record('{"id":"b","type":"x","v":%s}' % ("[" * 63 + "]" * 63))
    assert isinstance(fine, Request) and fine.id == "b"


def test_lone_surrogates_parse_and_are_written_back_as_escapes() -> None:
    request = parse_record('{"id":"\\ud800","type":"get_state","name":"a\\udfffb"}')
    assert isinstance(request, Request)
    assert (request.id, request.get("name")) == ("\ud800", "a\udfffb")
    assert dump_line(success(request)) == (
        b'{"id":"\\ud800","type":"response","command":"get_state","success":true}\n'
    )
    # Other parse errors keep orjson's text; a broken surrogate line that is also bad JSON too.
    broken = parse_record('{"id":"\\ud800","type":')
    assert isinstance(broken, dict) and broken["error"].startswith("Failed to parse command: ")


def test_numbers_beyond_a_double_are_read_as_javascript_reads_them() -> None:
    # JSON.parse gives Infinity (JSON.stringify writes it back as null); orjson refused it.
    request = parse_record('{"id":1e400,"type":"get_state","n":-1e999}')
    assert isinstance(request, Request)
    assert request.get("n") == float("-inf")
    assert dump_line(success(request)) == (
        b'{"id":null,"type":"response","command":"get_state","success":true}\n'
    )


def test_plain_array_pieces_write_json_text_as_it_is() -> None:
    # get_messages' stored messages come as their JSON text (issue 38), written unchanged
    # beside values still to encode; a lone surrogate anywhere takes the slow path, whose
    # output is the same value.
    texts = [b'{"role":"user","content":"a \\u00e9"}', {"role": "user", "content": "b"}]
    joined = b"".join(array_pieces(texts, 1, encode=None))
    assert joined == b'[{"role":"user","content":"a \\u00e9"},{"role":"user","content":"b"}]'
    lone = [b'{"content":"\\ud800"}', {"content": "\ud800"}]
    written = b"".join(array_pieces(lone, 256, encode=None))
    assert written == b'[{"content":"\\ud800"},{"content":"\\ud800"}]'


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.tuples(JSON_VALUES, st.booleans()), max_size=12),
    batch=st.integers(1, 5),
)
def test_plain_array_pieces_are_what_orjson_writes_for_the_whole_list(
    items: list[tuple[object, bool]], batch: int
) -> None:
    # get_messages joins a batch of stored messages' JSON texts itself (issue 38): byte for
    # byte what encoding the list of fragments and plain values wrote before, in any batch.
    values = [orjson.dumps(value) if as_text else value for value, as_text in items]
    written = b"".join(array_pieces(values, batch, encode=None))
    assert written + b"\n" == _dump_plain(values)
    fragments = [orjson.Fragment(v) if type(v) is bytes else v for v in values]
    assert written == orjson.dumps(fragments)


def test_a_streamed_response_is_made_only_as_it_is_iterated() -> None:
    # The RPC writer streams get_messages (issue 38): the head, the pieces made one by one,
    # the closing brace; joined, the line the tuple form gives.
    request = Request("gm", "get_messages", {})
    made: list[bytes] = []

    def pieces():  # type: ignore[no-untyped-def]
        for piece in (b'{"messages":', b"[1", b",2]", b"}"):
            made.append(piece)
            yield piece

    streamed = dump_output(success(request, EncodedData(StreamedPieces(pieces()))))
    assert isinstance(streamed, StreamedPieces) and made == []
    eager = success(request, EncodedData((b'{"messages":', b"[1", b",2]", b"}")))
    assert b"".join(streamed) == b"".join(dump_output(eager)) == dump_line(eager)
    assert dump_line(success(request, {"messages": [1, 2]})) == dump_line(eager)
    assert len(made) == 4
