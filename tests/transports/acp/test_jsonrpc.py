"""The sans-IO JSON-RPC codec of ``pitrio acp``: framing, ids of every JSON type, error
codes, and the matching of the agent's own requests with the client's responses."""

from __future__ import annotations

import json

import pytest

from pitrio.transports.acp.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    Invalid,
    LineFramer,
    Notification,
    Outbox,
    Request,
    Response,
    RpcError,
    decode,
    encode_error,
    encode_notification,
    encode_result,
)


@pytest.mark.parametrize("request_id", ["a", "", 0, -3, 2**53, 1.5, None])
def test_a_request_id_of_an_allowed_type_is_kept_and_answered_as_it_came(
    request_id: object,
) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "m", "params": {}})
    message = decode(line.encode())
    assert message == Request(request_id, "m", {})
    answer = json.loads(encode_result(message.id, {"ok": True}))
    assert answer == {"jsonrpc": "2.0", "id": request_id, "result": {"ok": True}}


@pytest.mark.parametrize("request_id", [True, False, {"a": 1}, [1]])
def test_an_id_of_another_type_is_an_invalid_request_answered_with_null(request_id: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "m"}).encode()
    message = decode(line)
    assert isinstance(message, Invalid)
    assert (message.id, message.error.code) == (None, INVALID_REQUEST)


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        (b"{not json", PARSE_ERROR, None),
        (b"\xff\xfe", PARSE_ERROR, None),
        (b"[1, 2]", INVALID_REQUEST, None),
        (b'"text"', INVALID_REQUEST, None),
        (b'{"id": 4, "method": "m"}', INVALID_REQUEST, 4),
        (b'{"jsonrpc": "1.0", "id": 4, "method": "m"}', INVALID_REQUEST, 4),
        (b'{"jsonrpc": "2.0", "id": 5}', INVALID_REQUEST, 5),
        (b'{"jsonrpc": "2.0", "id": 6, "method": 7}', INVALID_REQUEST, 6),
        (b'{"jsonrpc": "2.0", "id": 8, "method": "m", "params": "x"}', INVALID_REQUEST, 8),
    ],
)
def test_what_is_no_request_gets_the_right_error(
    line: bytes, code: int, request_id: object
) -> None:
    message = decode(line)
    assert isinstance(message, Invalid)
    assert (message.error.code, message.id) == (code, request_id)
    answer = json.loads(encode_error(message.id, message.error))
    assert answer["error"]["code"] == code and answer["id"] == request_id


def test_notifications_and_responses_are_told_apart() -> None:
    assert decode(b'{"jsonrpc":"2.0","method":"n","params":{"a":1}}') == Notification("n", {"a": 1})
    assert decode(b'{"jsonrpc":"2.0","id":3,"result":{"x":1}}') == Response(3, {"x": 1})
    error = decode(b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}')
    assert error == Response(3, None, {"code": -1, "message": "no"})
    # A notification with bad params is still never answered.
    assert decode(b'{"jsonrpc":"2.0","method":"n","params":3}') == Notification("n", None)


def test_errors_carry_code_message_and_data() -> None:
    body = json.loads(encode_error(1, RpcError(INVALID_PARAMS, "bad", {"field": "cwd"})))
    assert body["error"] == {"code": INVALID_PARAMS, "message": "bad", "data": {"field": "cwd"}}
    assert json.loads(encode_notification("n", {"a": "\ud800"}))["params"] == {"a": "\ud800"}


def test_lines_are_cut_at_newlines_across_reads() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":') == []
    assert framer.feed(b'1}\r\n\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}\n") == [b'{"b":2}']
    assert framer.feed(b"tail") == []
    assert framer.end() == b"tail"


def test_an_over_long_line_is_reported_once_and_skipped_without_buffering_it() -> None:
    framer = LineFramer(max_line=8)
    assert framer.feed(b"0123456789") == [None]  # reported as soon as it is too long
    assert framer.feed(b"abcdef" * 10) == []  # not kept
    assert framer.feed(b'rest\n{"x":1}\n') == [b'{"x":1}']
    assert framer.feed(b"123456789\nok\n") == [None, b"ok"]


def test_the_agents_requests_are_numbered_and_matched_once() -> None:
    outbox = Outbox()
    first, line = outbox.request("session/request_permission", {"x": 1})
    second, _ = outbox.request("session/request_permission", {"x": 2})
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": first,
        "method": "session/request_permission",
        "params": {"x": 1},
    }
    assert outbox.pending == 2
    assert outbox.answered(Response(second, {})) == second
    assert outbox.answered(Response(second, {})) is None  # answered twice: ignored
    assert outbox.answered(Response("1", {})) is None  # not an id it chose
    assert outbox.answered(Response(True, {})) is None
    outbox.forget(first)
    assert outbox.answered(Response(first, {})) is None and outbox.pending == 0
