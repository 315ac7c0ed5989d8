"""The page shows the session's MCP servers (get_state's ``mcpServers``): a badge per server
with its status, a failed one with the reason in its tooltip (system Chromium, a real
``pitrio serve`` with an agent-dir ``mcp.json``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.actors.mcp.support import forked
from tests.transports.browser import (
    ONE_PROCESS,
    answer,
    browser,
    log_frames,
    needs_chromium,
    page,
    serve,
    start_session,
    wait_for_frames,
)

__all__ = ["browser", "page"]  # fixtures used by name
pytestmark = needs_chromium


def test_each_mcp_server_shows_its_status(page: Any, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    servers = {
        "time": {
            "command": sys.executable,
            "args": forked("-m", "mcp_server_time", "--local-timezone", "UTC"),
        },
        "broken": {"command": str(tmp_path / "no-such-server")},
    }
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    with serve(tmp_path, *ONE_PROCESS, "--faux-chunk-delay", "0.01") as daemon:
        start_session(page, daemon)
        time_badge = page.locator("#mcp .mcp-server", has_text="time")
        expect(time_badge).to_have_attribute("data-status", "running", timeout=60_000)
        assert "2 tools" in (time_badge.get_attribute("title") or "")
        broken = page.locator("#mcp .mcp-server", has_text="broken")
        expect(broken).to_have_attribute("data-status", "failed", timeout=60_000)
        assert "no-such-server" in (broken.get_attribute("title") or "")


def test_no_badges_without_mcp_servers(page: Any, tmp_path: Path) -> None:
    log_frames(page)
    with serve(tmp_path, *ONE_PROCESS, "--faux-chunk-delay", "0.01") as daemon:
        start_session(page, daemon)
        expect(page.locator("#session-title")).not_to_have_text("No session")
        # The badges are drawn from get_state's answer: no badge is only a finding once the
        # page has drawn it (before, the toolbar is merely not drawn yet).
        wait_for_frames(page, answer("get_state"))
        expect(page.locator("#mcp .mcp-server")).to_have_count(0)
