"""A threaded or OAuth Anthropic Messages turn against the session's length, A/B (issue 38,
helper "threads"): the request's build (``build_request``, body encoded) and the reply's
thread record (``reply_turns`` + ``record_reply``), old code against new.

Each run is a fresh interpreter (``PYTHONPATH`` picks the code: ``--before DIR`` holds A's
``pitrio``, B is this checkout). For each length N (rounds of a tool call and its result,
a user prompt every fourth round) and each mode it makes the transcript (a ``Snapshot``
extended as the agent extends it), sends a first request (a new thread) and records its
reply, then times ``--turns`` more rounds, each one request and one record (CPU, gc off as
the agent loop runs). Modes: ``thread`` (API key, ``api.anthropic.com``: caching on and a
session id), ``thread-oauth`` (the same with a Claude Pro/Max token), ``oauth`` (a token
without a session id: no thread) and ``key`` (an API key without a session id: the default
encoded path, unchanged here, for reference). The first request (a new thread, the whole
transcript converted) is timed apart. The bodies' digest is compared between A and B. Runs
alternate A and B (order swapped every other round). Medians as JSON, each run on stderr.
Not part of the test run.

    git -C /work/main archive HEAD pitrio | tar -x -C /tmp/before-threads
    nice -n 19 .venv/bin/python -m bench.threads_ab --before /tmp/before-threads --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("thread", "thread-oauth", "oauth", "key")


def run(lengths: list[int], turns: int) -> dict[str, object]:
    """Every length and mode in this interpreter: per-turn CPU medians (µs), body digests."""
    import gc
    import hashlib
    import time

    from pitrio.actors.model_router.providers.anthropic import build_request, reply_turns
    from pitrio.actors.model_router.providers.anthropic_threads import ThreadStates, record_reply
    from pitrio.actors.model_router.providers.base import ProviderSettings
    from pitrio.actors.model_router.providers.convert import body_bytes
    from pitrio.messages import TextContent, ToolCall, user_message
    from pitrio.messages.agent import AssistantMessage, ToolResultMessage, Usage
    from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions, ToolSpec
    from pitrio.messages.snapshot import Snapshot

    model = Model(
        id="claude-sonnet-4-5",
        name="claude-sonnet-4-5",
        api="anthropic-messages",
        provider="anthropic",
        base_url="https://api.anthropic.com",
        reasoning=False,
        input=("text", "image"),
        cost=ModelCost(input=0, output=0, cache_read=0, cache_write=0),
        context_window=200000,
        max_tokens=16384,
    )
    params = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = tuple(ToolSpec(name=n, description=f"The {n} tool.", parameters=params)
                  for n in ("read", "bash", "edit", "write"))  # fmt: skip
    filler = "lorem ipsum dolor sit amet " * 12

    def round_messages(index: int) -> list[object]:
        call = ToolCall(id=f"toolu_{index:06d}", name=("read", "bash")[index % 2],
                        arguments={"path": f"src/file_{index}.py"})  # fmt: skip
        reply = AssistantMessage(
            content=(TextContent(text=f"Step {index}: {filler}"), call),
            api="anthropic-messages", provider="anthropic", model=model.id, usage=Usage(),
            stop_reason="toolUse", timestamp=index, response_id=f"msg_{index:06d}",
        )  # fmt: skip
        result = ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                                   content=(TextContent(text=filler * 3),), is_error=False,
                                   timestamp=index)  # fmt: skip
        out: list[object] = [reply, result]
        if index % 4 == 3:
            out.append(user_message(f"Next, part {index}. {filler}", timestamp=index))
        return out

    medians: dict[str, dict[str, float]] = {}
    firsts: dict[str, dict[str, float]] = {}
    digests: dict[str, str] = {}
    gc.disable()
    for mode in MODES:
        oauth = mode in ("thread-oauth", "oauth")
        key = "sk-ant-oat01-bench" if oauth else "sk-ant-api03-bench"
        threaded = mode.startswith("thread")
        options = StreamOptions(session_id="bench-session" if threaded else None)
        for length in lengths:
            threads = ThreadStates()
            first: list[object] = [user_message(f"Start. {filler}", timestamp=0)]
            for index in range(length - 1):
                first += round_messages(index)
            messages: Snapshot[object] = Snapshot(first)
            digest = hashlib.sha256()
            times: list[float] = []
            for index in range(length - 1, length + turns):
                context = LlmContext(system_prompt="You are terse.", messages=messages, tools=tools)  # type: ignore[arg-type]
                reply = round_messages(index)[0]
                start = time.process_time()
                request = build_request(model, context, options, api_key=key, headers={},
                                        settings=ProviderSettings(), threads=threads)  # fmt: skip
                plan = getattr(request, "thread", None)
                if plan is not None:
                    sent = reply_turns(model, reply, oauth=oauth)  # type: ignore[arg-type]
                    record_reply(threads, model, plan, sent, reply.response_id, None)  # type: ignore[attr-defined]
                elapsed = time.process_time() - start
                if index >= length:  # the first request (a new thread) apart
                    times.append(elapsed * 1e6)
                    assert plan is None or plan.kind == "continue", plan.kind
                else:
                    firsts.setdefault(mode, {})[str(length)] = elapsed * 1e3
                digest.update(body_bytes(request.body))
                messages = messages.extended(round_messages(index))
            medians.setdefault(mode, {})[str(length)] = statistics.median(times)
            digests[f"{mode}/{length}"] = digest.hexdigest()[:16]
            gc.collect()
    return {"medians": medians, "first_ms": firsts, "digests": digests}


def main() -> None:
    """Alternate A and B runs; print each run and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="A's code (a directory holding pitrio)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lengths", default="1,1000,10000")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    lengths = [int(value) for value in args.lengths.split(",")]
    if args.child:
        print(json.dumps(run(lengths, args.turns)))
        return
    sides = {"B": str(ROOT)} if args.before is None else {"A": str(args.before), "B": str(ROOT)}
    results: dict[str, list[dict[str, object]]] = {side: [] for side in sides}
    for number in range(args.rounds):
        order = list(sides) if number % 2 == 0 else list(reversed(sides))
        for side in order:
            env = {**os.environ, "PYTHONPATH": sides[side]}
            # Run as a script (its own directory first on the path, not a tree's root), so
            # ``PYTHONPATH`` alone says whose pitrio is imported.
            command = [sys.executable, str(Path(__file__).resolve()), "--child",
                       "--lengths", args.lengths, "--turns", str(args.turns)]  # fmt: skip
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout)
            results[side].append(result)
            print(side, json.dumps(result), file=sys.stderr, flush=True)
    summary: dict[str, object] = {"load": os.getloadavg()}
    for side, runs in results.items():
        for field in ("medians", "first_ms"):
            summary[f"{side} {field}"] = {
                mode: {
                    str(length): round(statistics.median(
                        float(r[field][mode][str(length)]) for r in runs), 1)  # type: ignore[index]
                    for length in lengths
                }
                for mode in MODES
            }  # fmt: skip
    digests = {json.dumps(r["digests"], sort_keys=True) for runs in results.values() for r in runs}
    summary["same_bodies"] = len(digests) == 1
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
