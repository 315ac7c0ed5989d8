"""The launcher's child asked for a resumed transcript's Chat Completions prefix: how long from
the request to the answer, and what taking it costs the parent (issue 38, first turn after a
resume; pitrio/_preparse_prefix.py).

Each run is a fresh interpreter doing what an RPC resume does around it: start the parsing
child on ``FILE`` (``_preparse.start``), import the runtime (the command line and the session
store), read the file (``read_session``, which takes the child's records), then ask the kept
child for the prefix of every stored message (the made session's transcript) for the mock
model of the file and wait for it. Recorded: whether the child was kept (it had finished its
records when the read took them; else it was caught up with and killed: no request), the
request call's wall time, the wall from the request to the answer's descriptor readable, the
child's CPU for the request, ``result()``'s wall and CPU in the parent, the prefix's size, and
the waiting child's memory (anonymous resident, and its share of all it maps).
``--wait-records`` waits for the child's records before the read (so every run has a child
to ask). Medians as JSON, each run on stderr. Not part of the test run.

    python3 ../shared/tools/make_session.py 20000 /tmp/s20k.jsonl
    nice -n 19 .venv/bin/python bench/prefix_request.py /tmp/s20k.jsonl --runs 5 --wait-records
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _memory_kb(pid: int) -> dict[str, int]:
    """The process's anonymous resident memory and its proportional share of all it maps."""
    out = {}
    for name in ("status", "smaps_rollup"):
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "Pss"):
                out[key] = int(value.split()[0])
    return out


def run(path: str, wait_records: bool, kind: str = "chat") -> dict[str, float]:
    """One resume and request in this process (a fresh interpreter)."""
    import select

    from pitrio import _preparse as preparse

    started = time.perf_counter()
    assert preparse.start(path)
    offer = preparse._OFFERS[-1]
    import pitrio.transports.cli  # noqa: F401  (the runtime's imports, as a start makes them)
    from pitrio import _preparse_prefix
    from pitrio._prefix_chat import ChatFacts
    from pitrio.actors.session_store.storage import read_session

    imported = time.perf_counter()
    if wait_records:
        while not offer._progress()[4]:
            select.select([], [], [], 0.002)
    parsed = read_session(Path(path))
    assert parsed is not None
    out: dict[str, float] = {
        "imports_ms": 1000 * (imported - started),
        "read_done_ms": 1000 * (time.perf_counter() - started),
        "kept": float(bool(preparse._KEPT)),
    }
    if not preparse._KEPT:
        return out
    lines = [stored.line for stored in parsed.entries if stored.type == "message"]
    facts: tuple[object, ...] = ChatFacts("mock", "openai-completions", "mock-model", *(False,) * 6)
    if kind == "anthropic":  # the file's answers are another API's to this model: all taken
        facts = ("mock", "anthropic-messages", "mock-model", False, False)
    child_before = _cpu(offer.pid)
    memory = _memory_kb(offer.pid)
    asked = time.perf_counter()
    job = _preparse_prefix.request_prefix(tuple(facts), lines, kind=kind)
    assert job is not None
    requested = time.perf_counter()
    assert select.select([job], [], [], 120)[0]
    ready = time.perf_counter()
    child_cpu = _cpu(offer.pid) - child_before
    cpu = time.process_time()
    prefix = job.result()
    taken = time.perf_counter()
    assert prefix is not None and prefix.consumed == len(lines)
    out.update(
        messages=len(lines),
        request_call_ms=1000 * (requested - asked),
        request_to_readable_ms=1000 * (ready - asked),
        child_request_cpu_ms=1000 * child_cpu,
        result_ms=1000 * (taken - ready),
        result_cpu_ms=1000 * (time.process_time() - cpu),
        prefix_mb=(sum(map(len, prefix.segments)) + len(prefix.tail)) / 1e6,
        waiting_child_anon_mb=memory["RssAnon"] / 1024,
        waiting_child_pss_mb=memory["Pss"] / 1024,
    )
    return out


def main() -> int:
    """Run fresh processes in turn and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session", help="a session file (the harness's make_session.py)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wait-records", action="store_true")
    parser.add_argument("--kind", choices=("chat", "anthropic"), default="chat")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run(args.session, args.wait_records, args.kind)))
        return 0
    runs = []
    for _ in range(args.runs):
        argv = [sys.executable, __file__, args.session, "--one", "--kind", args.kind]
        argv += ["--wait-records"] if args.wait_records else []
        done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
        runs.append(json.loads(done.stdout))
        print(done.stdout.strip(), file=sys.stderr)
    asked = [r for r in runs if r["kept"]]
    medians = {
        key: round(statistics.median(r[key] for r in asked), 2) for key in (asked or [{}])[0]
    }
    print(
        json.dumps(
            {
                "session": args.session,
                "runs": len(runs),
                "kept": len(asked),
                "loadavg": os.getloadavg(),
                "medians_of_kept": medians,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
