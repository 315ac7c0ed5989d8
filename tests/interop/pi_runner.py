"""Runs one scenario against one agent (real pi 0.73.1 or pitrio) over real pipes.

Each run gets its own sandbox (HOME, agent dir, cwd, TMPDIR under one temporary folder), its own
mock LLM (the shared ``mock_llm.py``, served in this process on a loopback port) and a scrubbed
environment, so nothing of the machine leaks into either agent and two runs never share state.
The result is a :class:`Run`: every stdout line with the step it arrived in, the request bodies
the mock received, the session files and ``settings.json`` left behind, the exit status.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.interop.pi_install import pi_command, pi_env
from tests.interop.pi_kinds import COMPLETIONS, KINDS, kind_env, make_handler, provider_block
from tests.interop.pi_steps import (
    USAGE,
    CloseStdin,
    Cmd,
    Mark,
    Mock,
    Quiet,
    Raw,
    Scenario,
    Signal,
    Sleep,
    Step,
    WaitEvent,
    WaitExit,
    WaitRequests,
)
from tests.shared_dir import ROOT, TOOLS

PROVIDER, MODEL, API_KEY = "mock", "mock-model", "mock-key"
STEP_TIMEOUT = 45.0
# The wait for an agent's first line: pi 1.6.0 takes a second or more of CPU to start, and many
# at once on a busy machine (other suites, the harness's own workers) took over 45 s.
START_TIMEOUT = 150.0
OPENAI_FORMS = {
    "supportsStore": True,
    "supportsDeveloperRole": True,
    "supportsStrictMode": True,
    "maxTokensField": "max_completion_tokens",
}
BASE_CONFIG: dict[str, Any] = {
    "capture": True,
    "default": {"kind": "text", "text": "ok", "deltas": 1, "usage": USAGE},
}


def _load_mock_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shared_mock_llm", TOOLS / "mock_llm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("shared_mock_llm", module)
    spec.loader.exec_module(module)
    return module


_MOCK_MODULE: ModuleType | None = None
_MOCK_LOCK = threading.Lock()


class MockLLM:
    """One instance of the shared mock LLM, served by a thread of this process.

    For ``kind`` other than ``openai-completions`` the same script is answered in that API's
    wire format (``pi_kinds.make_handler``), and each request's path and headers are kept.
    """

    def __init__(self, kind: str = COMPLETIONS) -> None:
        global _MOCK_MODULE
        with _MOCK_LOCK:
            if _MOCK_MODULE is None:
                _MOCK_MODULE = _load_mock_module()
        mod = _MOCK_MODULE
        self.state = mod.MockState(MODEL)
        self.state.apply_config(BASE_CONFIG)
        if kind == COMPLETIONS:
            handler = type("Handler", (mod.Handler,), {"state": self.state, "quiet": True})
        else:
            handler = make_handler(mod.Handler, self.state, KINDS[kind])
        self.server = mod.Server(("127.0.0.1", 0), handler)
        self.port = int(self.server.server_address[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def configure(self, cfg: dict[str, Any]) -> None:
        """Replace parts of the mock's script (``default``, ``rules``, ``queue``)."""
        self.state.apply_config(cfg)

    def captured(self) -> list[dict[str, Any]]:
        """The chat request bodies received so far, in order."""
        with self.state.lock:
            return [c["request"] for c in self.state.captured]

    def http(self) -> list[dict[str, Any]]:
        """The path and headers of each request (kept by the native kinds' vendors only)."""
        with self.state.lock:
            return [c["http"] for c in self.state.captured if "http" in c]

    def log(self) -> list[dict[str, Any]]:
        """The mock's per-request log (status of each answer)."""
        with self.state.lock:
            return [dict(e) for e in self.state.log]

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def models_json(
    base_url: str, scenario: Scenario, kind: str = COMPLETIONS, port: int = 0
) -> dict[str, Any]:
    """pi's ``models.json`` with the mock provider (of API ``kind``) and the scenario's models."""
    models = [
        {
            "id": MODEL,
            "name": "Mock Model",
            "reasoning": False,
            "input": ["text"],
            "contextWindow": scenario.context_window,
            "maxTokens": 16384,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        },
        *scenario.extra_models,
    ]
    provider: dict[str, Any] = {
        "apiKey": API_KEY,
        **provider_block(kind, port, base_url),
        "models": models,
    }
    if scenario.openai_compat and kind == COMPLETIONS:
        # pi's request forms for every server; pitrio sends them to OpenAI only unless told
        # (a documented difference, shown by the one scenario that leaves this out).
        provider["compat"] = OPENAI_FORMS
    return {"providers": {PROVIDER: provider}}


@dataclass
class Line:
    """One stdout line of the agent, parsed, with the index of the step it arrived during."""

    step: int
    raw: bytes
    obj: Any


@dataclass
class Run:
    """Everything one agent did in one scenario."""

    agent: str
    root: str
    port: int
    kind: str = COMPLETIONS
    lines: list[Line] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    http: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    sessions: dict[str, list[Any]] = field(default_factory=dict)
    settings: Any = None
    exit_code: int | None = None
    stderr: str = ""
    failures: list[str] = field(default_factory=list)


class Sandbox:
    """A fresh HOME, agent dir, cwd and TMPDIR for one agent process."""

    def __init__(
        self, base: Path, scenario: Scenario, mock: MockLLM, kind: str = COMPLETIONS
    ) -> None:
        self.kind = kind
        self.root = Path(tempfile.mkdtemp(prefix="sbx-", dir=base))
        self.home, self.agent_dir = self.root / "home", self.root / "agent"
        self.work, self.tmp = self.root / "work", self.root / "tmp"
        for d in (self.home, self.agent_dir, self.work, self.tmp):
            d.mkdir()
        (self.agent_dir / "models.json").write_text(
            json.dumps(models_json(mock.base_url, scenario, kind, mock.port), indent=2)
        )
        settings = {"defaultProvider": PROVIDER, "defaultModel": MODEL, **scenario.settings}
        (self.agent_dir / "settings.json").write_text(json.dumps(settings, indent=2))
        (self.work / "hello.txt").write_text("hello from the sandbox\n")
        for name, text in scenario.files.items():
            (self.work / name).write_text(text)

    def env(self) -> dict[str, str]:
        """The scrubbed environment both agents get."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            "PITRIO_AGENT_DIR": str(self.agent_dir),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
            **kind_env(self.kind),
            **pi_env(),
        }


def agent_argv(agent: str, pi_cli: Path) -> list[str]:
    """The command starting ``agent`` in RPC mode."""
    if agent == "pi":
        return [*pi_command(pi_cli), "--mode", "rpc"]
    return [str(ROOT / ".venv" / "bin" / "pitrio"), "--mode", "rpc"]


class Driver:
    """One agent process and the thread reading its stdout into a queue."""

    def __init__(self, argv: list[str], sandbox: Sandbox, run: Run) -> None:
        self.run = run
        self.step = 0
        self.q: queue.Queue[Line | None] = queue.Queue()
        self.stderr_path = sandbox.root / "stderr.txt"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed by finish()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=str(sandbox.work),
            env=sandbox.env(),
            bufsize=0,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.eof = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            raw = raw.rstrip(b"\n")
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = {"<not json>": raw.decode("utf-8", "replace")}
            self.q.put(Line(self.step, raw, obj))
        self.q.put(None)

    def write(self, data: bytes) -> None:
        """Write to the agent's stdin (a closed pipe is recorded, not raised)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
        except (BrokenPipeError, ValueError):
            self.run.failures.append(f"step {self.step}: stdin closed")

    def pump(self, timeout: float) -> Line | None:
        """The next line within ``timeout`` seconds (``None``: nothing, or stdout ended)."""
        if self.eof:
            return None
        try:
            item = self.q.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if item is None:
            self.eof = True
            return None
        self.run.lines.append(item)
        return item

    def wait_count(
        self,
        match: Callable[[dict[str, Any]], bool],
        n: int,
        since: int,
        what: str,
        timeout: float = STEP_TIMEOUT,
    ) -> bool:
        """Read lines until ``n`` of those read since line ``since`` satisfy ``match`` (the
        agent's first line may take up to ``START_TIMEOUT``)."""
        if not self.run.lines:
            timeout = max(timeout, START_TIMEOUT)
        deadline = time.monotonic() + timeout

        def enough() -> bool:
            return (
                sum(
                    1 for ln in self.run.lines[since:] if isinstance(ln.obj, dict) and match(ln.obj)
                )
                >= n
            )

        while not enough():
            line = self.pump(deadline - time.monotonic())
            if line is None and (self.eof or time.monotonic() >= deadline) and not enough():
                self.run.failures.append(f"step {self.step}: timed out waiting for {what}")
                return False
        return True

    def quiet(self, seconds: float) -> None:
        """Read until nothing arrived for ``seconds``."""
        while self.pump(seconds) is not None:
            pass

    def finish(self) -> None:
        """Close stdin, wait for the exit (kill after 10 s), drain stdout."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.run.exit_code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.run.failures.append("did not exit within 10 s of stdin EOF; killed")
            self.proc.kill()
            self.run.exit_code = self.proc.wait()
        self.reader.join(5)
        while self.pump(0) is not None:
            pass
        self._stderr.close()
        self.run.stderr = self.stderr_path.read_text(errors="replace")


def _is_response(obj: dict[str, Any], id_: Any = None, command: str = "") -> bool:
    if obj.get("type") != "response":
        return False
    return (id_ is None or obj.get("id") == id_) and (not command or obj.get("command") == command)


def _is_event(obj: dict[str, Any], step: WaitEvent) -> bool:
    return obj.get("type") == step.type and step.matches(obj)


class Executor:
    """Runs the steps of a scenario against one driver and mock."""

    def __init__(self, driver: Driver, mock: MockLLM, run: Run) -> None:
        self.driver, self.mock, self.run = driver, mock, run
        self.auto_id = 0
        self.mark = 0  # WaitEvent counts the lines read since the last write
        self.marks: dict[str, dict[str, Any]] = {}

    def write(self, data: bytes) -> None:
        """Send bytes and remember where the lines after them begin."""
        self.mark = len(self.run.lines)
        self.driver.write(data)

    def next_id(self, prefix: str) -> str:
        """A fresh command id."""
        self.auto_id += 1
        return f"{prefix}{self.auto_id}"

    def run_steps(self, steps: list[Step]) -> None:
        """Every step in order."""
        for index, step in enumerate(steps):
            self.driver.step = index
            self.one(index, step)

    def one(self, index: int, step: Step) -> None:
        """One step."""
        d = self.driver
        if isinstance(step, Mock):
            self.mock.configure(step.config)
        elif isinstance(step, Mark):
            self.keep(step)
        elif isinstance(step, Cmd):
            cmd = {**step.cmd, **self.marks.get(step.use_mark, {})}
            if "id" not in cmd and not step.no_id:
                cmd["id"] = self.next_id("c")
            self.write((json.dumps(cmd) + "\n").encode())
            if step.wait:
                match = partial(
                    _is_response,
                    id_=cmd.get("id"),
                    command=step.expect_command or str(cmd.get("type")),
                )
                d.wait_count(match, 1, self.mark, f"the response to {cmd.get('type')}")
        elif isinstance(step, Raw):
            self.write(step.data)
            if step.responses:
                d.wait_count(
                    _is_response,
                    step.responses,
                    self.mark,
                    f"{step.responses} response(s) to raw input",
                )
        elif isinstance(step, WaitEvent):
            d.wait_count(
                partial(_is_event, step=step),
                step.n,
                self.mark,
                f"event {step.type} #{step.n}",
                step.timeout,
            )
        elif isinstance(step, WaitRequests):
            deadline = time.monotonic() + STEP_TIMEOUT
            while len(self.mock.log()) < step.n and time.monotonic() < deadline:
                d.pump(0.02)
            if len(self.mock.log()) < step.n:
                self.run.failures.append(
                    f"step {index}: timed out waiting for {step.n} LLM request(s)"
                )
        elif isinstance(step, Quiet):
            d.quiet(step.seconds)
        elif isinstance(step, Sleep):
            end = time.monotonic() + step.seconds
            while (left := end - time.monotonic()) > 0:
                d.pump(left)
        elif isinstance(step, Signal):
            d.proc.send_signal(step.signum)
        elif isinstance(step, CloseStdin):
            assert d.proc.stdin is not None
            d.proc.stdin.close()
        elif isinstance(step, WaitExit):
            try:
                self.run.exit_code = d.proc.wait(step.timeout)
            except subprocess.TimeoutExpired:
                self.run.failures.append(f"step {index}: did not exit within {step.timeout} s")
        else:  # pragma: no cover - a new step kind without a handler
            raise TypeError(f"unknown step {step!r}")

    def keep(self, step: Mark) -> None:
        """Send ``step.command`` and keep the value a later command takes from its response."""
        want = self.next_id("m")
        self.write((json.dumps({"type": step.command, "id": want}) + "\n").encode())
        self.driver.wait_count(
            partial(_is_response, id_=want), 1, self.mark, f"the response to {step.command}"
        )
        data: dict[str, Any] = {}
        for ln in self.run.lines:
            if isinstance(ln.obj, dict) and ln.obj.get("id") == want:
                data = ln.obj.get("data") or {}
        if step.command == "get_state":
            self.marks[step.name] = {"sessionPath": data.get("sessionFile")}
        elif step.command == "get_entries":
            entries = data.get("entries") or [{}]
            self.marks[step.name] = {"since": entries[len(entries) // 2].get("id")}
        else:
            msgs = data.get("messages") or [{}]
            self.marks[step.name] = {"entryId": msgs[0].get("entryId")}


def _collect_files(sandbox: Sandbox, run: Run) -> None:
    sessions = sandbox.agent_dir / "sessions"
    for path in sorted(sessions.rglob("*")) if sessions.exists() else []:
        if path.is_file():
            rel = str(path.relative_to(sandbox.agent_dir))
            lines: list[Any] = []
            for raw in path.read_bytes().splitlines():
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    lines.append({"<not json>": raw.decode("utf-8", "replace")})
            run.sessions[rel] = lines
    for path in sorted(sandbox.work.rglob("*.jsonl")):
        run.sessions["work/" + str(path.relative_to(sandbox.work))] = [
            json.loads(x) for x in path.read_bytes().splitlines() if x.strip()
        ]
    settings = sandbox.agent_dir / "settings.json"
    run.settings = json.loads(settings.read_text()) if settings.exists() else None


def _session_file(sandbox: Sandbox) -> Path | None:
    files = (
        sorted((sandbox.agent_dir / "sessions").rglob("*.jsonl"))
        if (sandbox.agent_dir / "sessions").exists()
        else []
    )
    return files[-1] if files else None


def run_scenario(
    agent: str, scenario: Scenario, pi_cli: Path, base: Path, kind: str = COMPLETIONS
) -> Run:
    """Run ``scenario`` against ``agent`` (``"pi"`` or ``"pitrio"``) and collect what it did.

    A scenario with a prelude first runs the prelude's agent in the same sandbox (resume of one
    agent's files by the other); only the main part is recorded.
    """
    mock = MockLLM(kind)
    try:
        sandbox = Sandbox(base, scenario, mock, kind)
        run = Run(agent=agent, root=str(sandbox.root), port=mock.port, kind=kind)
        args = list(scenario.args)
        if scenario.prelude is not None:
            pre = Run(agent=scenario.prelude_agent, root=str(sandbox.root), port=mock.port)
            driver = Driver(agent_argv(scenario.prelude_agent, pi_cli), sandbox, pre)
            Executor(driver, mock, pre).run_steps(scenario.prelude)
            driver.quiet(0.2)
            driver.finish()
            run.failures.extend(f"prelude: {f}" for f in pre.failures)
            session = _session_file(sandbox)
            if session is None:
                run.failures.append("prelude wrote no session file")
            else:
                args += ["--session", str(session)]
            mock.state.reset()
            mock.configure(BASE_CONFIG)
        if scenario.resume:
            folder = sandbox.agent_dir / "sessions" / "resumed"
            folder.mkdir(parents=True)
            planted = folder / Path(scenario.resume).name
            text = Path(scenario.resume).read_text().replace("$SANDBOX", str(sandbox.root))
            planted.write_text(text)
            args += ["--session", str(planted)]
        driver = Driver(agent_argv(agent, pi_cli) + args, sandbox, run)
        Executor(driver, mock, run).run_steps(scenario.steps)
        if driver.proc.poll() is None:
            driver.step = len(scenario.steps)
            driver.quiet(scenario.settle)
        driver.finish()
        # A request the agent gave up on is logged once the mock notices (its next write).
        deadline = time.monotonic() + 3
        while len(mock.log()) < len(mock.captured()) and time.monotonic() < deadline:
            time.sleep(0.05)
        run.requests = mock.captured()
        run.http = mock.http()
        run.statuses = [int(e["status"] or 0) for e in mock.log()]
        _collect_files(sandbox, run)
        return run
    finally:
        mock.close()


def run_both(
    scenario: Scenario,
    pi_cli: Path,
    base: Path,
    kind: str = COMPLETIONS,
    pair: tuple[str, str] = ("pi", "pitrio"),
) -> dict[str, Run]:
    """Both agents through ``scenario`` on a vendor of ``kind``, concurrently (two threads).

    The results are keyed ``"pi"`` and ``"pitrio"``; ``pair`` names the agent run in each
    place (``("pi", "pi")``: the harness's self-check, two runs of pi compared).
    """
    results: dict[str, Run] = {}
    errors: list[BaseException] = []

    def one(slot: str, agent: str) -> None:
        try:
            results[slot] = run_scenario(agent, scenario, pi_cli, base, kind)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [
        threading.Thread(target=one, args=slot) for slot in zip(("pi", "pitrio"), pair, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def sigint() -> int:
    """The signal number of SIGINT (kept here so scenarios need not import signal)."""
    return int(signal.SIGINT)
