"""``pitrio --mode json --trace FILE`` then ``pitrio trace summary|replay FILE``, as processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson


def pitrio(args: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_json_mode_trace_summarises_and_replays_identically(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    # Short retry sleeps; a reserve that makes every turn of faux-small compact (threshold).
    settings = {
        "retry": {"maxRetries": 2, "baseDelayMs": 20},
        "compaction": {"reserveTokens": 19900, "keepRecentTokens": 10},
    }
    (agent / "settings.json").write_bytes(orjson.dumps(settings))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello from the notes\n")
    env = {
        **os.environ,
        "PITRIO_AGENT_DIR": str(agent),
        "PITRIO_FAUX_SCRIPT": "fixture-rules",  # FAILONCE fails once; <<tool {...}>> calls
    }
    trace = tmp_path / "f.jsonl"
    run = pitrio(
        [
            "--mode",
            "json",
            "--model",
            "faux/faux-small",
            "--trace",
            str(trace),
            "FAILONCE hello",
            '<<read {"path": "notes.txt"}>> read it',
        ],
        cwd=work,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    types = [orjson.loads(line).get("type") for line in run.stdout.splitlines()]
    for wanted in ("auto_retry_start", "tool_execution_end", "compaction_end"):
        assert wanted in types

    records = [orjson.loads(line) for line in trace.read_bytes().splitlines()]
    events = [r for r in records if r["k"] == "event"]
    assert events[-1]["type"] == "agent_settled"  # the tail survived the process's exit
    assert [r["name"] for r in records if r["k"] == "tool"] == ["read"]

    summary = pitrio(["trace", "summary", str(trace)], cwd=work, env=env)
    assert summary.returncode == 0, summary.stderr
    assert "prompt(text='FAILONCE hello') after event 0" in summary.stdout
    assert "longest waits" in summary.stdout
    assert "session-store" in summary.stdout

    # The picture of the actors (issue 22), drawn from the same file by a process.
    graph = pitrio(["trace", "graph", str(trace)], cwd=work, env=env)
    assert graph.returncode == 0, graph.stderr
    assert graph.stdout.startswith("flowchart LR\n")
    assert '    agent_loop -.->|"tool read 1"| tool_executor\n' in graph.stdout
    assert "    session -->|" in graph.stdout and "| supervisor\n" in graph.stdout
    assert "supervisor -.->|" in graph.stdout  # the compaction's summary request
    dot = pitrio(["trace", "graph", "--format", "dot", str(trace)], cwd=work, env=env)
    assert dot.returncode == 0 and dot.stdout.startswith("digraph actors {")
    timeline = pitrio(["trace", "timeline", str(trace)], cwd=work, env=env)
    assert timeline.returncode == 0, timeline.stderr
    lines = [line[11:] for line in timeline.stdout.splitlines()]
    assert lines[1] == "send SubscribeInto #1: outside -> session (depth 0)"
    assert "tool read by agent-loop: result" in lines
    assert lines.index("input prompt(text='FAILONCE hello') after event 0") < lines.index(
        "model request 1 by agent-loop: done"
    )
    bad = pitrio(["trace", "graph", "--format", "svg", str(trace)], cwd=work, env=env)
    assert bad.returncode == 2 and "invalid choice: 'svg'" in bad.stderr

    replay = pitrio(["trace", "replay", str(trace)], cwd=work, env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "identical" in replay.stdout
    assert f"recorded {len(events)} events, replayed {len(events)}" in replay.stdout

    # The same trace with the tool's output changed: the replay names the first event that
    # shows it, with both values.
    altered = tmp_path / "altered.jsonl"
    lines = []
    for record in records:
        if record["k"] == "tool":
            changed = orjson.dumps(record).replace(b"hello from the notes", b"HELLO FROM THE NOTES")
            record = orjson.loads(changed)
        lines.append(orjson.dumps(record))
    altered.write_bytes(b"\n".join(lines) + b"\n")
    diverged = pitrio(["trace", "replay", str(altered)], cwd=work, env=env)
    assert diverged.returncode == 1
    assert "first divergence at event" in diverged.stdout
    assert "tool_execution_end" in diverged.stdout
    assert "HELLO FROM THE NOTES" in diverged.stdout

    missing = pitrio(["trace", "summary", str(tmp_path / "nope.jsonl")], cwd=work, env=env)
    assert missing.returncode == 2
