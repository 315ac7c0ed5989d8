"""Where ``pitrio attach`` finds the daemon and its token, and what it says when it cannot get in.

The address comes from ``--url``, ``$PITRIO_DAEMON_URL``, the ``daemon.json`` a running
``pitrio serve`` writes into the agent dir, else ``http://127.0.0.1:8321/``; the token from
``--token``, ``$PITRIO_DAEMON_TOKEN`` or the agent dir's ``daemon-token``. A failure is told as a
sentence naming the address and what to do (start ``pitrio serve``, check the token file), never
as an exception's repr.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import attrs
import trio

from pitrio.sdk.store import agent_dir as default_agent_dir
from pitrio.transports.daemon.security import token_path

DEFAULT_URL = "http://127.0.0.1:8321/"


def daemon_url(explicit: str | None) -> str:
    """Where the daemon is (``http://host:port/``)."""
    if explicit:
        return explicit
    if env := os.environ.get("PITRIO_DAEMON_URL"):
        return env
    from pitrio.transports.serve import read_state

    state = read_state(default_agent_dir())
    url = state.get("url") if state else None
    return url if isinstance(url, str) else DEFAULT_URL


@attrs.frozen
class Token:
    """The token to present (``None``: none found) and where it came from, for error texts."""

    value: str | None
    source: str
    """``--token``, ``$PITRIO_DAEMON_TOKEN``, or ``file``."""
    file: Path


def daemon_token(explicit: str | None) -> Token:
    """The token to present, and where it came from."""
    file = token_path(default_agent_dir())
    if explicit:
        return Token(explicit, "--token", file)
    if env := os.environ.get("PITRIO_DAEMON_TOKEN"):
        return Token(env, "$PITRIO_DAEMON_TOKEN", file)
    try:
        return Token(file.read_text(encoding="utf-8").strip() or None, "file", file)
    except OSError:
        return Token(None, "file", file)


def ws_url(base: str, path: str) -> str:
    """``http://h:p/`` + ``/v1/host`` → ``ws://h:p/v1/host``."""
    root = base.rstrip("/")
    if root.startswith("https://"):
        root = "wss://" + root[len("https://") :]
    elif root.startswith("http://"):
        root = "ws://" + root[len("http://") :]
    return root + path


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups among them."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(reversed(current.exceptions))
        for linked in (current.__context__, current.__cause__):
            if linked is not None:
                stack.append(linked)


def unreachable_reason(exc: BaseException) -> str:
    """Why a connection could not be made, in a few words (``connection refused``)."""
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            return f"unknown host ({cause.strerror or cause})"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, TimeoutError | trio.TooSlowError):
            return "timed out"
        if (
            isinstance(cause, OSError)
            and cause.errno is not None
            and cause.errno in errno.errorcode
        ):
            return os.strerror(cause.errno).lower()
    for cause in _causes(exc):
        if str(cause):
            return str(cause)
    return type(exc).__name__


def closed_reason(exc: BaseException) -> str:
    """Why an open connection ended: the close code the daemon sent, else the socket's error."""
    reason = getattr(exc, "reason", None)
    code = getattr(reason, "code", None)
    if code is not None:
        told = getattr(reason, "reason", None)
        return f"closed ({code}{' ' + told if told else ''})"
    return unreachable_reason(exc)


def unreachable(base: str, exc: BaseException) -> str:
    """The message for a daemon that cannot be reached."""
    return (
        f"cannot reach the daemon at {base}: {unreachable_reason(exc)}"
        " — start it with `pitrio serve`"
    )


def _body_error(body: bytes | None) -> str:
    text = (body or b"").decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return text
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, str):
        return error
    return text


def refused(status: int, body: bytes | None, token: Token, what: str) -> str:
    """The message for a handshake the daemon answered with an HTTP error; ``what`` names the
    endpoint (``session <id>`` or ``the daemon``)."""
    if status == 401:
        if token.value is None:
            return (
                f"the daemon wants a token (HTTP 401) and none was found (no token file "
                f"{token.file}); pass --token or set $PITRIO_DAEMON_TOKEN"
            )
        if token.source == "file":
            return (
                f"the daemon refused the token (HTTP 401); check the token file {token.file}"
                " or pass --token"
            )
        return (
            f"the daemon refused the token from {token.source} (HTTP 401); check it, or"
            f" the token file {token.file}"
        )
    reason = _body_error(body)
    if status == 404 and what.startswith("session"):
        return (
            f"the daemon has no {what} (HTTP 404: {reason}); leave the id out to start a new"
            " session"
        )
    return f"the daemon refused to open {what} (HTTP {status}): {reason}"
