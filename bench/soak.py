"""Soak: mixed traffic on a real ``pitrio serve`` for a long while; memory and descriptors must
level off.

    .venv/bin/python -m bench.soak [--minutes 60] [--clients 6] [--sample-seconds 5]

Starts ``pitrio serve`` (a temporary agent dir) on a model served over HTTP by the shared
mock LLM (``../shared/tools/mock_llm.py``, scripted so prompts stream short or long replies,
call the bash tool and get compaction summaries: the provider path a real model takes), or
with ``--model-source faux`` on the built-in faux models answering by the fixtures' rules (the
faux provider keeps every request it served for tests to inspect, so that daemon's memory grows
with the requests by design), and runs
``--clients`` websocket clients, each on its own session, each picking its next action at
random (seeded): a prompt (short, long, or a bash tool call), a steer or an abort while a long
reply streams, a compaction, a reconnect that resumes from the last ``seq`` seen, and now and
then a rotation (its session deleted through ``/v1/host``, a new one created), so the sessions'
histories, which legitimately grow with every turn, do not pass for a leak.

Every ``--sample-seconds`` it reads the daemon's RSS and open file descriptors from ``/proc``.
At the end the first ``--warmup`` fraction of samples is left out (imports, caches, the first
sessions) and the rest is cut in thirds. Memory or descriptors **grow without bound** when the
last third's median exceeds the middle third's by more than a noise floor (RSS: 4 MB or 3 %;
descriptors: 3) *and* by at least half of what the middle third gained over the first (a
process that warms up gains less and less; a leak keeps its pace), with a positive
least-squares slope over the same samples. ``--judge REPORT.json`` applies the rule again to a
report's samples. The
report (printed, and written as JSON with every sample to ``--out``) says which held; the exit
status is 1 when either grew, when the daemon died, when it did not stop cleanly on SIGTERM, or
when a session file it leaves fails the store's check.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection
from trio_websocket import open_websocket_url as _open_websocket_url

from pitrio.actors.session_store.maintenance import check_file

ROOT = Path(__file__).resolve().parents[1]
PITRIO = ROOT / ".venv" / "bin" / "pitrio"
MOCK_LLM = (
    Path(os.environ.get("PITRIO_SHARED_DIR") or ROOT.parent / "shared") / "tools" / "mock_llm.py"
)
MOCK_MODEL = "mock/mock-model"
MOCK_SCRIPT: dict[str, Any] = {
    "default": {"kind": "text", "deltas": 8, "delta_text": "ok "},
    "rules": [
        {
            "if": {"system_contains": "context summarization assistant"},
            "then": {"kind": "text", "text": "## Goal\nSoak traffic (summary).", "deltas": 4},
        },
        {"if": {"last_role": "tool"}, "then": {"kind": "text", "deltas": 4, "delta_text": "done "}},
        {
            "if": {"last_text_contains": "TOOLCALL"},
            "then": {
                "kind": "tool_call",
                "name": "bash",
                "arguments": {"command": "echo soak; ls -a | head -3"},
            },
        },
        {
            "if": {"last_text_contains": "SLOW"},
            "then": {"kind": "text", "deltas": 150, "delta_text": "word ", "delay": 0.005},
        },
    ],
}
"""The mock's replies: first matching rule, else the default."""
RESULTS = ROOT / "bench" / "results"

RSS_RELATIVE, RSS_ABSOLUTE_MB, FD_ABSOLUTE = 0.03, 4.0, 3.0
KEEPS_PACE = 0.5
"""Growth in the last third, as a share of the middle third's, that counts as not levelling."""
ACTIONS = {
    "prompt": 30,
    "long_prompt": 10,
    "tool": 10,
    "steer": 12,
    "abort": 12,
    "compact": 6,
    "reconnect": 12,
    "rotate": 2,
}
"""Relative weights of each client's next action."""


# -- growth detection (pure) ------------------------------------------------------------------


def slope_per_hour(times: list[float], values: list[float]) -> float:
    """Least-squares slope of ``values`` over ``times`` (seconds), per hour."""
    if len(times) < 2:
        return 0.0
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
    spread = sum((t - mean_t) ** 2 for t in times)
    if spread == 0:
        return 0.0
    covariance = sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True))
    return covariance / spread * 3600.0


def judge(
    times: list[float], values: list[float], warmup: float, relative: float, absolute: float
) -> dict[str, Any]:
    """Whether ``values`` keep growing after the warm-up (see the module's docstring)."""
    start = int(len(values) * warmup)
    times, values = times[start:], values[start:]
    third = len(values) // 3
    if third < 2:
        return {"verdict": "too few samples", "grows": False, "samples": len(values)}
    first = statistics.median(values[:third])
    middle = statistics.median(values[third : 2 * third])
    last = statistics.median(values[2 * third :])
    allowed = max(middle * relative, absolute)
    slope = slope_per_hour(times, values)
    grows = last - middle > allowed and last - middle >= KEEPS_PACE * (middle - first)
    grows = grows and slope > 0
    return {
        "verdict": "GROWS" if grows else "flat",
        "grows": grows,
        "first_third_median": first,
        "middle_third_median": middle,
        "last_third_median": last,
        "allowed_growth": allowed,
        "slope_per_hour": slope,
        "min": min(values),
        "max": max(values),
        "samples": len(values),
    }


# -- the daemon -------------------------------------------------------------------------------


@attrs.define
class Daemon:
    """The ``pitrio serve`` process under test."""

    process: trio.Process
    base: str
    headers: list[tuple[bytes, bytes]]


async def start_mock(root: Path) -> tuple[trio.Process, str]:
    """The shared mock LLM on a free loopback port with :data:`MOCK_SCRIPT`; its base URL."""
    script, port_file = root / "mock-script.json", root / "mock.port"
    script.write_text(json.dumps(MOCK_SCRIPT))
    with (root / "mock.log").open("ab") as output:
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                str(MOCK_LLM),
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "--script",
                str(script),
            ],
            stdout=output,
            stderr=output,
        )
    with trio.fail_after(15):
        while not port_file.exists() or not port_file.read_text().strip():  # noqa: ASYNC110
            await trio.sleep(0.02)  # the mock says it listens by writing this file
    return process, f"http://127.0.0.1:{port_file.read_text().strip()}/v1"


def write_mock_agent_dir(agent: Path, base_url: str) -> None:
    """``models.json`` naming the mock as an openai-completions provider."""
    agent.mkdir(parents=True, exist_ok=True)
    model = {"id": "mock-model", "contextWindow": 128000, "maxTokens": 16384}
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "mock-key"}
    models = {"providers": {"mock": {**provider, "models": [model]}}}
    (agent / "models.json").write_text(json.dumps(models))


async def start_daemon(agent: Path, work: Path, log: Path, faux: bool) -> Daemon:
    """``pitrio serve`` on a free port; returns once it listens."""
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent)}
    env.pop("PITRIO_SESSION_DIR", None)
    model: list[str] = []
    if faux:
        env["PITRIO_FAUX_SCRIPT"] = "fixture-rules"
    else:
        model = ["--model", MOCK_MODEL]
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            env.pop(name, None)  # the mock is on loopback
    with log.open("ab") as errors:
        process = await trio.lowlevel.open_process(
            [
                str(PITRIO),
                "serve",
                "--port",
                "0",
                "--cwd",
                str(work),
                "--log-level",
                "warning",
                *model,
            ],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
        )
    assert process.stdout is not None
    buffer = b""
    with trio.fail_after(30):
        while (match := re.search(rb"listening on (http://\S+)", buffer)) is None:
            chunk = await process.stdout.receive_some(4096)
            if not chunk:
                raise RuntimeError(f"the daemon did not start; see {log}")
            buffer += chunk
    url = match.group(1).decode()
    token = (agent / "daemon-token").read_text().strip()
    return Daemon(
        process,
        url.replace("http://", "ws://").rstrip("/"),
        [(b"Authorization", f"Bearer {token}".encode())],
    )


def sample(pid: int) -> tuple[float, int]:
    """(RSS in MB, open descriptors) of ``pid`` from ``/proc``."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
            break
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


# -- the clients ------------------------------------------------------------------------------


@attrs.define
class Tally:
    """What the traffic did."""

    actions: Counter[str] = attrs.field(factory=Counter)
    failures: Counter[str] = attrs.field(factory=Counter)
    """Commands answered with ``success: false``, by command and error's start."""
    events: int = 0
    disconnects: int = 0


async def host_command(daemon: Daemon, command: dict[str, Any]) -> dict[str, Any]:
    """One ``/v1/host`` command's response."""
    async with _open_websocket_url(f"{daemon.base}/v1/host", extra_headers=daemon.headers) as ws:
        await ws.get_message()  # host_attached
        await ws.send_message(json.dumps({"id": "h", **command}))
        while True:
            frame: dict[str, Any] = json.loads(await ws.get_message())
            if frame.get("type") == "response" and frame.get("id") == "h":
                return frame


class Client:
    """One session and its websocket; every action reads the frames it causes."""

    def __init__(
        self, daemon: Daemon, tally: Tally, rng: random.Random, name: str, faux: bool
    ) -> None:
        self.daemon = daemon
        self.faux = faux
        self.tally = tally
        self.rng = rng
        self.name = name
        self.session_id = ""
        self.seq = 0
        self.stream = ""
        self.ws: WebSocketConnection | None = None
        self._ids = 0

    async def open_session(self) -> None:
        """A new session of the daemon's."""
        response = await host_command(self.daemon, {"type": "create", "name": self.name})
        self.session_id = response["data"]["sessionId"]
        self.seq, self.stream = 0, ""

    def url(self, resume: bool) -> str:
        """The session's address (resuming from the last seq seen when asked)."""
        query = f"?since={self.seq}&stream={self.stream}" if resume and self.stream else ""
        return f"{self.daemon.base}/v1/sessions/{self.session_id}{query}"

    async def frame(self) -> dict[str, Any]:
        assert self.ws is not None
        with trio.fail_after(60):
            value: dict[str, Any] = json.loads(await self.ws.get_message())
        if isinstance(value.get("seq"), int):
            self.seq = max(self.seq, value["seq"])
        self.tally.events += 1
        return value

    async def command(self, kind: str, **fields: Any) -> str:
        self._ids += 1
        request_id = f"{kind}-{self._ids}"
        assert self.ws is not None
        await self.ws.send_message(json.dumps({"id": request_id, "type": kind, **fields}))
        return request_id

    def note(self, frame: dict[str, Any]) -> None:
        if frame.get("type") == "response" and not frame.get("success", True):
            error = str(frame.get("error", ""))[:40]
            self.tally.failures[f"{frame.get('command')}: {error}"] += 1

    async def until(self, *, settled: bool, response: str | None) -> None:
        """Read until the run settled (if asked) and the response arrived (if asked)."""
        seen_settled, seen_response = not settled, response is None
        while not (seen_settled and seen_response):
            frame = await self.frame()
            self.note(frame)
            if frame.get("type") == "agent_settled":
                seen_settled = True
            elif frame.get("type") == "response" and frame.get("id") == response:
                seen_response = True
                if not frame.get("success", True) and frame.get("command") == "prompt":
                    seen_settled = True  # refused: no run follows

    async def until_streaming(self) -> None:
        while (await self.frame()).get("type") != "message_update":
            pass

    async def act(self, action: str) -> None:
        """One action of the mix on the open websocket."""
        self.tally.actions[action] += 1
        if action == "prompt":
            request = await self.command("prompt", message=f"hello {self.rng.random():.6f}")
            await self.until(settled=True, response=request)
        elif action == "long_prompt":
            await self.command("prompt", message="SLOW please")
            await self.until(settled=True, response=None)
        elif action == "tool":
            step = json.dumps({"command": "echo soak; ls -a | head -3"})
            await self.command("prompt", message=f"<<bash {step}>>" if self.faux else "TOOLCALL")
            await self.until(settled=True, response=None)
        elif action in ("steer", "abort"):
            await self.command("prompt", message="SLOW, to be interrupted")
            await self.until_streaming()
            if action == "steer":
                request = await self.command("steer", message="shorter, please")
            else:
                request = await self.command("abort")
            await self.until(settled=True, response=request)
        elif action == "compact":
            request = await self.command("compact")
            await self.until(settled=False, response=request)

    async def run(self, deadline: float) -> None:
        """Act until ``deadline`` (trio time). ``reconnect`` and ``rotate`` leave the
        websocket's block: the first reattaches with a resume from the last seq seen, the
        second deletes the session and starts on a new one. An unexpected disconnect is
        counted and followed by a resume too."""
        await self.open_session()
        names, weights = list(ACTIONS), list(ACTIONS.values())
        resume = False
        while trio.current_time() < deadline:
            leaving = ""
            try:
                async with _open_websocket_url(
                    self.url(resume), extra_headers=self.daemon.headers
                ) as ws:
                    self.ws = ws
                    hello = await self.frame()
                    assert hello["type"] == "attached", hello
                    self.stream = hello.get("stream", self.stream)
                    if resume:
                        await self.until(settled=False, response=await self.command("get_state"))
                    while trio.current_time() < deadline and not leaving:
                        action = self.rng.choices(names, weights)[0]
                        if action in ("reconnect", "rotate"):
                            self.tally.actions[action] += 1
                            leaving = action
                            break
                        await self.act(action)
                        await trio.sleep(self.rng.uniform(0.0, 0.1))
            except (ConnectionClosed, HandshakeError, trio.BrokenResourceError):
                self.tally.disconnects += 1
                leaving = "reconnect"
            finally:
                self.ws = None
            resume = leaving == "reconnect"
            if leaving == "rotate":
                await host_command(self.daemon, {"type": "delete", "sessionId": self.session_id})
                await self.open_session()


# -- the run ----------------------------------------------------------------------------------


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the traffic, sample the daemon, stop it, judge."""
    root = Path(tempfile.mkdtemp(prefix="pitrio-soak-"))
    agent, work = root / "agent", root / "work"
    work.mkdir(parents=True)
    log = root / "daemon.log"
    faux = args.model_source == "faux"
    mock: trio.Process | None = None
    if not faux:
        mock, base_url = await start_mock(root)
        write_mock_agent_dir(agent, base_url)
    daemon = await start_daemon(agent, work, log, faux)
    pid = daemon.process.pid
    tally = Tally()
    samples: list[tuple[float, float, int]] = []
    started = trio.current_time()
    deadline = started + args.minutes * 60

    async def sampler() -> None:
        while True:
            rss, fds = await trio.to_thread.run_sync(sample, pid)
            samples.append((trio.current_time() - started, rss, fds))
            await trio.sleep(args.sample_seconds)

    async def report_progress() -> None:
        while True:
            await trio.sleep(60)
            _, rss, fds = samples[-1]
            elapsed = (trio.current_time() - started) / 60
            print(
                f"  {elapsed:.0f} min: RSS {rss:.1f} MB, {fds} fds, "
                f"{sum(tally.actions.values())} actions, {tally.events} frames",
                file=sys.stderr,
                flush=True,
            )

    rng = random.Random(args.seed)
    error: str | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sampler)
            nursery.start_soon(report_progress)
            async with trio.open_nursery() as clients:
                for index in range(args.clients):
                    seeded = random.Random(rng.random())
                    client = Client(daemon, tally, seeded, f"soak-{index}", faux)
                    clients.start_soon(client.run, deadline)
            rss, fds = await trio.to_thread.run_sync(sample, pid)
            samples.append((trio.current_time() - started, rss, fds))
            nursery.cancel_scope.cancel()
    except Exception as exc:  # the report says what broke, whatever it was
        error = f"{type(exc).__name__}: {exc}"
    alive = daemon.process.returncode is None
    stop_code: int | None = None
    if alive:
        daemon.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(15):
            stop_code = await daemon.process.wait()
        if daemon.process.returncode is None:
            daemon.process.kill()
            await daemon.process.wait()
    if mock is not None:
        mock.terminate()
        await mock.wait()
    files = sorted(agent.glob("sessions/*/*.jsonl"))
    problems = {
        str(path.name): [problem.describe(path.name) for problem in found]
        for path in files
        if (found := await trio.to_thread.run_sync(check_file, path))
    }
    times = [t for t, _, _ in samples]
    rss_judged = judge(
        times, [r for _, r, _ in samples], args.warmup, RSS_RELATIVE, RSS_ABSOLUTE_MB
    )
    fd_judged = judge(times, [float(f) for _, _, f in samples], args.warmup, 0.0, FD_ABSOLUTE)
    failed = bool(rss_judged["grows"] or fd_judged["grows"] or error or not alive)
    failed = failed or stop_code != 0 or bool(problems)
    return {
        "minutes": args.minutes,
        "model_source": args.model_source,
        "clients": args.clients,
        "seed": args.seed,
        "ok": not failed,
        "error": error,
        "daemon_alive_at_end": alive,
        "session_files": len(files),
        "file_problems": problems,
        "sigterm_exit_code": stop_code,
        "rss_mb": rss_judged,
        "open_fds": fd_judged,
        "actions": dict(tally.actions),
        "failed_commands": dict(tally.failures),
        "frames_received": tally.events,
        "unexpected_disconnects": tally.disconnects,
        "daemon_log": str(log),
        "samples": [{"t": round(t, 1), "rss_mb": round(r, 2), "fds": f} for t, r, f in samples],
        "loadavg_end": os.getloadavg(),
    }


def rejudge(report: dict[str, Any], warmup: float) -> dict[str, Any]:
    """``report`` with its verdicts recomputed from its samples by the current rule."""
    samples = report["samples"]
    times = [s["t"] for s in samples]
    rss = judge(times, [s["rss_mb"] for s in samples], warmup, RSS_RELATIVE, RSS_ABSOLUTE_MB)
    fds = judge(times, [float(s["fds"]) for s in samples], warmup, 0.0, FD_ABSOLUTE)
    # Whatever else failed the run (the daemon died, a bad stop, bad files) still fails it.
    other_failure = not report["ok"] and not (
        report["rss_mb"]["grows"] or report["open_fds"]["grows"]
    )
    ok = not other_failure and not rss["grows"] and not fds["grows"]
    return {**report, "rss_mb": rss, "open_fds": fds, "ok": ok}


def render(report: dict[str, Any]) -> str:
    """The human-readable report."""
    lines = [
        f"soak: {report['minutes']:g} min, {report['clients']} clients, seed {report['seed']}, "
        f"model {report.get('model_source', 'faux')}: " + ("OK" if report["ok"] else "FAILED"),
    ]
    for key, unit in (("rss_mb", "MB"), ("open_fds", "fds")):
        j = report[key]
        if "middle_third_median" not in j:
            lines.append(f"  {key}: {j['verdict']} ({j['samples']} samples)")
            continue
        lines.append(
            f"  {key}: {j['verdict']}: thirds {j['first_third_median']:.1f} / "
            f"{j['middle_third_median']:.1f} / {j['last_third_median']:.1f} {unit} "
            f"(allowed +{j['allowed_growth']:.1f}), slope {j['slope_per_hour']:+.1f} {unit}/h, "
            f"range {j['min']:.1f}-{j['max']:.1f} over {j['samples']} samples"
        )
    actions = ", ".join(f"{k} {v}" for k, v in sorted(report["actions"].items()))
    lines.append(f"  actions: {actions}; {report['frames_received']} frames received")
    if report["failed_commands"]:
        failures = "; ".join(f"{k} x{v}" for k, v in sorted(report["failed_commands"].items()))
        lines.append(f"  commands answered with an error: {failures}")
    lines.append(
        f"  unexpected disconnects: {report['unexpected_disconnects']}; daemon alive at the end: "
        f"{report['daemon_alive_at_end']}; exit code after SIGTERM: {report['sigterm_exit_code']}"
    )
    if "session_files" in report:
        lines.append(
            f"  session files left: {report['session_files']}, with problems: "
            f"{len(report['file_problems'])}"
        )
    if report["error"]:
        lines.append(f"  error: {report['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the soak and write its report; exit 1 when it failed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of samples left out")
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--model-source", choices=["mock", "faux"], default="mock")
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    parser.add_argument("--judge", type=Path, help="judge a report's samples again, run nothing")
    args = parser.parse_args(argv)
    if args.judge is not None:
        report = json.loads(args.judge.read_text())
        judged = rejudge(report, args.warmup)
        args.judge.write_text(json.dumps(judged, indent=1) + "\n")
        print(render(judged))
        return 0 if judged["ok"] else 1
    began = time.monotonic()
    report = trio.run(soak, args)
    report["wall_s"] = round(time.monotonic() - began, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(render(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
