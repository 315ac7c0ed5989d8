"""The AWS parts of the Bedrock provider, all done by botocore (``pip install 'pitrio[bedrock]'``).

* credentials: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` of the
  session's environment first, then botocore's whole chain (profiles, SSO, process, container
  and instance metadata), looked up in a worker thread since it may touch files or network;
* region: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the region of a standard
  ``bedrock-runtime.<region>.amazonaws.com`` base URL, else ``us-east-1``;
* SigV4 signing (``botocore.auth.SigV4Auth``, service ``bedrock``), or a bearer token
  (``AWS_BEARER_TOKEN_BEDROCK`` or the request's key) unless ``AWS_BEDROCK_SKIP_AUTH=1``;
* event-stream frames decoded and CRC-checked by ``botocore.eventstream.EventStreamBuffer``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
import orjson
import trio

from pitrio.actors.model_router.providers.http import HttpRequest
from pitrio.errors import CredentialError
from pitrio.messages.model import Model

INSTALL_HINT = "pip install 'pitrio[bedrock]'"
SERVICE = "bedrock"
DEFAULT_REGION = "us-east-1"
_STANDARD_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


def _botocore() -> Any:
    try:
        import botocore.auth  # type: ignore[import-untyped]
        import botocore.awsrequest  # type: ignore[import-untyped]
        import botocore.credentials  # type: ignore[import-untyped]
        import botocore.eventstream  # type: ignore[import-untyped]
        import botocore.session  # type: ignore[import-untyped]
    except ImportError:
        raise CredentialError(
            f"The bedrock-converse-stream API needs botocore: {INSTALL_HINT}"
        ) from None
    return botocore


def configured_region(env: Mapping[str, str]) -> str | None:
    """The region the environment names (``AWS_REGION``, then ``AWS_DEFAULT_REGION``)."""
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def endpoint(
    model: Model, env: Mapping[str, str], profile_region: str | None = None
) -> tuple[str, str]:
    """``(base URL, signing region)`` of a request to ``model``, as pi's client picks them.

    A custom base URL (a proxy, a VPC endpoint) is kept. A standard
    ``bedrock-runtime.<region>.amazonaws.com`` one is kept only when no region (nor profile)
    is configured; otherwise the configured region's standard endpoint is used, so the
    catalogue's ``us-east-1`` does not override ``AWS_REGION``.
    """
    configured = configured_region(env)
    match = _STANDARD_HOST.match((urlsplit(model.base_url).hostname or "").lower())
    if match is None:
        return model.base_url, configured or profile_region or DEFAULT_REGION
    if configured is None and not env.get("AWS_PROFILE"):
        return model.base_url, match.group(1)
    region = configured or profile_region or DEFAULT_REGION
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"https://bedrock-runtime.{region}{suffix}", region


def _profile_region(profile: str) -> str | None:
    botocore = _botocore()
    session = botocore.session.Session(profile=profile)
    region = session.get_config_variable("region")
    return str(region) if region else None


async def resolve_endpoint(model: Model, env: Mapping[str, str]) -> tuple[str, str]:
    """:func:`endpoint`, reading a named profile's region from the AWS config files (in a
    thread) when ``AWS_PROFILE`` is set and no region variable is."""
    profile = env.get("AWS_PROFILE")
    profile_region = None
    if profile and configured_region(env) is None:
        profile_region = await trio.to_thread.run_sync(_profile_region, profile)
    return endpoint(model, env, profile_region)


def _environment_credentials(env: Mapping[str, str]) -> Any:
    botocore = _botocore()
    return botocore.credentials.EnvProvider(environ=dict(env)).load()


def _chain_credentials(profile: str | None) -> Any:
    botocore = _botocore()
    return botocore.session.Session(profile=profile).get_credentials()


_CHAIN: dict[tuple[tuple[str, str], ...], Any] = {}
"""Credentials the chain found, per set of ``AWS_*`` variables: a lookup reads files (and may
ask a metadata service), and botocore's refreshable credentials renew themselves."""


async def load_credentials(env: Mapping[str, str]) -> Any:
    """Frozen AWS credentials: the environment's, else botocore's chain (in a thread)."""
    found = _environment_credentials(env)
    if found is None:
        key = tuple(sorted((k, v) for k, v in env.items() if k.startswith("AWS_")))
        found = _CHAIN.get(key)
        if found is None:
            found = await trio.to_thread.run_sync(
                _chain_credentials, env.get("AWS_PROFILE"), abandon_on_cancel=True
            )
            if found is not None:
                _CHAIN[key] = found
    if found is None:
        raise CredentialError(
            "No AWS credentials for bedrock-converse-stream: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK"
        )
    return await trio.to_thread.run_sync(found.get_frozen_credentials, abandon_on_cancel=True)


def sign(request: HttpRequest, credentials: Any, region: str) -> HttpRequest:
    """``request`` with SigV4 headers (``authorization``, ``x-amz-date``, and
    ``x-amz-security-token`` for temporary credentials) (pure given the clock)."""
    botocore = _botocore()
    aws = botocore.awsrequest.AWSRequest(
        method="POST", url=request.url, data=request.content(), headers=dict(request.headers)
    )
    botocore.auth.SigV4Auth(credentials, SERVICE, region).add_auth(aws)
    headers = {name.lower(): str(value) for name, value in aws.headers.items()}
    return attrs.evolve(request, headers=headers)


async def authorise(
    request: HttpRequest, env: Mapping[str, str], region: str, api_key: str | None = None
) -> HttpRequest:
    """``request`` authorised as pi 1.6.0's Bedrock client does: the request's API key (a
    Bedrock API key, e.g. ``apiKey`` in models.json), else ``AWS_BEARER_TOKEN_BEDROCK``, as a
    bearer token, else SigV4 for ``region``; nothing when ``AWS_BEDROCK_SKIP_AUTH=1`` (a proxy
    that authorises by itself)."""
    if env.get("AWS_BEDROCK_SKIP_AUTH") == "1":
        return request
    token = api_key or env.get("AWS_BEARER_TOKEN_BEDROCK")
    if token:
        headers = {**request.headers, "authorization": f"Bearer {token}"}
        return attrs.evolve(request, headers=headers)
    credentials = await load_credentials(env)
    return sign(request, credentials, region)


def error_fields(headers: Mapping[str, str], body: bytes) -> tuple[str | None, str]:
    """The exception name and message of an AWS JSON error answer."""
    lowered = {name.lower(): value for name, value in headers.items()}
    kind = lowered.get("x-amzn-errortype")
    message = ""
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict):
        message = str(document.get("message") or document.get("Message") or "")
        kind = kind or (str(document["__type"]) if document.get("__type") else None)
    elif body:
        message = body.decode("utf-8", "replace").strip()[:500]
    if kind:
        # "ThrottlingException:http://internal.amazon.com/..." and "ns#Name" forms
        kind = kind.split(":", 1)[0].rsplit("#", 1)[-1]
    return kind or None, message


class FrameError(Exception):
    """An event-stream frame that fails its checks (lengths, CRCs)."""


@attrs.frozen
class Frame:
    """One decoded frame: its ``:event-type`` (or ``:exception-type`` for an exception) and
    payload bytes."""

    event: str
    payload: bytes
    exception: str | None = None


class FrameDecoder:
    """Bytes in, :class:`Frame` out (sans-IO), botocore's ``EventStreamBuffer`` underneath."""

    def __init__(self) -> None:
        self._buffer = _botocore().eventstream.EventStreamBuffer()

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames ``chunk`` completes; :class:`FrameError` on a damaged frame."""
        botocore = _botocore()
        self._buffer.add_data(chunk)
        out: list[Frame] = []
        try:
            for message in self._buffer:
                headers = message.headers
                message_type = headers.get(":message-type", "event")
                if message_type == "event":
                    out.append(Frame(str(headers.get(":event-type", "")), message.payload))
                else:
                    kind = headers.get(":exception-type") or headers.get(":error-code") or "error"
                    payload = message.payload
                    if not payload and headers.get(":error-message"):
                        payload = orjson.dumps({"message": str(headers[":error-message"])})
                    out.append(Frame("", payload, exception=str(kind)))
        except botocore.eventstream.ParserError as exc:
            raise FrameError(str(exc)) from None
        return out
