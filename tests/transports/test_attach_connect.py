"""Where ``pitrio attach`` looks for the daemon and what it says when it cannot get in."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pitrio.transports.attach_connect import (
    Token,
    daemon_token,
    refused,
    unreachable,
    unreachable_reason,
    ws_url,
)


def test_the_reason_is_dug_out_of_trios_exception_chain() -> None:
    refused_error = ConnectionRefusedError(111, "Error connecting: Connection refused")
    group = ExceptionGroup("all attempts failed", [refused_error])
    outer = OSError("all attempts to connect to 127.0.0.1:1 failed")
    outer.__cause__ = group
    handshake = RuntimeError()
    handshake.__cause__ = outer
    assert unreachable_reason(handshake) == "connection refused"
    assert unreachable_reason(socket.gaierror(-2, "Name or service not known")) == (
        "unknown host (Name or service not known)"
    )
    assert unreachable_reason(OSError(113, "No route to host")) == "no route to host"
    assert unreachable_reason(TimeoutError()) == "timed out"
    assert unreachable_reason(RuntimeError()) == "RuntimeError"
    assert unreachable("http://h:1/", outer) == (
        "cannot reach the daemon at http://h:1/: connection refused — start it with `pitrio serve`"
    )


def test_refusals_say_what_to_do(tmp_path: Path) -> None:
    file = tmp_path / "daemon-token"
    none = Token(None, "file", file)
    assert refused(401, b"", none, "the daemon") == (
        f"the daemon wants a token (HTTP 401) and none was found (no token file {file});"
        " pass --token or set $PITRIO_DAEMON_TOKEN"
    )
    env = Token("x", "$PITRIO_DAEMON_TOKEN", file)
    assert "from $PITRIO_DAEMON_TOKEN (HTTP 401)" in refused(401, b"", env, "the daemon")
    body = b'{"error": "no session abc"}\n'
    assert refused(404, body, none, "session abc") == (
        "the daemon has no session abc (HTTP 404: no session abc); leave the id out to start"
        " a new session"
    )
    assert refused(403, b"origin not allowed", none, "the daemon") == (
        "the daemon refused to open the daemon (HTTP 403): origin not allowed"
    )


def test_the_token_comes_from_the_flag_the_environment_or_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path))
    monkeypatch.delenv("PITRIO_DAEMON_TOKEN", raising=False)
    assert daemon_token(None).value is None
    (tmp_path / "daemon-token").write_text("from-file\n")
    assert daemon_token(None) == Token("from-file", "file", tmp_path / "daemon-token")
    monkeypatch.setenv("PITRIO_DAEMON_TOKEN", "from-env")
    assert daemon_token(None).source == "$PITRIO_DAEMON_TOKEN"
    assert daemon_token("flag").value == "flag"


def test_ws_url() -> None:
    assert ws_url("http://127.0.0.1:8321/", "/v1/host") == "ws://127.0.0.1:8321/v1/host"
    assert ws_url("https://example.test", "/v1/host") == "wss://example.test/v1/host"
