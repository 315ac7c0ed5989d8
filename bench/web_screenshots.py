"""Screenshots of the daemon's web page in its main states, for the README.

    .venv/bin/python -m bench.web_screenshots [--out docs/screenshots]

Starts a real ``pitrio serve`` (a temporary agent dir) whose model is the shared mock LLM
(``../shared/tools/mock_llm.py``) and the permission-gate example extension, drives the system
Chromium with Playwright (the fixtures of ``tests/transports/browser.py``) and writes:

* ``chat.png``: a markdown reply with code, a finished tool card and an edit's diff;
* ``dialog.png``: the permission gate asking before ``rm``;
* ``retry.png``: the retry notice counting down after a 500;
* ``narrow.png`` and ``narrow-sessions.png``: 360 px wide, the chat and the session list.

Every wait is on something the page shows (a selector), never a fixed pause.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from tests.shared_dir import ROOT
from tests.transports.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    MOCK_SETTINGS,
    mock_llm,
    prompt,
    serve,
    start_session,
)

GATE = ROOT / "examples" / "extensions" / "permission_gate.py"
REPLY = (
    "Here is the plan:\n\n1. read the **config**\n2. patch `notes.txt`\n3. clean up\n\n"
    '```python\ndef greet(name: str) -> str:\n    return f"hello {name}"\n```\n'
)


def main() -> int:
    """Write the screenshots into ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if CHROMIUM is None:
        raise SystemExit("no chromium found (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        settings = {**MOCK_SETTINGS, "retry": {"provider": {"maxRetries": 0}}}
        with (
            mock_llm(root) as mock,
            serve(root, models=mock.models(), settings=settings, extensions=[GATE]) as daemon,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            (daemon.cwd / "notes.txt").write_text("alpha\nbeta\ngamma\n")
            (daemon.cwd / "old.log").write_text("x")
            start_session(page, daemon)
            edit = {"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}
            mock.queue(
                {"kind": "tool_call", "name": "bash", "arguments": {"command": "ls -1"}},
                {"kind": "tool_call", "name": "edit", "arguments": edit},
                {"kind": "text", "text": REPLY, "deltas": 30},
            )
            prompt(page, "Show me the plan and patch notes.txt")
            expect(page.locator(".msg.assistant .md pre code.hljs")).to_have_count(1)
            expect(page.locator("#status")).to_have_text("idle")
            page.screenshot(path=str(out / "chat.png"))

            mock.queue(
                {"kind": "tool_call", "name": "bash", "arguments": {"command": "rm old.log"}},
                {"kind": "text", "text": "Removed."},
            )
            prompt(page, "Remove old.log")
            expect(page.locator(".dialog.confirm")).to_be_visible()
            page.screenshot(path=str(out / "dialog.png"))
            page.get_by_role("button", name="Allow").click()
            expect(page.locator("#status")).to_have_text("idle")

            mock.queue(
                {"kind": "error", "preset": "server_error"}, {"kind": "text", "text": "Back."}
            )
            prompt(page, "And now?")
            expect(page.locator("#run-notice.retry .run-text")).to_have_text(
                re.compile(r"^Retrying in [12] s")
            )
            page.screenshot(path=str(out / "retry.png"))
            expect(page.locator("#status")).to_have_text("idle")

            page.set_viewport_size({"width": 360, "height": 740})
            expect(page.locator("#sidebar-toggle")).to_be_visible()
            expect(page.locator("#sidebar")).not_to_be_in_viewport()
            page.locator("#messages").evaluate("(box) => { box.scrollTop = box.scrollHeight; }")
            page.screenshot(path=str(out / "narrow.png"))
            page.click("#sidebar-toggle")
            expect(page.locator("#sidebar")).to_be_in_viewport(ratio=1)
            page.screenshot(path=str(out / "narrow-sessions.png"))
            browser.close()
    for path in sorted(out.glob("*.png")):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
