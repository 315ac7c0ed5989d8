"""Playwright fixtures for the daemon's web page: the system Chromium and a real ``pitrio serve``.

Playwright's own browser download cannot work here, so the system Chromium is launched by path;
without one every test using these fixtures is skipped, loudly, with the reason in pytest's
summary. Tests using them are plain (sync) functions: Playwright's sync API drives the browser
while the daemon runs as a subprocess, so nothing shares an event loop with pytest-trio.

Use from a test module::

    from tests.transports.browser import browser, page, served  # noqa: F401  (fixtures)

Checks without races (each rule was a CI or stress failure):

* Wait for the condition (``expect``), never read once after an action whose effect comes
  later (a frame, a socket message, a drawing in the next animation frame).
* A negative check ("no badge", "ran once") waits first for a positive event proving the
  moment has passed: the answer it is about (:func:`log_frames`, :func:`wait_for_frames`),
  the reply after it. ``#status`` reading "idle" proves little: it reads so before a run
  starts (it follows the session's own socket while attached, the host socket's
  ``session_idle`` otherwise, which may come before the session's last frames).
* A state that shows briefly (a countdown, a banner before the next attempt) is recorded by
  the page itself (a ``MutationObserver`` from an init script) and checked from the record.
* What a test draws or types can be redrawn by the page's own pending request between two
  steps: draw (or type) and read in one ``evaluate``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from tests.shared_dir import TOOLS

PITRIO = str(Path(sys.executable).parent / "pitrio")
CHROMIUM = next(
    (
        found
        for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
        if (found := shutil.which(name))
    ),
    None,
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SKIP_REASON = (
    "SKIPPED LOUDLY: no chromium found (looked for /usr/bin/chromium and chromium on PATH); "
    "the web page is untested here (install it with `apt-get install -y chromium`)"
)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
"""Mark a test module with ``pytestmark = needs_chromium``."""

ONE_PROCESS = ("--workers", "1")
"""``pitrio serve`` options for a daemon of one process (no acceptor, no worker processes):
for a module whose checks are of the page alone, not of how the daemon spreads sessions over
its workers. It runs one process where the default runs an acceptor, its fork server and a
worker per core (forks: the start costs about the same CPU since the workers are forked, where
it was three times as much); ``test_serve_workers`` and the modules that keep the default
cover the workers."""


@attrs.frozen
class Served:
    """A running ``pitrio serve``: its address, token, agent dir and process."""

    url: str
    token: str
    agent: Path
    cwd: Path
    process: subprocess.Popen[bytes]
    output: list[str]

    @property
    def page_url(self) -> str:
        """The page's address with the token in the fragment (as ``pitrio serve`` prints it)."""
        return f"{self.url}#token={self.token}"


def _read_until(
    process: subprocess.Popen[bytes], pattern: str, seen: list[str], seconds: float
) -> re.Match[str]:
    """Read the process's stdout line by line until one matches (no thread: a selector)."""
    assert process.stdout is not None
    deadline = time.monotonic() + seconds
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            for line in seen:
                if match := re.search(pattern, line):
                    return match
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise AssertionError(f"pitrio serve printed no line matching {pattern!r}: {seen}")
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"pitrio serve exited ({process.poll()}): {seen}")
            buffer += chunk
            *lines, rest = buffer.split(b"\n")
            buffer = rest
            seen.extend(line.decode("utf-8", "replace") for line in lines)


@contextlib.contextmanager
def serve(
    root: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    models: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    extensions: Sequence[Path] = (),
) -> Iterator[Served]:
    """Run ``pitrio serve --port 0`` with its own agent dir and cwd under ``root``.

    ``models``/``settings`` are written as the agent dir's ``models.json``/``settings.json``;
    ``extensions`` are copied into its ``extensions/`` folder. ``args`` are added to the
    command line (e.g. ``"--faux-chunk-delay", "0.02"``).
    """
    agent = root / "agent"
    cwd = root / "work"
    agent.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    if models is not None:
        (agent / "models.json").write_text(json.dumps(models))
    if settings is not None:
        (agent / "settings.json").write_text(json.dumps(settings))
    if extensions:
        (agent / "extensions").mkdir(exist_ok=True)
        for extension in extensions:
            shutil.copy(extension, agent / "extensions" / extension.name)
    environment = {
        **os.environ,
        "HOME": str(root),
        "PITRIO_AGENT_DIR": str(agent),
        **(env or {}),
    }
    environment.pop("PITRIO_SESSION_DIR", None)
    process = subprocess.Popen(
        [PITRIO, "serve", "--port", "0", "--cwd", str(cwd), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=environment,
        cwd=cwd,
    )
    seen: list[str] = []
    try:
        url = _read_until(process, r"listening on (http://\S+)", seen, 30).group(1)
        _read_until(process, r"web page: (\S+)", seen, 30)
        token = (agent / "daemon-token").read_text().strip()
        yield Served(url=url, token=token, agent=agent, cwd=cwd, process=process, output=seen)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


@attrs.frozen
class MockLLM:
    """The shared mock LLM (``../shared/tools/mock_llm.py``) running as a subprocess."""

    port: int

    @property
    def base_url(self) -> str:
        """Its OpenAI-compatible base address."""
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *specs: dict[str, Any]) -> None:
        """Append one-shot response specs (served before rules and the default)."""
        httpx.post(f"http://127.0.0.1:{self.port}/_mock/queue", json=list(specs)).raise_for_status()

    def models(self) -> dict[str, Any]:
        """A ``models.json`` with its one model, ``mock/mock-model`` (text and images)."""
        return {
            "providers": {
                "mock": {
                    "baseUrl": self.base_url,
                    "api": "openai-completions",
                    "apiKey": "mock-key",
                    "models": [
                        {
                            "id": "mock-model",
                            "name": "Mock Model",
                            "reasoning": False,
                            "input": ["text", "image"],
                            "contextWindow": 128000,
                            "maxTokens": 16384,
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        }
                    ],
                }
            }
        }


MOCK_SETTINGS = {"defaultProvider": "mock", "defaultModel": "mock-model"}
"""A ``settings.json`` making the mock the default model of new sessions."""


@contextlib.contextmanager
def mock_llm(root: Path, script: Mapping[str, Any] | None = None) -> Iterator[MockLLM]:
    """Run the shared mock LLM on a free loopback port with ``script`` (its config keys)."""
    script_file = root / "mock-script.json"
    script_file.write_text(json.dumps(script or {}))
    process = subprocess.Popen(
        [sys.executable, str(TOOLS / "mock_llm.py"), "--port", "0", "--script", str(script_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    seen: list[str] = []
    try:
        line = _read_until(process, r"listening on http://127\.0\.0\.1:(\d+)", seen, 20)
        yield MockLLM(port=int(line.group(1)))
    finally:
        process.kill()  # its handler threads may sleep in a slow response
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """The system Chromium under Playwright, one per test process (an xdist worker).

    Starting Playwright's driver and the browser costs ~1.5 s of CPU; each test has its own
    context (``page``: no storage, cookies or pages shared), so the browser itself is started
    once, not once per module. ``tests/transports/conftest.py`` defines it for the whole
    process: a session fixture imported into each test module would be one per module.
    Between Playwright's calls its asyncio loop is idle; the trio tests that run in the same
    process meanwhile do not use asyncio.
    """
    if CHROMIUM is None:
        pytest.skip(SKIP_REASON)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture(scope="module")
def browser(chromium: Any) -> Any:
    """The process's Chromium (:func:`chromium`), for a test module."""
    return chromium


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (its own context: no storage shared between tests), 1280x800."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def served(tmp_path: Path, daemon_options: tuple[str, ...]) -> Iterator[Served]:
    """A ``pitrio serve`` with the echoing faux model streaming slowly (20 ms per chunk), and
    the module's ``daemon_options`` (``tests/transports/conftest.py``)."""
    with serve(tmp_path, "--faux-chunk-delay", "0.02", *daemon_options) as daemon:
        yield daemon


@pytest.fixture
def mock(tmp_path: Path) -> Iterator[MockLLM]:
    """The shared mock LLM, scripted by the test (``mock.queue(...)``)."""
    with mock_llm(tmp_path) as llm:
        yield llm


@pytest.fixture
def mocked(tmp_path: Path, mock: MockLLM, daemon_options: tuple[str, ...]) -> Iterator[Served]:
    """A ``pitrio serve`` whose default model is the mock LLM's (and ``daemon_options``)."""
    with serve(tmp_path, *daemon_options, models=mock.models(), settings=MOCK_SETTINGS) as daemon:
        yield daemon


SESSION_START = 60_000
"""ms: the bound on waiting for a new session to be listed and attached (see start_session)."""


def open_page(page: Any, daemon: Served) -> None:
    """Load the page with the token and wait until the host socket is up."""
    page.goto(daemon.page_url)
    page.wait_for_selector("#host-status.on")


def start_session(page: Any, daemon: Served) -> None:
    """Load the page, create a session and wait until its socket is attached."""
    from playwright.sync_api import expect

    open_page(page, daemon)
    before = page.locator("#sessions li").count()
    page.click("#new-session")
    # A session's start (its extensions, MCP servers, a cold import) took over expect's own
    # 5 s on a loaded machine: these wait on what the page shows, bounded, never on time.
    expect(page.locator("#sessions li")).to_have_count(before + 1, timeout=SESSION_START)
    expect(page.locator("body[data-connected]")).to_have_count(1, timeout=SESSION_START)


def prompt(page: Any, text: str) -> None:
    """Type ``text`` into the composer and press Enter."""
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def record_values(page: Any, name: str, element_id: str, values: str) -> None:
    """Record in ``window[name]``, in order, every value the page showed in the element
    ``element_id``, however briefly it showed it (call before the page loads). ``values`` is a
    JavaScript function of the element giving the values it shows now (a list); each is
    recorded unless equal (as JSON) to the last one recorded. Read the record with
    ``page.evaluate``: a state shown for a second cannot be missed by polling late."""
    page.add_init_script(
        f"""
window[{json.dumps(name)}] = [];
document.addEventListener("DOMContentLoaded", () => {{
  const record = window[{json.dumps(name)}];
  const box = document.getElementById({json.dumps(element_id)});
  const values = {values};
  new MutationObserver(() => {{
    for (const value of values(box)) {{
      if (JSON.stringify(record.at(-1)) !== JSON.stringify(value)) record.push(value);
    }}
  }}).observe(box, {{ attributes: true, childList: true, subtree: true, characterData: true }});
}});
"""
    )


FRAME_LOG = """
(() => {
  // Every frame the page's sockets receive, parsed, in the order received, with the socket's
  // kind ("host" or "session"). The listener is added when the socket is made, so it runs
  // before the page's own handler of the same frame (in the same task).
  window.__frames = [];
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const socket = String(args[0]).includes("/v1/host") ? "host" : "session";
      this.addEventListener("message", (event) => {
        try {
          window.__frames.push({ ...JSON.parse(event.data), socket });
        } catch {
          // not JSON: not a frame a test waits for
        }
      });
    }
  };
})();
"""


def log_frames(page: Any) -> None:
    """Record every frame the page's sockets receive (call before the page loads), for
    :func:`wait_for_frames`."""
    page.add_init_script(FRAME_LOG)


def event(kind: str) -> str:
    """A frame predicate for :func:`wait_for_frames`: a session event of this type."""
    return f"(f) => f.socket === 'session' && f.type === {json.dumps(kind)}"


def answer(command: str) -> str:
    """A frame predicate for :func:`wait_for_frames`: a successful response to ``command``."""
    return (
        f"(f) => f.socket === 'session' && f.type === 'response'"
        f" && f.command === {json.dumps(command)} && f.success === true"
    )


def wait_for_frames(page: Any, *predicates: str) -> None:
    """Wait until the page received frames matching ``predicates`` (JavaScript functions of a
    frame, see :func:`event` and :func:`answer`) in this order, with others between.

    A page that handles a frame draws it in the same task: once this returns, the page has
    drawn them (the check runs in a later task). The page must have been loaded after
    :func:`log_frames`. This waits on what happened, not on time: a negative check made after
    it ("the answer drew no badge") cannot pass by being early.
    """
    checks = ", ".join(f"({predicate})" for predicate in predicates)
    page.wait_for_function(
        f"""() => {{
          const checks = [{checks}];
          let next = 0;
          for (const frame of window.__frames || []) {{
            if (next < checks.length && checks[next](frame)) next += 1;
          }}
          return next === checks.length;
        }}"""
    )
