"""The first request after a resume through the ``pitrio`` launcher (issue 38): the launcher's
child converts the stored transcript on its core (:mod:`pitrio._preparse_prefix`), and the
request the session sends is, byte for byte, the one pitrio's own entry point sends without a
child and the one the typed path sends (every stored message decoded and fed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.actors.providers.loopback import recording
from tests.actors.test_session_resumed_prefix import write_session

# The launcher with its child started whatever the load; the store's read waits until the
# child has taken in the whole file (so its offer is taken whole and the child kept), the
# session waits for the child's answer, and that answer (how many messages it converted)
# is written to $PREFIX_REPORT.
WITH_CHILD = """
import functools, os, select, sys
from pitrio import _preparse as preparse, _preparse_prefix
preparse.idle_core = lambda: True
take = preparse.take
def finished_take(status):
    offer = preparse._OFFERS[-1]
    while not offer._progress()[4]:
        select.select([], [], [], 0.01)
    return take(status)
preparse.take = finished_take
result = _preparse_prefix.PrefixJob.result
def reported(self):
    prefix = result(self)
    with open(os.environ["PREFIX_REPORT"], "a") as out:
        out.write(f"{0 if prefix is None else prefix.consumed}\\n")
    return prefix
_preparse_prefix.PrefixJob.result = reported
# At the usual priority, and waited for however long: a parallel test run must not starve
# the child into the in-process fallback (tests/actors/test_session_resumed_prefix_wait.py).
_preparse_prefix.request_prefix = functools.partial(_preparse_prefix.request_prefix, idle=False)
from pitrio.actors.session import resumed_prefix
resumed_prefix.LEAST_WAIT = 120.0
from pitrio.transports.launch import main
sys.exit(main())
"""
DIRECT = "import sys; from pitrio.transports.cli import main; sys.exit(main())"
TYPED = (
    "import sys; from pitrio.messages.snapshot import Snapshot; "
    "Snapshot.head = lambda self: None; "  # no stored head: decoded and fed as before
    "from pitrio.transports.cli import main; sys.exit(main())"
)


@contextmanager
def completions_server(
    stream: str = "openai_completions_text.sse", path: str = "/v1"
) -> Iterator[tuple[str, list[bytes]]]:
    """A Chat Completions server (or another API's, by its recorded ``stream`` and base
    ``path``) on 127.0.0.1 answering every request with one recorded stream; its base URL
    and the request bodies it received."""
    bodies: list[bytes] = []
    answer = recording(stream)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", bodies
    finally:
        server.shutdown()
        server.server_close()


def prompted(entry: str, session: Path, agent: Path, report: Path) -> None:
    """Resume ``session`` through ``entry``, answer get_state and get_messages, prompt once
    and wait for the run's end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.update(PITRIO_AGENT_DIR=str(agent), PREFIX_REPORT=str(report))
    process = subprocess.Popen(
        [sys.executable, "-c", entry, "--mode", "rpc", "--session", str(session)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=agent,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    for command in ('{"id":"1","type":"get_state"}', '{"id":"2","type":"get_messages"}'):
        process.stdin.write(command.encode() + b"\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["success"]
    process.stdin.write(b'{"id":"3","type":"prompt","message":"go on"}\n')
    process.stdin.flush()
    while True:
        line = process.stdout.readline()
        assert line, "pitrio ended before the run did"
        if json.loads(line).get("type") == "agent_end":
            break
    process.stdin.close()
    assert process.wait(timeout=60) == 0


@pytest.mark.parametrize("compacted", [False, True])
def test_the_childs_first_request_is_the_typed_paths_byte_for_byte(
    tmp_path: Path, compacted: bool
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text("{}")
    with completions_server() as (base_url, bodies):
        models = {
            "providers": {
                "mock": {
                    "baseUrl": base_url,
                    "api": "openai-completions",
                    "apiKey": "k",
                    "models": [{"id": "m", "input": ["text", "image"]}],
                }
            }
        }
        (agent / "models.json").write_text(json.dumps(models))
        (agent / "settings.json").write_text('{"defaultProvider":"mock","defaultModel":"m"}')
        reports = []
        for name, entry in (("child", WITH_CHILD), ("direct", DIRECT), ("typed", TYPED)):
            session = tmp_path / f"{name}.jsonl"
            write_session(session, 400, compacted=compacted)
            report = tmp_path / f"{name}.report"
            prompted(entry, session, agent, report)
            reports.append(report.read_text() if report.exists() else "")
    child, direct, typed = bodies
    assert child == direct == typed
    messages = json.loads(child)["messages"]
    assert len(messages) > 400
    # The child was asked and converted the whole stored transcript, the compaction's
    # summary and the custom message included (sent inline): every item of the request but
    # its head (the system prompt), the prompt and, where the image's tool result is kept,
    # the user item carrying that image.
    consumed = int(reports[0])
    assert consumed == len(messages) - 2 - (0 if compacted else 1), (consumed, len(messages))
    assert reports[1:] == ["", ""]


@pytest.mark.parametrize("compacted", [False, True])
def test_the_childs_first_anthropic_request_is_the_typed_paths_byte_for_byte(
    tmp_path: Path, compacted: bool
) -> None:
    # As above for the Anthropic Messages API at an endpoint without message threads (its
    # request is built encoded: the child is asked for its turns).
    agent = tmp_path / "agent"
    agent.mkdir()
    with completions_server("anthropic_text.sse", "") as (base_url, bodies):
        models = {
            "providers": {
                "mock": {
                    "baseUrl": base_url,
                    "api": "anthropic-messages",
                    "apiKey": "k",
                    "models": [{"id": "m", "input": ["text", "image"]}],
                }
            }
        }
        (agent / "models.json").write_text(json.dumps(models))
        (agent / "settings.json").write_text('{"defaultProvider":"mock","defaultModel":"m"}')
        reports = []
        for name, entry in (("child", WITH_CHILD), ("direct", DIRECT), ("typed", TYPED)):
            session = tmp_path / f"{name}.jsonl"
            count = write_session(session, 400, compacted=compacted)
            report = tmp_path / f"{name}.report"
            prompted(entry, session, agent, report)
            reports.append(report.read_text() if report.exists() else "")
    child, direct, typed = bodies
    assert child == direct == typed
    assert b'"cache_control"' in child and len(json.loads(child)["messages"]) > 400
    # The child was asked and converted every stored item: all the stored messages but the
    # system one (the custom message sent inline), or after a compaction its summary and
    # the messages it kept.
    consumed = int(reports[0])
    if compacted:
        assert count // 2 < consumed < count - 1, (consumed, count)
    else:
        assert consumed == count - 1, (consumed, count)
    assert reports[1:] == ["", ""]
