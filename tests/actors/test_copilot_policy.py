"""Accepting the policy of GitHub Copilot's models after a login, against a loopback Copilot API
(``POST /models/{id}/policy`` with ``{"state": "enabled"}``, a 2xx answer when accepted)."""

from __future__ import annotations

import trio

from pitrio.actors.model_router import oauth
from pitrio.actors.model_router.oauth_login import copilot_model_ids, enable_copilot_models
from tests.oauth_server import oauth_vendor


def test_the_models_enabled_are_the_catalogues_copilot_models() -> None:
    ids = copilot_model_ids()
    assert len(ids) == 35  # pi 1.6.0's github-copilot models (the catalogue of pi-ai 1.6.0)
    assert "claude-sonnet-4.6" in ids and "grok-4.7" in ids


def test_the_policy_request_goes_to_the_host_the_token_names() -> None:
    token = "tid=1;proxy-ep=proxy.business.githubcopilot.com"
    request = oauth.copilot_policy_request(token, None, "gpt-5", {})
    assert (request.method, request.url) == (
        "POST",
        "https://api.business.githubcopilot.com/models/gpt-5/policy",
    )
    enterprise = oauth.copilot_policy_request("opaque", "ghe.example.com", "gpt-5", {})
    assert enterprise.url == "https://copilot-api.ghe.example.com/models/gpt-5/policy"
    assert enterprise.headers["Authorization"] == "Bearer opaque"
    assert enterprise.headers["User-Agent"] == "GitHubCopilotChat/0.35.0"


async def test_every_model_is_asked_at_once_and_refusals_are_only_recorded() -> None:
    results: dict[str, bool] = {}
    async with oauth_vendor() as (vendor, base):
        vendor.script("/models/a/policy", 200, {})
        vendor.script("/models/c/policy", 204, b"")
        vendor.script("/models/b/policy", 403, {"error": "not allowed"})
        vendor.hold = trio.Event()  # no reply until all four have arrived
        env = {oauth.TEST_BASE_ENV: base}

        async def run() -> None:
            results.update(await enable_copilot_models("tok", None, ("a", "b", "c", "d"), env))

        # Asked one after another, the held first reply would stall the rest: a failure.
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                while len(vendor.requests) < 4:  # all four in flight together
                    vendor.arrived = trio.Event()
                    await vendor.arrived.wait()
                vendor.hold.set()
    assert results == {"a": True, "b": False, "c": True, "d": False}  # d: 404
    assert sorted(request.path for request in vendor.requests) == [
        f"/models/{name}/policy" for name in "abcd"
    ]


async def test_an_unreachable_api_fails_no_one() -> None:
    env = {oauth.TEST_BASE_ENV: "http://127.0.0.1:9"}  # the discard port: nothing listens
    assert await enable_copilot_models("tok", None, ("a", "b"), env) == {"a": False, "b": False}
