"""An HTTP server's ``oauth`` object as pi 1.6.0 reads it: the checks (with pi's messages),
and where the sign-in's loopback callback listens and what redirect URI it sends.

Pure: no I/O. The fields are ``clientId``, ``clientSecret``, ``callbackPort``,
``callbackUrl``, ``scope``, ``clientName``, ``clientRegistration`` (``auto``, ``dcr``,
``cimd``) and ``authServerMetadataUrl``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
DEFAULT_CALLBACK = "http://127.0.0.1/callback"
REGISTRATIONS = ("auto", "dcr", "cimd")


def _host(url: str) -> str:
    """The host as WHATWG URLs write it (lower case, an IPv6 address in brackets)."""
    netloc = urlsplit(url).netloc.rsplit("@", 1)[-1].lower()
    if netloc.startswith("["):
        return netloc[: netloc.index("]") + 1]
    return netloc.split(":", 1)[0]


def _port(url: str) -> int | None:
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def _is_loopback_redirect(value: str) -> bool:
    parts = urlsplit(value)
    return (
        parts.scheme.lower() == "http"
        and _host(value) in LOOPBACK_HOSTS
        and not parts.query
        and not parts.fragment
        and "?" not in value
        and "#" not in value
    )


def check_oauth(value: Any) -> None:
    """Raise ``ValueError`` with pi's message when the ``oauth`` object is not valid."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise ValueError("oauth must be an object")
    for field in ("clientId", "clientSecret", "scope"):
        if field in value and not isinstance(value[field], str):
            raise ValueError(f"oauth.{field} must be a string")
    port = value.get("callbackPort")
    if "callbackPort" in value and (
        isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535
    ):
        raise ValueError("oauth.callbackPort must be a port number")
    url = value.get("callbackUrl")
    if "callbackUrl" in value:
        if not isinstance(url, str) or not _is_loopback_redirect(url):
            raise ValueError(
                "oauth.callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] "
                "without query or fragment"
            )
        written = _port(url)
        if written is not None and port is not None and written != port:
            raise ValueError("oauth.callbackUrl and oauth.callbackPort name different ports")
    name = value.get("clientName")
    if "clientName" in value and (not isinstance(name, str) or not name.strip()):
        raise ValueError("oauth.clientName must be a non-empty string")
    registration = value.get("clientRegistration")
    if "clientRegistration" in value and registration not in REGISTRATIONS:
        raise ValueError('oauth.clientRegistration must be "auto", "dcr", or "cimd"')
    if registration == "cimd":
        if "clientId" in value or "clientName" in value:
            raise ValueError(
                'oauth.clientRegistration "cimd" cannot be combined with oauth.clientId '
                "or oauth.clientName"
            )
        if isinstance(url, str) and (_host(url) == "[::1]" or urlsplit(url).path != "/callback"):
            raise ValueError(
                'oauth.clientRegistration "cimd" requires oauth.callbackUrl on localhost or '
                "127.0.0.1 with path /callback"
            )
    metadata = value.get("authServerMetadataUrl")
    if "authServerMetadataUrl" in value and not (
        isinstance(metadata, str) and secure_metadata_url(metadata)
    ):
        raise ValueError(
            "oauth.authServerMetadataUrl must be an https URL, or http on localhost, "
            "127.0.0.1, or [::1]"
        )


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is ``localhost``, ``127.0.0.1`` or ``[::1]``."""
    return _host(url) in LOOPBACK_HOSTS


def secure_metadata_url(url: str) -> bool:
    """https anywhere, http only on a loopback host (pi's rule for a configured document)."""
    scheme = urlsplit(url).scheme.lower()
    host = _host(url)
    if not host:
        return False
    return scheme == "https" or (scheme == "http" and host in LOOPBACK_HOSTS)


@attrs.frozen
class Loopback:
    """Where the callback listens (``bind_host``, ``port``: ``None`` for any free one) and
    the redirect URI: ``fixed_redirect`` as configured, else :meth:`redirect_for` the port
    the listener got."""

    bind_host: str
    redirect_host: str
    port: int | None
    path: str
    fixed_redirect: str | None

    def redirect_for(self, port: int) -> str:
        """The redirect URI of a listener on ``port``."""
        return self.fixed_redirect or f"http://{self.redirect_host}:{port}{self.path}"


def loopback(oauth: Mapping[str, Any]) -> Loopback:
    """pi's loopback settings: ``callbackUrl`` (sent exactly as written when it has a port;
    else ``callbackPort`` or a free port is put in it), ``localhost`` served on 127.0.0.1."""
    configured = oauth.get("callbackUrl")
    url = configured if isinstance(configured, str) else DEFAULT_CALLBACK
    host = _host(url)
    written = _port(url)
    setting = oauth.get("callbackPort")
    port = written if written is not None else setting if isinstance(setting, int) else None
    fixed: str | None = None
    if written is not None:
        fixed = url
    elif port is not None:
        parts = urlsplit(url)
        fixed = urlunsplit((parts.scheme, f"{host}:{port}", parts.path or "/", "", ""))
    bare = host.strip("[]")
    return Loopback(
        bind_host="127.0.0.1" if bare == "localhost" else bare,
        redirect_host=host,
        port=port,
        path=urlsplit(url).path or "/",
        fixed_redirect=fixed,
    )
