"""Mistral's streaming wire format, for the loopback vendor: SSE bodies of chat completion chunks.

Written from Mistral's documented chat completions stream: data-only events, each a
``chat.completion.chunk`` object with ``choices[0].delta`` (``role``, ``content`` as a string or
a list of text/thinking chunks, ``tool_calls``), ``finish_reason`` on the last choice chunk,
``usage`` with ``prompt_tokens``/``completion_tokens``/``total_tokens`` on the last chunk, and a
final ``data: [DONE]``. Error bodies are Mistral's JSON (``object: "error"``, ``message``,
``type``, ``code``).
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.actors.providers.loopback import Reply, json_error, sse

MODEL = "mistral-large-latest"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    id: str = "cmpl-0a1b2c",
) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    document: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    if usage is not None:
        document["usage"] = usage
    return document


def usage(prompt: int, completion: int) -> dict[str, int]:
    """Mistral's usage member."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def body(*chunks: dict[str, Any], done: bool = True) -> bytes:
    """An SSE body of ``chunks`` (then ``[DONE]``)."""
    out = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def text_stream(*pieces: str, prompt: int = 12, completion: int = 5) -> bytes:
    """A plain text answer in ``pieces``."""
    first = [chunk({"role": "assistant", "content": ""})]
    middle = [chunk({"content": piece}) for piece in pieces]
    last = chunk({"content": ""}, finish="stop", usage=usage(prompt, completion))
    return body(*first, *middle, last)


def thinking_stream() -> bytes:
    """A reasoning answer (magistral): thinking chunks, then text chunks."""
    return body(
        chunk(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": [{"type": "text", "text": "Let me "}]}
                ],
            }
        ),
        chunk(
            {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "think."}]}]}
        ),
        chunk({"content": [{"type": "thinking", "thinking": []}]}),
        chunk({"content": [{"type": "text", "text": "Answer: "}]}),
        chunk({"content": "42"}, finish="stop", usage=usage(30, 20)),
    )


def tool_stream() -> bytes:
    """Text, then two tool calls, the first one's arguments in pieces, the second whole."""
    return body(
        chunk({"role": "assistant", "content": "Reading."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "id": "D681PevKs",
                        "index": 0,
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"pa'},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "id": "D681PevKs",
                        "index": 0,
                        "function": {"name": "read", "arguments": 'th": "a.txt"}'},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "id": "null",
                        "index": 1,
                        "function": {"name": "bash", "arguments": {"command": "ls"}},
                    }
                ]
            }
        ),
        chunk({"content": ""}, finish="tool_calls", usage=usage(40, 18)),
    )


def ok(*pieces: str) -> Reply:
    """A 200 text answer."""
    return sse(text_stream(*pieces or ("Hello", " world")))


def error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Reply:
    """A Mistral error body."""
    document = {"object": "error", "message": message, "type": kind, "param": None, "code": None}
    return json_error(status, document, headers)
