"""The google-vertex provider: a Vertex API key, or application-default credentials.

ADC runs for real through google-auth: a service-account JSON with a key made for the test,
whose ``token_uri`` is a loopback token endpoint; the signed JWT it receives is verified.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson
import pytest
import trio
import trio.lowlevel
import trio.testing
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers.google_vertex import (
    LOCATION_MISSING,
    PROJECT_MISSING,
    GoogleVertexProvider,
    usable_api_key,
    vertex_url,
)
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages.content import TextContent
from tests.actors.providers.loopback import LoopbackServer, Reply, loopback_server, sse
from tests.actors.providers.support import collect, final, make_model

API = "google-vertex"
ANSWER = b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},' \
    b'"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,' \
    b'"candidatesTokenCount":1,"totalTokenCount":6}}\r\n\r\n'  # fmt: skip
METHOD = "publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def model(base_url: str) -> Any:
    return make_model(API, base_url, provider="google-vertex", id="gemini-2.5-flash")


def token_reply(token: str = "ya29.test-token", expires_in: int = 3600) -> Reply:
    body = {"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}
    return Reply(body=orjson.dumps(body), headers=[("content-type", "application/json")])


def make_key_pair() -> tuple[str, bytes]:
    """A fresh RSA key: its private PEM (for the service-account file) and public PEM."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


@pytest.fixture
def key_pair() -> tuple[str, bytes]:
    return make_key_pair()


def service_account(tmp_path: Path, private_key: str, token_uri: str) -> Path:
    path = tmp_path / "sa.json"
    path.write_text(
        orjson.dumps(
            {
                "type": "service_account",
                "project_id": "file-project",
                "private_key_id": "test-key-1",
                "private_key": private_key,
                "client_email": "pitrio-test@file-project.iam.gserviceaccount.com",
                "client_id": "1234567890",
                "token_uri": token_uri,
            }
        ).decode()
    )
    return path


def adc_env(path: Path, **extra: str) -> dict[str, str]:
    return {
        "GOOGLE_APPLICATION_CREDENTIALS": str(path),
        "GOOGLE_CLOUD_PROJECT": "proj",
        "GOOGLE_CLOUD_LOCATION": "us-central1",
        **extra,
    }


def test_urls() -> None:
    regional = make_model(API, "https://{location}-aiplatform.googleapis.com", id="gemini-x")
    assert vertex_url(regional, project="p", location="europe-west4", api_key=False) == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/europe-west4/"
        "publishers/google/models/gemini-x:streamGenerateContent?alt=sse"
    )
    assert vertex_url(regional, project="p", location="global", api_key=False) == (
        "https://aiplatform.googleapis.com/v1/projects/p/locations/global/"
        "publishers/google/models/gemini-x:streamGenerateContent?alt=sse"
    )
    assert vertex_url(regional, project=None, location=None, api_key=True) == (
        "https://aiplatform.googleapis.com/v1/"
        "publishers/google/models/gemini-x:streamGenerateContent?alt=sse"
    )
    custom = make_model(API, "https://proxy.example/v1beta1", id="gemini-x")
    assert vertex_url(custom, project="p", location="l", api_key=False) == (
        "https://proxy.example/v1beta1/"
        "publishers/google/models/gemini-x:streamGenerateContent?alt=sse"
    )


def test_placeholder_keys_do_not_count() -> None:
    assert usable_api_key("gcp-vertex-credentials") is None
    assert usable_api_key("<your key>") is None
    assert usable_api_key("  ") is None
    assert usable_api_key(" AQ.abc ") == "AQ.abc"


async def test_api_key_goes_to_the_collection_url(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(sse(ANSWER))
    creds = Credentials(auth_path=None, env={"GOOGLE_CLOUD_API_KEY": "AQ.vertex-key"})
    message = final(await collect(GoogleVertexProvider(pool, creds), model(server.base_url)))
    assert message.content == (TextContent(text="ok"),)
    assert message.api == API and message.usage.total_tokens == 6
    request = server.requests[0]
    assert request.path == "/v1/" + METHOD
    assert request.headers["x-goog-api-key"] == "AQ.vertex-key"
    assert "authorization" not in request.headers


async def test_adc_service_account_token_from_a_loopback_endpoint(
    server: LoopbackServer, pool: HttpPool, tmp_path: Path, key_pair: tuple[str, bytes]
) -> None:
    import google.auth.jwt

    private, public = key_pair
    async with loopback_server() as tokens:
        tokens.push(token_reply())
        path = service_account(tmp_path, private, tokens.base_url + "/token")
        # The marker pi stores for ADC is no key: ADC is used.
        env = adc_env(path, GOOGLE_CLOUD_API_KEY="gcp-vertex-credentials")
        provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=env))
        regional = model(server.base_url + "/{location}")
        server.push(sse(ANSWER), sse(ANSWER))
        first = final(await collect(provider, regional))
        second = final(await collect(provider, regional))
    assert first.stop_reason == second.stop_reason == "stop"
    assert len(tokens.requests) == 1  # the token is reused while valid
    grant = parse_qs(tokens.requests[0].body.decode())
    assert grant["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
    claims = google.auth.jwt.decode(
        grant["assertion"][0], certs=public, audience="https://oauth2.googleapis.com/token"
    )
    assert claims["iss"] == "pitrio-test@file-project.iam.gserviceaccount.com"
    assert claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    for request in server.requests:
        assert request.path == f"/us-central1/v1/projects/proj/locations/us-central1/{METHOD}"
        assert request.headers["authorization"] == "Bearer ya29.test-token"


async def test_an_expired_token_is_refreshed(
    server: LoopbackServer, pool: HttpPool, tmp_path: Path, key_pair: tuple[str, bytes]
) -> None:
    async with loopback_server() as tokens:
        # google-auth treats a token this close to its expiry as expired already.
        tokens.push(token_reply("ya29.one", expires_in=1), token_reply("ya29.two"))
        path = service_account(tmp_path, key_pair[0], tokens.base_url + "/token")
        provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=adc_env(path)))
        server.push(sse(ANSWER), sse(ANSWER))
        await collect(provider, model(server.base_url + "/{location}"))
        await collect(provider, model(server.base_url + "/{location}"))
    assert len(tokens.requests) == 2
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer ya29.one",
        "Bearer ya29.two",
    ]


async def test_a_refused_grant_is_a_credential_error_without_a_request(
    server: LoopbackServer, pool: HttpPool, tmp_path: Path, key_pair: tuple[str, bytes]
) -> None:
    async with loopback_server() as tokens:
        refused = {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        tokens.push(
            Reply(
                status=400,
                body=orjson.dumps(refused),
                headers=[("content-type", "application/json")],
            )
        )
        path = service_account(tmp_path, key_pair[0], tokens.base_url + "/token")
        provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=adc_env(path)))
        message = final(await collect(provider, model(server.base_url + "/{location}")))
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert message.error_message.startswith("Google application-default credentials failed:")
    assert "Invalid JWT Signature." in message.error_message
    assert server.requests == []


@pytest.mark.parametrize(
    ("env", "text"),
    [
        ({"GOOGLE_CLOUD_LOCATION": "us-central1"}, PROJECT_MISSING),
        ({"GCLOUD_PROJECT": "proj"}, LOCATION_MISSING),
    ],
)
async def test_project_and_location_are_required_for_adc(
    pool: HttpPool, env: dict[str, str], text: str
) -> None:
    provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=env))
    message = final(await collect(provider, model("https://{location}-aiplatform.googleapis.com")))
    assert (message.stop_reason, message.error_message) == ("error", text)


async def test_missing_google_auth_names_the_pip_command(
    pool: HttpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "google.auth", None)
    env = {"GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "us-central1"}
    provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=env))
    message = final(await collect(provider, model("https://{location}-aiplatform.googleapis.com")))
    assert message.error_message == (
        "google-vertex needs the google-auth library: pip install 'pitrio[google]'"
    )


async def test_an_unreadable_credentials_file_is_named(pool: HttpPool, tmp_path: Path) -> None:
    env = adc_env(tmp_path / "missing.json")
    provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=env))
    message = final(await collect(provider, model("https://{location}-aiplatform.googleapis.com")))
    assert message.error_message is not None
    assert message.error_message.startswith(
        f"Cannot read GOOGLE_APPLICATION_CREDENTIALS {tmp_path / 'missing.json'}:"
    )


async def test_an_abort_does_not_wait_for_the_token_endpoint(
    pool: HttpPool, tmp_path: Path, key_pair: tuple[str, bytes]
) -> None:
    async with loopback_server() as tokens:
        tokens.push(Reply(body=b"", ending="hang"))  # headers, then silence
        path = service_account(tmp_path, key_pair[0], tokens.base_url + "/token")
        provider = GoogleVertexProvider(pool, Credentials(auth_path=None, env=adc_env(path)))
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def abort_once_waiting() -> None:
                    while not tokens.requests:  # the token request has arrived
                        await trio.testing.wait_all_tasks_blocked()
                        await trio.lowlevel.checkpoint()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(abort_once_waiting)
                await collect(provider, model("https://{location}-aiplatform.googleapis.com"))
                pytest.fail("the request should have been cancelled")  # pragma: no cover
        assert len(tokens.requests) == 1
