"""The JSON-level Chat Completions prefix (``pitrio._prefix_chat``) against the typed path, over
a resumed session's stored messages (issue 38, item 1: "resume 20,000 turns, first turn after").

In one process, gc off as the agent loop runs, alternating in rounds (order reversed every other
round), on the messages of the shared harness's session file of ``--turns`` turns (48,000
messages at 20,000), each as its stored JSON cut from its line:

- **typed**: what the first turn does with them today: each parsed (``wire.loads``), decoded
  by the store's quick decoder (the general one where it declines) and fed to an encoded
  ``ChatMessages`` builder;
- **prefix**: ``prepare_chat_prefix`` on the same bytes (parse, check, convert, encode);
- **parse**: ``orjson.loads`` of each alone (the part of either that no conversion avoids);
- **floor**: what ``bench/resume_floor.py``'s child does with them (``floor_agent.to_chat`` of
  each parsed message, joined): the floor program's conversion, which checks nothing.

The prefix's result is checked against the typed builder's (same finished bytes) once. Medians
and every round's figures in seconds as JSON. Not part of the test run.

    PITRIO_SHARED_DIR=/work/shared nice -n 19 .venv/bin/python -m bench.prefix_chat_ab
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.floor_agent import to_chat
from pitrio._prefix_chat import prepare_chat_prefix
from pitrio.actors.model_router.providers.convert import body_bytes, encode_json_pieces
from pitrio.actors.model_router.providers.openai_compat import compat_of
from pitrio.actors.model_router.providers.openai_completions_request import (
    ChatMessages,
    facts_of,
)
from pitrio.messages.agent import AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.codec import from_json
from pitrio.messages.model import Model, ModelCost
from pitrio.messages.quick import decode_message
from pitrio.messages.wire import loads

CLASSES: dict[str, Any] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}
MODEL = Model(
    id="mock-model",
    name="mock-model",
    api="openai-completions",
    provider="mock",
    base_url="http://127.0.0.1:9/v1",
    reasoning=False,
    input=("text",),
    cost=ModelCost(input=0, output=0, cache_read=0, cache_write=0),
    context_window=200000,
    max_tokens=16384,
)


def session_messages(turns: int) -> list[bytes]:
    """The stored messages of the harness's session file of ``turns`` turns, as written."""
    tools = Path(os.environ.get("PITRIO_SHARED_DIR", "/work/shared")) / "tools"
    sys.path.insert(0, str(tools))
    from bench_rpc import Harness  # type: ignore[import-not-found]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        Harness.make_session_file(None, path, Path(tmp), turns)
        lines = path.read_bytes().splitlines()
    key = b'"message":{'
    return [line[line.index(key) + len(key) - 1 : -1] for line in lines if key in line]


def typed(datas: list[bytes]) -> ChatMessages:
    """The first turn's path: parse, decode (quick, else general), feed an encoded builder."""
    builder = ChatMessages(MODEL, compat_of(MODEL), encoded=True)
    for data in datas:
        value = loads(data)
        cls = CLASSES[value["role"]]
        message = decode_message(value, cls)
        if message is None:
            message = from_json(value, cls)
        builder.feed(message)
    return builder


def prefix(datas: list[bytes]) -> Any:
    """The JSON-level conversion."""
    return prepare_chat_prefix(datas, facts_of(MODEL, compat_of(MODEL)))


def parse(datas: list[bytes]) -> Any:
    """The parse alone."""
    return [orjson.loads(data) for data in datas]


def floor(datas: list[bytes]) -> Any:
    """The floor program's conversion."""
    loads_ = orjson.loads
    return b",".join(to_chat(loads_(data)) for data in datas)


RUNNERS: dict[str, Callable[[list[bytes]], Any]] = {
    "typed": typed,
    "prefix": prefix,
    "parse": parse,
    "floor": floor,
}


def timed(run: Callable[[list[bytes]], Any], datas: list[bytes]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (gc off, its garbage freed outside the clock)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run(datas)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    del result
    gc.collect()
    return wall, cpu


def main() -> int:
    """Run the rounds, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    datas = session_messages(args.turns)
    made = prefix(datas)
    assert made is not None and made.consumed == len(datas), "not converted whole"
    restored = ChatMessages.from_prefix(MODEL, compat_of(MODEL), made)
    assert restored is not None
    same = body_bytes(encode_json_pieces(restored.finish())) == body_bytes(
        encode_json_pieces(typed(datas).finish())
    )
    assert same, "the prefix's bytes differ from the typed builder's"
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in RUNNERS}
    gc.collect()
    gc.disable()
    for round_ in range(args.rounds):
        order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
        for name in order:
            runs[name].append(timed(RUNNERS[name], datas))
    gc.enable()
    report = {
        "messages": len(datas),
        "rounds": args.rounds,
        "load": os.getloadavg(),
        "median_wall_s": {k: round(statistics.median(w for w, _ in v), 4) for k, v in runs.items()},
        "median_cpu_s": {k: round(statistics.median(c for _, c in v), 4) for k, v in runs.items()},
        "runs_cpu_s": {k: [round(c, 4) for _, c in v] for k, v in runs.items()},
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
