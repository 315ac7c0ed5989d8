"""The daemon's access rules, pure except for the token file: token, origins, rates, hosts.

* **Token**: generated on first start into ``<agent dir>/daemon-token`` (mode 0600; a file
  others may read or write is refused, like ``auth.json``), presented as ``Authorization:
  Bearer <token>`` or, by browsers (which cannot set headers on a websocket), as the
  subprotocol ``pitrio.token.<token>`` next to ``pitrio.v1``. Compared in constant time.
* **Origin**: a browser's ``Origin`` must be in the allow list (the daemon's own origins plus
  the configured ones); a request without ``Origin`` is not from a browser page and passes
  (it still needs the token).
* **Addresses**: binding anything but a loopback address requires authentication.
* **Rate**: a token bucket per connection.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from pitrio.errors import PitrioError

TOKEN_FILE = "daemon-token"
SUBPROTOCOL = "pitrio.v1"
TOKEN_SUBPROTOCOL_PREFIX = "pitrio.token."


class TokenFileError(PitrioError):
    """The token file is unusable (unsafe permissions, empty, unreadable)."""


def token_path(agent_dir: Path) -> Path:
    """Where the daemon's token lives."""
    return agent_dir / TOKEN_FILE


def new_token() -> str:
    """A fresh token: 256 random bits, URL-safe (valid in a websocket subprotocol)."""
    return secrets.token_urlsafe(32)


def load_or_create_token(agent_dir: Path) -> tuple[str, bool]:
    """The daemon's token and whether it was created now (first start)."""
    path = token_path(agent_dir)
    try:
        info = path.stat()
    except FileNotFoundError:
        agent_dir.mkdir(parents=True, exist_ok=True)
        token = new_token()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return load_or_create_token(agent_dir)  # another daemon started at once
        with os.fdopen(fd, "w") as file:
            file.write(token + "\n")
            file.flush()
            os.fsync(file.fileno())
        return token, True
    if info.st_mode & 0o077:
        raise TokenFileError(
            f"{path}: permissions {stat.filemode(info.st_mode)} let others read or change the "
            f"daemon token; run: chmod 600 {path}"
        )
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise TokenFileError(f"{path}: the token file is empty (delete it to get a new one)")
    return token, False


def token_matches(presented: str | None, expected: str) -> bool:
    """Constant-time comparison (the time does not tell how much of a guess was right)."""
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


def presented_token(
    authorization: str | None, subprotocols: Sequence[str]
) -> tuple[str | None, str]:
    """The token a request presents and where: ``Authorization: Bearer`` first, else a
    ``pitrio.token.<token>`` subprotocol (``("", "none")`` when there is none)."""
    if authorization is not None:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip(), "header"
    for protocol in subprotocols:
        if protocol.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return protocol[len(TOKEN_SUBPROTOCOL_PREFIX) :], "subprotocol"
    return None, "none"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only reaches this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def own_origins(host: str, port: int) -> tuple[str, ...]:
    """The origins of the daemon's own page (``http://127.0.0.1:8321`` and friends)."""
    names = {host}
    if is_loopback(host):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    shown = sorted(f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names)
    return tuple(f"http://{name}:{port}" for name in shown)


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """A request without ``Origin`` passes; a browser's must be listed (exactly, or ``*``)."""
    if origin is None:
        return True
    wanted = origin.strip().rstrip("/").lower()
    return any(entry == "*" or entry.rstrip("/").lower() == wanted for entry in allowed)


@attrs.define
class RateLimiter:
    """A token bucket: ``rate`` messages per second on average, bursts up to ``burst``."""

    rate: float
    burst: float
    tokens: float = attrs.field(default=-1.0)
    updated: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        if self.tokens < 0:
            self.tokens = self.burst

    def allow(self, now: float) -> bool:
        """Take one token at ``now`` (seconds); ``False`` when the bucket is empty."""
        if self.updated is not None and now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now if self.updated is None else max(self.updated, now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
