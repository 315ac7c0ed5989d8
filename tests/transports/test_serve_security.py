"""The daemon's pure helpers: token, origins, addresses, rate limit, request heads, metrics."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pitrio.transports.daemon import metrics
from pitrio.transports.daemon.frames import with_seq
from pitrio.transports.daemon.http import BadRequest, parse_head, response
from pitrio.transports.daemon.security import (
    RateLimiter,
    TokenFileError,
    is_loopback,
    load_or_create_token,
    origin_allowed,
    own_origins,
    presented_token,
    token_matches,
    token_path,
)


def test_token_is_created_once_with_mode_600(tmp_path: Path) -> None:
    token, created = load_or_create_token(tmp_path / "agent")
    assert created and len(token) >= 40
    path = token_path(tmp_path / "agent")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again, created_again = load_or_create_token(tmp_path / "agent")
    assert again == token and not created_again


def test_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    load_or_create_token(tmp_path)
    os.chmod(token_path(tmp_path), 0o644)
    with pytest.raises(TokenFileError, match="chmod 600"):
        load_or_create_token(tmp_path)


def test_empty_token_file_is_refused(tmp_path: Path) -> None:
    path = token_path(tmp_path)
    path.write_text("")
    os.chmod(path, 0o600)
    with pytest.raises(TokenFileError, match="empty"):
        load_or_create_token(tmp_path)


def test_token_comparison() -> None:
    assert token_matches("abc", "abc")
    assert not token_matches("abd", "abc")
    assert not token_matches("", "abc")
    assert not token_matches(None, "abc")


def test_presented_token_sources() -> None:
    assert presented_token("Bearer xyz", []) == ("xyz", "header")
    assert presented_token("bearer  xyz ", []) == ("xyz", "header")
    assert presented_token(None, ["pitrio.v1", "pitrio.token.abc"]) == ("abc", "subprotocol")
    assert presented_token("Basic Zm9v", ["pitrio.v1"]) == (None, "none")


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.5.0.1") and is_loopback("::1")
    assert is_loopback("localhost") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    assert not is_loopback("example.com")


def test_origins() -> None:
    own = own_origins("127.0.0.1", 8321)
    assert "http://127.0.0.1:8321" in own and "http://localhost:8321" in own
    assert origin_allowed(None, own)  # not a browser
    assert origin_allowed("http://localhost:8321", own)
    assert origin_allowed("HTTP://LOCALHOST:8321/", own)
    assert not origin_allowed("http://evil.example", own)
    assert not origin_allowed("http://localhost:8322", own)
    assert origin_allowed("http://anything", ["*"])


def test_rate_limiter() -> None:
    limiter = RateLimiter(rate=10, burst=3)
    assert [limiter.allow(0.0) for _ in range(4)] == [True, True, True, False]
    assert limiter.allow(0.1)  # one token back after 0.1 s
    assert not limiter.allow(0.1)
    assert all(limiter.allow(10.0) for _ in range(3))  # refilled, capped at the burst
    assert not limiter.allow(10.0)
    with pytest.raises(ValueError):
        RateLimiter(rate=0, burst=1)


def test_parse_head() -> None:
    head = parse_head(
        b"GET /v1/sessions/abc?since=5&updates=full HTTP/1.1\r\nHost: x\r\n"
        b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Protocol: pitrio.v1, pitrio.token.t\r\n\r\n"
    )
    assert head.method == "GET" and head.path == "/v1/sessions/abc"
    assert head.param("since") == "5" and head.param("updates") == "full"
    assert head.is_websocket
    assert head.header("HOST") == "x"
    assert head.header_list("sec-websocket-protocol") == ["pitrio.v1", "pitrio.token.t"]
    # Percent-encoded path tricks are decoded, so the id check sees them.
    assert parse_head(b"GET /v1/sessions/..%2Fx HTTP/1.1\r\n\r\n").path == "/v1/sessions/../x"


@pytest.mark.parametrize(
    "bad",
    [b"GARBAGE\r\n\r\n", b"GET http://x/ HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\nNoColon\r\n\r\n"],
)
def test_parse_head_rejects(bad: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_head(bad)


def test_response_bytes() -> None:
    data = response(404, b"{}", content_type="application/json")
    assert data.startswith(b"HTTP/1.1 404 Not Found\r\n")
    assert b"Content-Length: 2\r\n" in data and data.endswith(b"\r\n\r\n{}")


def test_metrics_text() -> None:
    text = metrics.render(
        [
            metrics.gauge("pitrio_x", "An x.", 2),
            metrics.Metric("pitrio_y", "counter", 'Y "q"', (({"status": 'a"b'}, 1.5),)),
        ]
    )
    assert text == (
        "# HELP pitrio_x An x.\n# TYPE pitrio_x gauge\npitrio_x 2\n"
        '# HELP pitrio_y Y "q"\n# TYPE pitrio_y counter\npitrio_y{status="a\\"b"} 1.5\n'
    )


def test_with_seq() -> None:
    assert with_seq(b'{"type":"agent_start"}\n', 7) == b'{"type":"agent_start","seq":7}'
