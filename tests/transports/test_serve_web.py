"""The daemon's web page in a real headless Chromium (driven over the DevTools protocol).

Needs a ``chromium`` binary (Debian: ``apt-get install -y chromium``); without one the test is
skipped with that reason, loudly, in pytest's summary.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from pitrio.actors.model_router import FauxProvider
from tests.transports.daemon_harness import TOKEN, running_daemon

BROWSER = next(
    (
        found
        for name in ("chromium", "chromium-browser", "google-chrome", "chrome")
        if (found := shutil.which(name))
    ),
    None,
)

pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="SKIPPED LOUDLY: no chromium on PATH, the web page is untested here "
    "(install it with `apt-get install -y chromium`)",
)


class DevTools:
    """A minimal DevTools protocol client: commands by id, one page session."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.next_id = 0
        self.session: str | None = None

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        await self.ws.send_message(json.dumps(message))
        with trio.fail_after(20):
            while True:
                reply = json.loads(await self.ws.get_message())
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise AssertionError(f"{method}: {reply['error']}")
                    return reply.get("result")

    async def evaluate(self, expression: str) -> Any:
        result = await self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, seconds: float = 20.0) -> Any:
        with trio.fail_after(seconds):
            while True:
                try:
                    value = await self.evaluate(expression)
                except AssertionError:
                    value = None  # the page is still loading
                if value:
                    return value
                await trio.sleep(0.05)


async def test_page_creates_a_session_streams_and_aborts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert BROWSER is not None
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    faux = FauxProvider(chunk_delay=0.02)
    async with running_daemon(agent, faux) as daemon:
        browser = await trio.lowlevel.open_process(
            [
                BROWSER,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={tmp_path / 'profile'}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        try:
            assert browser.stderr is not None
            output = b""
            with trio.fail_after(30):
                while not (match := re.search(rb"DevTools listening on (ws://\S+)", output)):
                    chunk = await browser.stderr.receive_some(4096)
                    assert chunk, output.decode(errors="replace")
                    output += chunk
            async with open_websocket_url(match.group(1).decode(), max_message_size=64 << 20) as ws:
                tools = DevTools(ws)
                page = f"http://127.0.0.1:{daemon.port}/#token={TOKEN}"
                target = await tools.call("Target.createTarget", {"url": page})
                attached = await tools.call(
                    "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
                )
                tools.session = attached["sessionId"]
                await tools.wait_for(
                    "document.getElementById('host-status').classList.contains('on')"
                )
                # The token left the address bar (it only travels in the fragment).
                assert "token" not in await tools.evaluate("location.href")
                await tools.evaluate("document.getElementById('new-session').click()")
                await tools.wait_for(
                    "state.current && state.current.ws && state.current.ws.readyState === 1"
                    " && document.querySelectorAll('#sessions li').length === 1"
                )
                await tools.evaluate(
                    "document.getElementById('prompt').value = 'hello from the browser';"
                    "document.getElementById('send').click()"
                )
                await tools.wait_for(
                    "[...document.querySelectorAll('.msg.assistant .text')]"
                    ".some(n => n.textContent === 'hello from the browser')"
                )
                await tools.wait_for("document.getElementById('status').textContent === 'idle'")
                await tools.wait_for(
                    "document.getElementById('usage').textContent.includes('tokens')"
                )
                # A long reply: abort it while it streams.
                await tools.evaluate(
                    "document.getElementById('prompt').value = 'word '.repeat(400);"
                    "document.getElementById('send').click()"
                )
                await tools.wait_for(
                    "document.getElementById('status').textContent === 'streaming'"
                    " && document.querySelector('.msg.assistant.streaming .text') !== null"
                )
                await tools.evaluate("document.getElementById('abort').click()")
                await tools.wait_for("document.querySelector('.msg.assistant.error') !== null")
                await tools.wait_for("document.getElementById('status').textContent === 'idle'")
                shot = await tools.call("Page.captureScreenshot", {"format": "png"})
                (tmp_path / "page.png").write_bytes(base64.b64decode(shot["data"]))
                text = await tools.evaluate(
                    "document.querySelector('.msg.assistant.error').textContent"
                )
                assert "aborted" in text.lower()
        finally:
            browser.kill()
            await browser.wait()
