"""What the harness compares for a native API kind: the requests, and only the requests.

For ``openai-completions`` every artifact of a run is compared (``pi_compare.compare``). For the
other kinds the question is the one of issue 25: does pitrio send the vendor what pi sends? So a
kind's runs are compared on the request bodies (normalised as ``pi_compare`` does, the system
prompt's text on its own path wherever the API carries it), the request paths and the headers
that matter, how many requests each agent made and the statuses it was answered with, and the
harness's own failures (a run that timed out compares nothing).

Headers that do not matter are the transport's and the SDKs' telemetry (``user-agent``,
``x-stainless-*``, ``amz-sdk-*``, ``content-length``, ...); SigV4's ``authorization`` is reduced
to its scheme, region and service, and ``x-amz-date`` is dropped (a signature is per second).
"""

from __future__ import annotations

import re
from typing import Any

from tests.interop.pi_compare import Diff, Normaliser, deep, requests
from tests.interop.pi_runner import Run

DROPPED_HEADERS = {
    "host",
    "connection",
    "content-length",
    "accept-encoding",
    "accept-language",
    "user-agent",
    "sec-fetch-mode",
    "x-amz-date",
    "x-amz-user-agent",
    "x-amz-content-sha256",
    "transfer-encoding",
    "x-goog-api-client",  # the Google SDK's name and version
    "cookie",  # the Mistral SDK's empty cookie jar
}
DROPPED_PREFIXES = ("x-stainless-", "amz-sdk-")
SIGV4_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request")
PROMPT = "<system prompt>"


def headers(raw: dict[str, str]) -> dict[str, str]:
    """The headers that matter, by name (lower case, sorted), SigV4 reduced to its scope."""
    out: dict[str, str] = {}
    for name in sorted(raw):
        if name in DROPPED_HEADERS or name.startswith(DROPPED_PREFIXES):
            continue
        value = raw[name]
        if name == "authorization" and (m := SIGV4_RE.match(value)):
            value = f"AWS4-HMAC-SHA256 {m.group(1)}/{m.group(2)}"
        out[name] = value
    return out


def _texts_of(blocks: Any) -> list[Any]:
    """Replace the ``text`` of each block of ``blocks`` in place; the texts taken out."""
    taken: list[Any] = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and "text" in block:
            taken.append(block["text"])
            block["text"] = PROMPT
    return taken


def system_prompt(request: Any) -> Any:
    """Take the system prompt's text out of ``request``, wherever its API puts it.

    Anthropic's and Bedrock's ``system`` blocks, Responses' ``instructions`` or first
    ``developer``/``system`` input item, Gemini's ``systemInstruction`` parts, a chat API's first
    ``system`` message.
    """
    if not isinstance(request, dict):
        return None
    found: list[Any] = []
    if isinstance(request.get("system"), list):
        found += _texts_of(request["system"])
    elif isinstance(request.get("system"), str):
        found.append(request["system"])
        request["system"] = PROMPT
    if isinstance(request.get("instructions"), str):
        found.append(request["instructions"])
        request["instructions"] = PROMPT
    if isinstance(request.get("systemInstruction"), dict):
        found += _texts_of(request["systemInstruction"].get("parts"))
    for key in ("input", "messages"):
        items = request.get(key)
        if isinstance(items, list) and items and isinstance(items[0], dict):
            first = items[0]
            if first.get("role") in ("system", "developer"):
                content = first.get("content")
                if isinstance(content, str):
                    found.append(content)
                    items[0] = {**first, "content": PROMPT}
                else:
                    found += _texts_of(content)
    return found or None


def compare_requests(pi: Run, pitrio: Run) -> list[Diff]:
    """Every difference between the requests pi and pitrio sent a vendor of one kind."""
    na, nb = Normaliser(pi), Normaliser(pitrio)
    out: list[Diff] = []
    out += [Diff("harness:pi-failure", f"pi: {f}") for f in pi.failures]
    out += [Diff("harness:pitrio-failure", f"pitrio: {f}") for f in pitrio.failures]
    requests(na, nb, pi, pitrio, system_prompt, out)
    for i, (x, y) in enumerate(zip(pi.http, pitrio.http, strict=False)):
        deep(na.text(x["path"]), nb.text(y["path"]), "http.path", f"request#{i}", out)
        deep(
            na.value(headers(x["headers"])),
            nb.value(headers(y["headers"])),
            "http.headers",
            f"request#{i}",
            out,
        )
    if pi.statuses != pitrio.statuses:
        out.append(Diff("http:statuses", f"pi {pi.statuses} vs pitrio {pitrio.statuses}"))
    return out
