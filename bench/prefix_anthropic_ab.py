"""The first Anthropic Messages request after resuming a long session, A/B (issue 38, helper
"anthprefix"): the request build on the resumed store's view, old code against new.

Each run is a fresh interpreter (``PYTHONPATH`` picks the code: ``--before DIR`` holds A's
``pitrio``, B is this checkout) doing what the session does up to its first request: read the
session file (``read_session``), build its tree and projection, wrap the stored context in a
``Snapshot`` and convert it (``PrefixConverter``: a ``ConvertedView`` head, undecoded), then
build the ``anthropic-messages`` request (``build_request``, API key, default prompt caching,
an endpoint without message threads) and encode its body. Timed: the conversion and the
request (wall and CPU, gc off as the loop runs); the body's digest is compared between A and B.
Runs alternate A and B (order swapped every other round). Medians as JSON, each run on stderr.
``--threads`` (helper "threads"): the endpoint is ``api.anthropic.com`` and the request has a
session id, so it starts a message thread (built from plain turns); the reply's record (its
fingerprint, whose links a new thread's request leaves for it) is timed apart. ``--oauth``: a
Claude Pro/Max token. Not part of the test run.

    python3 ../shared/tools/make_session.py 20000 /tmp/s20k.jsonl
    git -C /work/main archive HEAD pitrio | tar -x -C /tmp/before-anthprefix
    nice -n 19 .venv/bin/python -m bench.prefix_anthropic_ab /tmp/s20k.jsonl \\
        --before /tmp/before-anthprefix --rounds 7
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(
    path: Path, model_id: str, *, threads: bool = False, oauth: bool = False
) -> dict[str, object]:
    """One resume and first request in this interpreter (``threads``: at
    ``api.anthropic.com`` with a session id, the request a new message thread, its reply's
    record timed too; ``oauth``: a Claude Pro/Max token)."""
    import gc

    from pitrio.actors.model_router.providers.anthropic import build_request, reply_turns
    from pitrio.actors.model_router.providers.anthropic_threads import ThreadStates, record_reply
    from pitrio.actors.model_router.providers.base import ProviderSettings
    from pitrio.actors.model_router.providers.convert import body_bytes
    from pitrio.actors.session_store.projection import Projection
    from pitrio.actors.session_store.storage import read_session
    from pitrio.actors.session_store.tree import SessionTree
    from pitrio.messages import TextContent
    from pitrio.messages.agent import AssistantMessage, Usage
    from pitrio.messages.convert import PrefixConverter
    from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions
    from pitrio.messages.snapshot import Snapshot

    gc.disable()  # as the store's bulk loads and the agent loop's turn do
    parsed = read_session(path)
    assert parsed is not None
    tree = SessionTree(parsed.header, parsed.entries, new_id=lambda: "x", index=parsed.index)
    stored = Projection(tree.path()).context().messages
    model = Model(
        id=model_id,
        name=model_id,
        api="anthropic-messages",
        provider="mock",
        base_url="https://api.anthropic.com" if threads else "http://127.0.0.1:9",
        reasoning=False,
        input=("text", "image"),
        cost=ModelCost(input=0, output=0, cache_read=0, cache_write=0),
        context_window=200000,
        max_tokens=16384,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    messages = PrefixConverter().convert(Snapshot.over(stored))
    converted_wall, converted_cpu = time.perf_counter(), time.process_time()
    states = ThreadStates()
    request = build_request(
        model,
        LlmContext(system_prompt="You are terse.", messages=messages),
        StreamOptions(session_id="bench" if threads else None),
        api_key="sk-ant-oat01-bench" if oauth else "k",
        headers={},
        settings=ProviderSettings(),
        threads=states,
    )
    body = body_bytes(request.body)
    done_wall, done_cpu = time.perf_counter(), time.process_time()
    plan = getattr(request, "thread", None)
    assert (plan is not None) == threads
    if plan is not None:  # the reply's record (after the reply, off the request's path)
        reply = AssistantMessage(
            content=(TextContent(text="ok"),), api="anthropic-messages", provider="mock",
            model=model_id, usage=Usage(), stop_reason="stop", timestamp=0, response_id="msg_1",
        )  # fmt: skip
        record_reply(states, model, plan, reply_turns(model, reply, oauth=oauth), "msg_1", None)
    recorded_cpu = time.process_time()
    return {
        "messages": len(messages),
        "convert_ms": 1000 * (converted_wall - wall),
        "request_ms": 1000 * (done_wall - converted_wall),
        "request_cpu_ms": 1000 * (done_cpu - converted_cpu),
        "total_cpu_ms": 1000 * (done_cpu - cpu),
        "record_cpu_ms": 1000 * (recorded_cpu - done_cpu),
        "body_mb": len(body) / 1e6,
        "body_sha": hashlib.sha256(body).hexdigest()[:16],
        "code": str(Path(sys.modules["pitrio"].__file__ or "").parents[1]),
    }


def main() -> int:
    """Alternate fresh A and B processes and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session", type=Path, help="a session file (make_session.py)")
    parser.add_argument("--before", type=Path, required=True, help="a directory holding A's pitrio")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--model", default="mock-model", help="the target model's id")
    parser.add_argument("--threads", action="store_true", help="a threaded endpoint")
    parser.add_argument("--oauth", action="store_true", help="an OAuth token")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run(args.session, args.model, threads=args.threads, oauth=args.oauth)))
        return 0
    sides = {"A": str(args.before.resolve()), "B": str(ROOT)}
    runs: dict[str, list[dict[str, object]]] = {"A": [], "B": []}
    loads = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        for side in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
            argv = [sys.executable, "-m", "bench.prefix_anthropic_ab", str(args.session), "--one"]
            argv += ["--before", sides["A"], "--model", args.model]
            argv += ["--threads"] * args.threads + ["--oauth"] * args.oauth
            env = {**os.environ, "PYTHONPATH": f"{sides[side]}:{ROOT}"}
            cwd = sides[side] if side == "A" else ROOT
            done = subprocess.run(
                argv, capture_output=True, text=True, check=True, env=env, cwd=cwd
            )
            result = json.loads(done.stdout)
            runs[side].append(result)
            print(side, json.dumps(result), file=sys.stderr)
        loads.append(os.getloadavg()[0])
    digests = {str(r["body_sha"]) for side in runs.values() for r in side}
    keys = ("convert_ms", "request_ms", "request_cpu_ms", "total_cpu_ms", "record_cpu_ms")
    medians = {
        side: {key: round(statistics.median(float(r[key]) for r in got), 1) for key in keys}  # type: ignore[arg-type]
        for side, got in runs.items()
    }
    print(
        json.dumps(
            {
                "session": str(args.session),
                "messages": runs["B"][0]["messages"],
                "body_mb": runs["B"][0]["body_mb"],
                "same_body": len(digests) == 1,
                "rounds": args.rounds,
                "load_1min": [round(load, 2) for load in loads],
                "medians": medians,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
