"""The harness's scripted answers in each vendor's streaming wire format.

The shared mock's answer specs (``text``, ``tool_call``, ``error``; see ``mock_llm.py``) plus one
key of ours, ``thinking`` (a reasoning text sent before the answer, with a signature where the
vendor has one), encoded as each API kind streams them. Written from the vendors' documented
streams: Anthropic Messages' named SSE events, OpenAI Responses' ``response.*`` events (also
Azure's and Codex's), Gemini's ``GenerateContentResponse`` chunks (also Vertex's), Mistral's chat
completion chunks and Bedrock ConverseStream's binary event-stream frames (the last two through
the provider tests' own vendor helpers). Every id in an answer is derived from the request's
sequence number, so two agents making the same requests get the same ids back.

An encoding is a :class:`Wire`: status, headers and three lists of byte pieces (``head`` first,
``deltas`` one by one with the spec's ``delay`` between them, then ``tail``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from tests.actors.providers import eventstream, mistral_mock

SIGNATURE = base64.b64encode(b"mock-signature").decode()


@dataclass
class Wire:
    """One encoded answer."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    head: list[bytes] = field(default_factory=list)
    deltas: list[bytes] = field(default_factory=list)
    tail: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    """A spec read once: what the vendor says, whatever its format."""

    seq: int
    model: str
    thinking: str
    pieces: list[str]
    calls: list[tuple[str, str, str]]  # (id, name, arguments as JSON text)
    finish: str  # "stop", "length" or "tool_calls"
    prompt_tokens: int
    completion_tokens: int


def split_text(text: str, n: int) -> list[str]:
    """``text`` in ``n`` nearly equal pieces (as the shared mock splits it)."""
    n = max(1, min(n, max(1, len(text))))
    size, rem = divmod(len(text), n)
    out, pos = [], 0
    for i in range(n):
        step = size + (1 if i < rem else 0)
        out.append(text[pos : pos + step])
        pos += step
    return out


def read_answer(spec: dict[str, Any], seq: int, model: str, body_size: int) -> Answer:
    """The answer a (non-error) spec scripts, with the shared mock's defaults."""
    if spec.get("kind") == "tool_call":
        pieces = [str(spec["text_before"])] if spec.get("text_before") else []
        given = spec.get("calls") or [
            {"name": spec.get("name", "bash"), "arguments": spec.get("arguments", {})}
        ]
        calls = [
            (
                c.get("id") or (spec.get("id") if len(given) == 1 else None) or f"call_{seq}_{i}",
                str(c["name"]),
                json.dumps(c.get("arguments", {})),
            )
            for i, c in enumerate(given)
        ]
        finish = "tool_calls"
    else:
        n = int(spec.get("deltas", 1))
        if spec.get("text") is not None:
            pieces = split_text(str(spec["text"]), n)
        else:
            pieces = [str(spec.get("delta_text", "ok"))] * max(0, n)
        calls = []
        finish = str(spec.get("finish_reason", "stop"))
    usage = spec.get("usage")
    if not isinstance(usage, dict):
        chars = sum(len(p) for p in pieces) + sum(len(c[2]) for c in calls)
        usage = {"prompt_tokens": max(1, body_size // 4), "completion_tokens": max(1, chars // 4)}
    return Answer(
        seq=seq,
        model=model,
        thinking=str(spec.get("thinking") or ""),
        pieces=pieces,
        calls=calls,
        finish=finish,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
    )


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _data(obj: Any) -> bytes:
    return b"data: " + _dumps(obj) + b"\n\n"


def _named(event: str, obj: Any) -> bytes:
    return f"event: {event}\n".encode() + _data(obj)


# -- Anthropic Messages ------------------------------------------------------------------------

ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def anthropic(a: Answer) -> Wire:
    """Anthropic's stream: message_start, content blocks (thinking, text, tool_use), the end."""
    w = Wire()
    start = {
        "id": f"msg_{a.seq:04d}",
        "type": "message",
        "role": "assistant",
        "model": a.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": a.prompt_tokens, "output_tokens": 1},
    }
    w.head.append(_named("message_start", {"type": "message_start", "message": start}))
    index = 0

    def block(kind: dict[str, Any], deltas: list[dict[str, Any]], into: list[bytes]) -> None:
        nonlocal index
        into.append(
            _named(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": kind},
            )
        )
        for d in deltas:
            into.append(
                _named(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": d},
                )
            )
        into.append(_named("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if a.thinking:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": a.thinking},
                {"type": "signature_delta", "signature": SIGNATURE},
            ],
            w.head,
        )
    if a.pieces:
        # The deltas are the paced part: the block opens in the head, closes in the tail.
        w.head.append(
            _named(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for p in a.pieces:
            w.deltas.append(
                _named(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": p},
                    },
                )
            )
        w.tail.append(_named("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, args in a.calls:
        block(
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": args}],
            w.tail,
        )
    w.tail.append(
        _named(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": ANTHROPIC_STOP[a.finish], "stop_sequence": None},
                "usage": {"output_tokens": a.completion_tokens},
            },
        )
    )
    w.tail.append(_named("message_stop", {"type": "message_stop"}))
    return w


# -- OpenAI Responses (also Azure OpenAI and ChatGPT Codex) ------------------------------------


def responses(a: Answer) -> Wire:
    """The Responses stream: response.created, output items (reasoning, message, function
    calls) with their part and delta events, then response.completed (or .incomplete)."""
    w = Wire()
    seq = 0
    output: list[dict[str, Any]] = []

    def ev(kind: str, into: list[bytes], **fields: Any) -> None:
        nonlocal seq
        into.append(_named(kind, {"type": kind, "sequence_number": seq, **fields}))
        seq += 1

    rid = f"resp_{a.seq:04d}"
    base = {"id": rid, "object": "response", "created_at": 1767225600, "model": a.model}
    ev("response.created", w.head, response={**base, "status": "in_progress", "output": []})
    if a.thinking:
        n, item_id = len(output), f"rs_{a.seq:04d}"
        ev(
            "response.output_item.added",
            w.head,
            output_index=n,
            item={"type": "reasoning", "id": item_id, "summary": []},
        )
        part = {"type": "summary_text", "text": ""}
        common = {"item_id": item_id, "output_index": n, "summary_index": 0}
        ev("response.reasoning_summary_part.added", w.head, part=part, **common)
        ev("response.reasoning_summary_text.delta", w.head, delta=a.thinking, **common)
        ev("response.reasoning_summary_text.done", w.head, text=a.thinking, **common)
        done = {"type": "summary_text", "text": a.thinking}
        ev("response.reasoning_summary_part.done", w.head, part=done, **common)
        item = {
            "type": "reasoning",
            "id": item_id,
            "summary": [done],
            "encrypted_content": SIGNATURE,
        }
        ev("response.output_item.done", w.head, output_index=n, item=item)
        output.append(item)
    if a.pieces:
        n, item_id = len(output), f"msg_{a.seq:04d}"
        message = {
            "type": "message",
            "id": item_id,
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        ev("response.output_item.added", w.head, output_index=n, item=message)
        common = {"item_id": item_id, "output_index": n, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": []}
        ev("response.content_part.added", w.head, part=empty, **common)
        for p in a.pieces:
            ev("response.output_text.delta", w.deltas, delta=p, logprobs=[], **common)
        text = "".join(a.pieces)
        ev("response.output_text.done", w.tail, text=text, logprobs=[], **common)
        part = {"type": "output_text", "text": text, "annotations": []}
        ev("response.content_part.done", w.tail, part=part, **common)
        item = {**message, "status": "completed", "content": [part]}
        ev("response.output_item.done", w.tail, output_index=n, item=item)
        output.append(item)
    for i, (call_id, name, args) in enumerate(a.calls):
        n, item_id = len(output), f"fc_{a.seq:04d}_{i}"
        call = {
            "type": "function_call",
            "id": item_id,
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        ev("response.output_item.added", w.tail, output_index=n, item=call)
        common = {"item_id": item_id, "output_index": n}
        ev("response.function_call_arguments.delta", w.tail, delta=args, **common)
        ev("response.function_call_arguments.done", w.tail, arguments=args, **common)
        item = {**call, "arguments": args, "status": "completed"}
        ev("response.output_item.done", w.tail, output_index=n, item=item)
        output.append(item)
    usage = {
        "input_tokens": a.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": a.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": a.prompt_tokens + a.completion_tokens,
    }
    final = {**base, "output": output, "usage": usage}
    if a.finish == "length":
        final.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        ev("response.incomplete", w.tail, response=final)
    else:
        ev("response.completed", w.tail, response={**final, "status": "completed"})
    return w


# -- Gemini (also Vertex AI) -------------------------------------------------------------------

GOOGLE_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}


def google(a: Answer) -> Wire:
    """``streamGenerateContent?alt=sse``: each event a whole ``GenerateContentResponse``."""
    w = Wire()

    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        doc: dict[str, Any] = {"candidates": [candidate], "modelVersion": a.model}
        if finish is not None:
            candidate["finishReason"] = finish
            doc["usageMetadata"] = {
                "promptTokenCount": a.prompt_tokens,
                "candidatesTokenCount": a.completion_tokens,
                "totalTokenCount": a.prompt_tokens + a.completion_tokens,
            }
        doc["responseId"] = f"gen_{a.seq:04d}"
        return _data(doc)

    if a.thinking:
        w.head.append(chunk([{"text": a.thinking, "thought": True, "thoughtSignature": SIGNATURE}]))
    w.deltas.extend(chunk([{"text": p}]) for p in a.pieces)
    calls = [
        {"functionCall": {"id": call_id, "name": name, "args": json.loads(args)}}
        for call_id, name, args in a.calls
    ]
    w.tail.append(chunk(calls, GOOGLE_FINISH[a.finish]))
    return w


# -- Mistral -----------------------------------------------------------------------------------


def mistral(a: Answer) -> Wire:
    """Mistral's chat completion chunks (the provider tests' encoder), then ``[DONE]``."""
    w = Wire()
    cid = f"cmpl-{a.seq:04d}"
    role: dict[str, Any] = {"role": "assistant", "content": ""}
    if a.thinking:
        thought = [{"type": "text", "text": a.thinking}]
        role["content"] = [{"type": "thinking", "thinking": thought}]
    w.head.append(mistral_mock.body(mistral_mock.chunk(role, id=cid), done=False))
    w.deltas.extend(
        mistral_mock.body(mistral_mock.chunk({"content": p}, id=cid), done=False) for p in a.pieces
    )
    if a.calls:
        calls = [
            {"id": cid_, "index": i, "type": "function", "function": {"name": n, "arguments": args}}
            for i, (cid_, n, args) in enumerate(a.calls)
        ]
        w.tail.append(
            mistral_mock.body(mistral_mock.chunk({"tool_calls": calls}, id=cid), done=False)
        )
    usage = mistral_mock.usage(a.prompt_tokens, a.completion_tokens)
    # The closing chunk's empty text would open a text block after a tool call: none then.
    closing: dict[str, Any] = {} if a.calls else {"content": ""}
    last = mistral_mock.chunk(closing, finish=a.finish, usage=usage, id=cid)
    w.tail.append(mistral_mock.body(last))
    return w


# -- Bedrock ConverseStream --------------------------------------------------------------------

BEDROCK_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def bedrock(a: Answer) -> Wire:
    """ConverseStream's event-stream frames (the provider tests' encoder)."""
    w = Wire(headers={"Content-Type": eventstream.EVENT_STREAM})
    ev = eventstream.event
    w.head.append(ev("messageStart", {"role": "assistant"}))
    index = 0
    if a.thinking:
        for delta in ({"text": a.thinking}, {"signature": SIGNATURE}):
            w.head.append(
                ev(
                    "contentBlockDelta",
                    {"contentBlockIndex": index, "delta": {"reasoningContent": delta}},
                )
            )
        w.head.append(ev("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if a.pieces:
        for p in a.pieces:
            w.deltas.append(
                ev("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": p}})
            )
        w.tail.append(ev("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for call_id, name, args in a.calls:
        start = {"toolUse": {"toolUseId": call_id, "name": name}}
        w.tail.append(ev("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        delta = {"toolUse": {"input": args}}
        w.tail.append(ev("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        w.tail.append(ev("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    w.tail.append(ev("messageStop", {"stopReason": BEDROCK_STOP[a.finish]}))
    usage = {
        "inputTokens": a.prompt_tokens,
        "outputTokens": a.completion_tokens,
        "totalTokens": a.prompt_tokens + a.completion_tokens,
    }
    w.tail.append(ev("metadata", {"usage": usage, "metrics": {"latencyMs": 12}}))
    return w


# -- errors ------------------------------------------------------------------------------------

# The shared mock's presets: (status, the vendor-neutral message) and each vendor's error type.
ERRORS: dict[str, tuple[int, str]] = {
    "server_error": (500, "The server had an error while processing your request."),
    "rate_limit": (429, "Rate limit reached for requests. Please try again in 1s."),
    "overloaded": (529, "Overloaded"),
    "context_length": (
        400,
        "prompt is too long: 131072 tokens > 128000 maximum; "
        "This model's maximum context length is 128000 tokens.",
    ),
    "bad_request": (400, "Invalid request"),
}
ANTHROPIC_TYPES = {500: "api_error", 429: "rate_limit_error", 529: "overloaded_error"}
GOOGLE_STATUS = {500: "INTERNAL", 429: "RESOURCE_EXHAUSTED", 529: "UNAVAILABLE"}
BEDROCK_TYPES = {500: "InternalServerException", 429: "ThrottlingException"}


def error(family: str, spec: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """An HTTP error in ``family``'s JSON error shape (status, headers, body)."""
    status, message = ERRORS.get(str(spec.get("preset", "server_error")), ERRORS["server_error"])
    status = int(spec.get("status", status))
    headers = {"Content-Type": "application/json", **(spec.get("headers") or {})}
    doc: dict[str, Any]
    if family == "anthropic":
        kind = ANTHROPIC_TYPES.get(status, "invalid_request_error")
        doc = {"type": "error", "error": {"type": kind, "message": message}}
    elif family == "google":
        doc = {
            "error": {
                "code": status,
                "message": message,
                "status": GOOGLE_STATUS.get(status, "INVALID_ARGUMENT"),
            }
        }
    elif family == "mistral":
        doc = {"object": "error", "message": message, "type": "invalid_request_error",
               "param": None, "code": None}  # fmt: skip
    elif family == "bedrock":
        headers["x-amzn-ErrorType"] = BEDROCK_TYPES.get(status, "ValidationException")
        doc = {"message": message}
    else:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        doc = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    if "body" in spec:
        doc = spec["body"]
    return status, headers, _dumps(doc)


ENCODERS = {
    "anthropic": anthropic,
    "responses": responses,
    "google": google,
    "mistral": mistral,
    "bedrock": bedrock,
}
