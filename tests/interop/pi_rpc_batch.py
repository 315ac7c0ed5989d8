"""Many cases through one RPC-mode process of pi 1.6.0 or pitrio, against a loopback vendor.

A matrix whose cases differ only in what RPC commands can set (the model, the thinking level:
``set_model``, ``set_thinking_level``) need not start an agent per case: one process of each
agent runs every case in turn, each in a new session, and the vendor's log is cut at each
case's end. The sandbox, the scrubbed environment and the vendor are those of a print-mode
run (:mod:`tests.interop.pi_oneshot`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tests.interop.pi_oneshot import base_env
from tests.interop.pi_runner import MockLLM

CASE_TIMEOUT = 60.0
"""Generous: one case is a few commands and one turn, but the machine may be shared."""
START_TIMEOUT = 150.0
"""The first answer also waits for the agent's start-up (slow on a busy machine)."""


@dataclass
class CaseRun:
    """What one case did: the vendor's requests during it, and what went wrong."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@dataclass
class BatchRun:
    """One agent's process through every case."""

    agent: str
    cases: list[CaseRun]
    exit_code: int | None
    stderr: str


class _Lines:
    """The agent's stdout, parsed, kept in order by a reading thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.seen: list[dict[str, Any]] = []
        self.eof = False
        self.changed = threading.Condition()
        self.proc = proc
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            with suppress(ValueError):
                obj = json.loads(raw)
                if isinstance(obj, dict):
                    with self.changed:
                        self.seen.append(obj)
                        self.changed.notify_all()
        with self.changed:
            self.eof = True
            self.changed.notify_all()

    def find(self, match: Callable[[dict[str, Any]], bool], since: int, deadline: float) -> int:
        """The index of the first line from ``since`` on that ``match``es (-1: the deadline
        or EOF came first)."""
        with self.changed:
            while True:
                for index in range(since, len(self.seen)):
                    if match(self.seen[index]):
                        return index
                since = len(self.seen)
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    return -1
                self.changed.wait(left)


def run_cases(
    agent: str,
    argv: list[str],
    files: Mapping[str, Any],
    cases: Sequence[Sequence[dict[str, Any]]],
    *,
    kind: str,
) -> BatchRun:
    """Start ``argv --mode rpc`` once in a fresh sandbox whose agent dir holds ``files`` and
    send each case's commands in turn (``{base}`` in ``files`` is the vendor's URL).

    Every command waits for its response (a failed one is the case's failure); a ``prompt``
    also waits for the run's ``agent_end``. The requests the vendor got during a case are
    that case's.
    """
    mock = MockLLM(kind)
    root = Path(tempfile.mkdtemp(prefix="rpc-batch-"))
    agent_dir, work = root / "agent", root / "work"
    agent_dir.mkdir()
    work.mkdir()
    url = f"http://127.0.0.1:{mock.port}"
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content, indent=2)
        (agent_dir / name).write_text(text.replace("{base}", url))
    stderr_path = root / "stderr.txt"
    try:
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                [*argv, "--mode", "rpc"],
                cwd=work,
                env=base_env(root, agent_dir),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
            lines = _Lines(proc)
            runs = [_one_case(proc, lines, mock, index, steps) for index, steps in enumerate(cases)]
            assert proc.stdin is not None
            with suppress(OSError):
                proc.stdin.close()
            try:
                code: int | None = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        return BatchRun(agent, runs, code, stderr_path.read_text(errors="replace"))
    finally:
        mock.close()
        shutil.rmtree(root, ignore_errors=True)


def _is_response(ident: str, obj: dict[str, Any]) -> bool:
    return obj.get("type") == "response" and obj.get("id") == ident


def _one_case(
    proc: subprocess.Popen[bytes],
    lines: _Lines,
    mock: MockLLM,
    index: int,
    steps: Sequence[dict[str, Any]],
) -> CaseRun:
    run = CaseRun()
    before = len(mock.captured())
    deadline = time.monotonic() + (START_TIMEOUT if index == 0 else CASE_TIMEOUT)
    assert proc.stdin is not None
    for number, step in enumerate(steps):
        ident = f"c{index}.{number}"
        sent = len(lines.seen)
        try:
            proc.stdin.write((json.dumps({**step, "id": ident}) + "\n").encode())
            proc.stdin.flush()
        except OSError:  # the agent has gone: this case and the rest fail, not the fixture
            run.failures.append(f"stdin closed before {step['type']}")
            break
        at = lines.find(partial(_is_response, ident), sent, deadline)
        if at < 0:
            run.failures.append(f"no response to {step['type']}")
            break
        if not lines.seen[at].get("success"):
            run.failures.append(f"{step['type']} failed: {lines.seen[at].get('error')}")
        # The run's end may come before or after the prompt's response.
        if step["type"] == "prompt" and (
            lines.find(lambda o: o.get("type") == "agent_end", sent, deadline) < 0
        ):
            run.failures.append("no agent_end")
            break
    run.requests = mock.captured()[before:]
    return run
