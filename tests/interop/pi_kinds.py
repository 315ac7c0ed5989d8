"""The harness's provider-kind dimension: one loopback vendor per API kind pi 0.73.1 speaks.

Each :class:`Kind` says how both agents are pointed at the loopback vendor (the ``models.json``
provider's ``api``, ``baseUrl`` and ``apiKey``, and the environment a kind needs: AWS keys for
Bedrock, HTTP/1.1 for pi's Bedrock client, which speaks HTTP/2 by default). :class:`VendorMock`
is that vendor: the shared mock's script and request log (its ``MockState``, so scenarios script
it exactly as they script the OpenAI-compatible mock), answering every POST in the kind's wire
format (``pi_wire``) and recording, beside each body, the path and headers it came with.

``openai-completions`` stays on the shared mock itself (``pi_runner.MockLLM``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tests.interop import pi_wire
from tests.interop.pi_steps import Scenario

COMPLETIONS = "openai-completions"
KINDS_ENV = "PITRIO_INTEROP_KINDS"


def _codex_token() -> str:
    """A JWT-shaped access token naming a ChatGPT account (both agents read the claim).

    Its payload is padded so that it is plain base64 as well as base64url (pi decodes it with
    ``atob``, pitrio with the URL-safe alphabet).
    """
    filler = ""
    while True:
        claim = {"chatgpt_account_id": "acct_mock"}
        doc = {"https://api.openai.com/auth": claim, "pad": filler}
        raw = json.dumps(doc, separators=(",", ":")).encode()
        enc = base64.b64encode(raw).decode()
        if len(raw) % 3 == 0 and "+" not in enc and "/" not in enc:
            return f"eyJhbGciOiJub25lIn0.{enc}.c2ln"
        filler += "x"


@dataclass(frozen=True)
class Kind:
    """One API kind: its wire family, base URL path and what the agents need to reach it."""

    api: str
    family: str
    base_path: str = ""
    api_key: str = "mock-key"
    env: dict[str, str] = field(default_factory=dict)

    def base_url(self, port: int) -> str:
        """The ``models.json`` ``baseUrl`` for a vendor on ``port``."""
        return f"http://127.0.0.1:{port}{self.base_path}"


AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDMOCKMOCKMOCK",
    "AWS_SECRET_ACCESS_KEY": "mock-secret",
    "AWS_REGION": "us-east-1",
    "AWS_BEDROCK_FORCE_HTTP1": "1",
}

KINDS: dict[str, Kind] = {
    k.api: k
    for k in (
        Kind("anthropic-messages", "anthropic"),
        Kind("openai-responses", "responses", "/v1"),
        Kind("azure-openai-responses", "responses", "/openai/v1"),
        Kind("openai-codex-responses", "responses", api_key=_codex_token()),
        Kind("google-generative-ai", "google", "/v1beta"),
        Kind("google-vertex", "google", "/v1"),
        Kind("mistral-conversations", "mistral"),
        Kind("bedrock-converse-stream", "bedrock", env=AWS_ENV),
    )
}

# The scenarios that shape request bodies, run for every kind by default (about 60 s more than
# the completions matrix alone): text, multi-turn and the tool round trips (``tools``: four
# prompts, a tool error, an unknown tool), thinking at three levels with the reasoning replayed
# (``thinking_replay``), images, compaction, a retried request; the system prompt and the tools
# are in every request.
BODY_SCENARIOS = (
    "tools",
    "thinking_replay",
    "image_prompt",
    "compact_manual",
    "retry_requests",
)

KIND_SCENARIOS: dict[str, tuple[str, ...]] = {
    # A models.json compat key only this API reads (Anthropic message threads, issue 34).
    "anthropic-messages": ("anthropic_threads",),
}
"""Scenarios a kind runs by default beside :data:`BODY_SCENARIOS` (its own request fields)."""


# Scenarios a kind does not run, and why: they wait for auto-retry events that neither agent
# emits there. pi's AWS client repeats a failed request quietly first (twice, pitrio's adapter
# likewise), so the scripted failures are used up before the agent's retry would begin; pi
# 1.6.0's Codex client makes no repeat of its own (retry.provider.maxRetries, 0 by default)
# and the agent does not retry the error text it reports for a 500 (retry_requests shows
# both agents ending that way).
QUIET_RETRIES = (
    "retry_500_then_ok",
    "retry_429_then_ok",
    "resume_pi_retried",
    "resume_pitrio_retried",
)
UNFIT: dict[str, tuple[str, ...]] = {
    "openai-codex-responses": (
        *QUIET_RETRIES,
        "retry_exhausted",
        "retry_aborted",
        "retry_abort_command",
    ),
    "bedrock-converse-stream": QUIET_RETRIES,
}


def matrix(
    scenarios: list[Scenario], env: dict[str, str] | None = None
) -> list[tuple[str, Scenario]]:
    """The (kind, scenario) pairs beyond ``openai-completions`` that a run covers.

    ``PITRIO_INTEROP_KINDS`` unset: every kind with :data:`BODY_SCENARIOS` and its own
    :data:`KIND_SCENARIOS`; ``all``: every kind
    with every scenario; a comma-separated list of kinds: those with every scenario; ``none``:
    no other kind. A kind's :data:`UNFIT` scenarios are left out.
    """
    chosen = (os.environ if env is None else env).get(KINDS_ENV, "").strip()
    if chosen == "none":
        return []
    if not chosen:
        return [
            (k, sc)
            for k in KINDS
            for sc in scenarios
            if sc.name in BODY_SCENARIOS or sc.name in KIND_SCENARIOS.get(k, ())
        ]
    kinds = list(KINDS) if chosen == "all" else [k.strip() for k in chosen.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"{KINDS_ENV}: unknown kind(s) {unknown}; known: {sorted(KINDS)}")
    return [(k, sc) for k in kinds for sc in scenarios if sc.name not in UNFIT.get(k, ())]


def provider_block(kind: str, port: int, base_url: str) -> dict[str, Any]:
    """The ``models.json`` provider fields (without ``models``) that point at the vendor."""
    if kind == COMPLETIONS:
        return {"baseUrl": base_url, "api": COMPLETIONS}
    k = KINDS[kind]
    return {"baseUrl": k.base_url(port), "api": k.api, "apiKey": k.api_key}


def kind_env(kind: str) -> dict[str, str]:
    """The environment variables ``kind`` adds to the sandbox's."""
    return dict(KINDS[kind].env) if kind in KINDS else {}


def decoded_body(raw: bytes, encoding: str | None) -> bytes:
    """A request body as sent before its ``Content-Encoding`` (pi 1.6.0 compresses its Codex
    bodies with zstd): what is compared is the JSON either side meant, the encoding is
    compared as a header."""
    if (encoding or "").strip().lower() != "zstd" or not raw:
        return raw
    import zstandard  # a test dependency: only the harness reads zstd

    # pi's frames may not record their size: decompress as a stream.
    return zstandard.ZstdDecompressor().decompressobj().decompress(raw)


def make_handler(base: type, state: Any, kind: Kind) -> type:
    """A handler class of the shared mock's ``Handler`` answering in ``kind``'s wire format."""
    encoder: Callable[[pi_wire.Answer], pi_wire.Wire] = pi_wire.ENCODERS[kind.family]

    def do_POST(self: Any) -> None:  # the stdlib handler's name
        t_recv = time.monotonic()
        url = urlparse(self.path)
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = decoded_body(raw, headers.get("content-encoding"))
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = {"<not json>": body.decode("utf-8", "replace")}
        spec, source = state.choose(req)
        with state.lock:
            seq = state.seq
            state.seq += 1
            state.captured.append(
                {"seq": seq, "request": req, "http": {"path": self.path, "headers": headers}}
            )
        entry: dict[str, Any] = {"seq": seq, "t_recv": t_recv, "path": url.path, "status": None}
        entry.update(source=source, kind=spec.get("kind", "text"))
        try:
            _answer(self, spec, seq, len(raw), entry)
        except (BrokenPipeError, ConnectionResetError):
            entry["status"] = entry["status"] or -1
        with state.lock:
            state.log.append(entry)

    def _answer(
        self: Any, spec: dict[str, Any], seq: int, size: int, entry: dict[str, Any]
    ) -> None:
        if spec.get("first_delay"):
            time.sleep(float(spec["first_delay"]))
        if spec.get("kind") == "error":
            status, headers, body = pi_wire.error(kind.family, spec)
            entry["status"] = status
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, str(value))
            self.end_headers()
            self.wfile.write(body)
            return
        wire = encoder(pi_wire.read_answer(spec, seq, state.model, size))
        self.send_response(wire.status)
        for name, value in {**wire.headers, "Transfer-Encoding": "chunked"}.items():
            self.send_header(name, value)
        self.end_headers()
        entry["status"] = wire.status
        delay = float(spec.get("delay", 0.0) or 0.0)
        self._chunk(b"".join(wire.head))
        for i, part in enumerate(wire.deltas):
            if i and delay > 0:
                time.sleep(delay)
            self._chunk(part)
        self._chunk(b"".join(wire.tail))
        self.wfile.write(b"0\r\n\r\n")

    def handle(self: Any) -> None:
        # A client that gives up on a kept-alive connection (pi's Codex client after its
        # WebSocket try) resets it: nothing to report.
        with contextlib.suppress(ConnectionResetError):
            base.handle(self)

    attrs = {"state": state, "quiet": True, "do_POST": do_POST, "handle": handle}
    return type("VendorHandler", (base,), attrs)
