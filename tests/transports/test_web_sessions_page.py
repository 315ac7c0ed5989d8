"""The web page's sessions, models and error states in the system Chromium (Playwright)
against a real ``pitrio serve`` (issue 23): the model picker filled from the daemon before any
session exists, a per-session model change that leaves settings.json alone, rename / delete /
search, a wrong token, Send with no session, reconnect and resume after a dropped connection,
the lost-daemon banner and a refused command's message.

Connections are dropped from inside the page: an init script wraps ``WebSocket`` so a test can
close the page's sockets and, while "offline", point new ones at a closed port; the test then
waits on what the page shows, never on time."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.transports.browser import (
    Served,
    answer,
    browser,
    log_frames,
    needs_chromium,
    page,
    record_values,
    serve,
    served,
    wait_for_frames,
)

__all__ = ["browser", "page", "served"]  # fixtures used by name
pytestmark = needs_chromium

MODELS_JSON = {
    "providers": {
        "local": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "models": [
                {"id": "tiny", "name": "Tiny Local", "reasoning": True, "input": ["text", "image"]},
                {"id": "plain", "name": "Plain Local"},
            ],
        }
    }
}

SOCKETS = """
(closedPort) => {
  const Native = window.WebSocket;
  const sockets = [];
  window.__offline = false;
  window.WebSocket = function (url, protocols) {
    const target = window.__offline ? `ws://127.0.0.1:${closedPort}/` : url;
    const ws = new Native(target, protocols);
    sockets.push(ws);
    // Registered before the page's own handler, so it can keep an answer from the page.
    ws.addEventListener("message", (event) => {
      if (ws.__answerLost === undefined) return;
      const frame = JSON.parse(event.data);
      if (frame.type === "response" && frame.id === ws.__answerLost) {
        event.stopImmediatePropagation();
        window.__answersLost = (window.__answersLost || 0) + 1;
        window.__drop("/v1/sessions/");
      }
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
  // Go offline and close the page's open sockets whose address holds `part`.
  window.__drop = (part) => {
    window.__offline = true;
    for (const ws of sockets) if (ws.url.includes(part) && ws.readyState <= 1) ws.close();
  };
  // The next prompt a session socket sends is lost ("lose": it never reaches the daemon and
  // the socket drops at once) or delivered ("deliver": the daemon takes it and answers, and
  // the socket drops as the answer comes, before the page sees it).
  window.__promptFate = null;
  const send = Native.prototype.send;
  Native.prototype.send = function (data) {
    const fate = window.__promptFate;
    if (fate && this.url.includes("/v1/sessions/") && data.includes('"type":"prompt"')) {
      window.__promptFate = null;
      if (fate === "deliver") {
        this.__answerLost = JSON.parse(data).id;
        send.call(this, data);
      } else {
        window.__drop("/v1/sessions/");
      }
      return;
    }
    send.call(this, data);
  };
}
"""


BANNER_TEXTS = "(text) => [text.textContent]"
"""Every text the connection banner showed, in order (however briefly it showed it)."""


LONG = 60_000
"""ms: expect's own 5 s is too short for a multi-second reply or a daemon start on a machine
this loaded; these are waits on what the page shows, not sleeps."""


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def control_sockets(page: Any) -> None:
    page.add_init_script(script=f"({SOCKETS})({closed_port()})")


def open_page(page: Any, served: Served) -> None:
    """Load the page with the token and wait until the host socket is up."""
    page.goto(served.page_url)
    expect(page.locator("#host-status.on")).to_be_visible(timeout=LONG)
    expect(page.locator("#new-model[data-loaded]")).to_have_count(1, timeout=LONG)


def new_session(page: Any) -> None:
    """Create a session and wait until its socket is attached."""
    before = page.locator("#sessions li.session").count()
    page.click("#new-session")
    expect(page.locator("#sessions li.session")).to_have_count(before + 1, timeout=LONG)
    expect(page.locator("body[data-connected]")).to_have_count(1, timeout=LONG)


def ask(page: Any, text: str) -> None:
    """Send a prompt and wait for the (echoed) reply."""
    count = page.locator(".msg.assistant").count()
    page.fill("#prompt", text)
    page.click("#send")
    expect(page.locator(".msg.assistant")).to_have_count(count + 1, timeout=LONG)
    expect(page.locator("#status")).to_have_text("idle", timeout=LONG)


def rename_to(page: Any, name: str) -> None:
    """Type ``name`` into the open rename field and press Enter, in one step of the page's
    thread. The list is drawn again whenever a host event asks (a run settled, a rename),
    re-creating the field with what was typed and the caret at its end: one drawn between the
    select-all and the typing of Playwright's ``fill`` appended the new name to the old."""
    typed = page.evaluate(
        """(name) => {
          const field = document.querySelector("#sessions .rename-input");
          field.value = name;
          field.dispatchEvent(new Event("input", { bubbles: true }));
          field.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true,
            cancelable: true }));
          return field.value;
        }""",
        name,
    )
    assert typed == name


def item(page: Any, title: str) -> Any:
    return page.locator("#sessions li.session", has=page.locator(".name", has_text=title))


def read_settings(agent: Path) -> Any:
    path = agent / "settings.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_the_model_picker_comes_from_the_daemon_before_any_session(
    page: Any, tmp_path: Path
) -> None:
    with serve(tmp_path, models=MODELS_JSON) as daemon:
        open_page(page, daemon)
        expect(page.locator("#sessions li.session")).to_have_count(0)
        local = page.locator('#new-model optgroup[label="local"] option')
        expect(local).to_have_count(2)
        tiny = page.locator('#new-model option[value="local/tiny"]')
        expect(tiny).to_have_text("Tiny Local (tiny) · thinking, images · default")
        assert page.locator("#new-model").input_value() == "local/tiny"
        page.select_option("#new-model", "local/plain")
        new_session(page)
        expect(page.locator("#model")).to_have_value("local/plain")
        expect(page.locator('#model optgroup[label="local"] option')).to_have_count(2)
        assert page.errors == []


def test_a_model_change_changes_that_session_only(page: Any, served: Served) -> None:
    settings = served.agent / "settings.json"
    settings.write_text(json.dumps({"defaultThinkingLevel": "low"}))
    log_frames(page)
    open_page(page, served)
    expect(page.locator('#new-model option[value="faux/echo"]')).to_have_count(1)
    new_session(page)
    first = page.locator("body").get_attribute("data-connected")
    expect(page.locator("#model")).to_have_value("faux/echo")
    # Each change is answered before the next session is opened: opening it closes this
    # session's socket, and the daemon drops the commands of a closed socket still in flight.
    # (The select shows the choice at once, whether or not the daemon took it.)
    page.select_option("#model", "faux/faux-think")
    wait_for_frames(page, answer("set_model"))
    expect(page.locator("#model")).to_have_value("faux/faux-think")
    page.select_option("#thinking", "high")
    wait_for_frames(page, answer("set_thinking_level"))
    expect(page.locator("#thinking")).to_have_value("high")
    # A second session starts on the defaults, not on the first one's choice.
    new_session(page)
    expect(page.locator("#model")).to_have_value("faux/echo")
    expect(page.locator("#thinking")).not_to_have_value("high")
    # Back on the first session: its choice is still its own.
    page.click(f'#sessions li[data-id="{first}"] .name')
    expect(page.locator(f'body[data-connected="{first}"]')).to_have_count(1)
    expect(page.locator("#model")).to_have_value("faux/faux-think")
    expect(page.locator("#thinking")).to_have_value("high")
    assert read_settings(served.agent) == {"defaultThinkingLevel": "low"}
    assert page.errors == []


def test_rename_delete_and_search(page: Any, served: Served) -> None:
    open_page(page, served)
    new_session(page)
    ask(page, "Fix the parser\nit breaks on tabs")
    parser = item(page, "Fix the parser")
    expect(parser).to_have_count(1)
    # Rename: the list and the toolbar follow.
    parser.locator("button.rename").click()
    expect(page.locator("#sessions .rename-input")).to_be_focused()
    rename_to(page, "Parser work")
    expect(item(page, "Parser work")).to_have_count(1)
    expect(page.locator("#session-title")).to_have_text("Parser work")
    # A refused rename shows the daemon's message and changes nothing.
    item(page, "Parser work").locator("button.rename").click()
    expect(page.locator("#sessions .rename-input")).to_be_focused()
    rename_to(page, "   ")
    expect(page.locator("#notice.error")).to_have_text("rename: Session name cannot be empty")
    page.press("#sessions .rename-input", "Escape")
    expect(item(page, "Parser work")).to_have_count(1)
    new_session(page)
    ask(page, "release notes please")
    expect(page.locator("#sessions li.session")).to_have_count(2)
    # Search: by name, by message text; nothing found says so.
    page.fill("#session-search", "parser")
    expect(page.locator("#sessions li.session")).to_have_count(1)
    expect(page.locator("#sessions li.session .name")).to_have_text("Parser work")
    page.fill("#session-search", "tabs")
    expect(page.locator("#sessions li.session .name")).to_have_text("Parser work")
    page.fill("#session-search", "nowhere at all")
    expect(page.locator("#sessions-empty")).to_have_text("No session matches “nowhere at all”.")
    page.fill("#session-search", "")
    expect(page.locator("#sessions li.session")).to_have_count(2)
    # Delete asks first; "Keep" keeps it, "Delete" removes the session and its file.
    files = list((served.agent / "sessions").rglob("*.jsonl"))
    assert len(files) == 2
    item(page, "Parser work").locator("button.delete").click()
    expect(page.locator("#sessions .confirm")).to_have_text("Delete this session and its file?")
    page.click("#sessions button.cancel-delete")
    expect(page.locator("#sessions .confirm")).to_have_count(0)
    expect(page.locator("#sessions li.session")).to_have_count(2)
    item(page, "Parser work").locator("button.delete").click()
    page.click("#sessions button.confirm-delete")
    expect(page.locator("#sessions li.session")).to_have_count(1)
    expect(item(page, "release notes please")).to_have_count(1)
    assert len(list((served.agent / "sessions").rglob("*.jsonl"))) == 1
    assert page.errors == []


def test_a_wrong_token_is_said_to_be_refused(page: Any, served: Served) -> None:
    # No token at all: the form asks for it, no error yet.
    page.goto(served.url)
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#login-error")).to_be_hidden()
    page.goto("about:blank")  # else only the fragment changes: no new page load
    page.goto(f"{served.url}#token=not-the-token")
    expect(page.locator("#login-error")).to_contain_text("The token was refused")
    expect(page.locator("#login")).to_be_visible()
    page.fill("#token-input", served.token)
    page.click("#login-form button[type=submit]")
    expect(page.locator("#host-status.on")).to_be_visible()
    expect(page.locator("#login")).to_be_hidden()
    assert page.errors == []


def test_a_daemon_without_a_token_needs_none(page: Any, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    token = agent / "daemon-token"  # read by the fixture, unused by a --no-auth daemon
    token.write_text("unused\n")
    token.chmod(0o600)
    with serve(tmp_path, "--no-auth") as daemon:
        page.goto(daemon.url)
        expect(page.locator("#host-status.on")).to_be_visible()
        expect(page.locator("#login")).to_be_hidden()
        new_session(page)
    assert page.errors == []


def test_send_with_no_session_creates_one(page: Any, served: Served) -> None:
    open_page(page, served)
    expect(page.locator("#sessions li.session")).to_have_count(0)
    page.fill("#prompt", "start here")
    page.click("#send")
    expect(page.locator("#sessions li.session")).to_have_count(1)
    expect(page.locator(".msg.assistant .text").last).to_have_text("start here")
    expect(item(page, "start here")).to_have_count(1)
    # The run's leading system message (prompt and tools) is not shown as a message.
    expect(page.locator(".msg")).to_have_count(2)
    expect(page.locator(".msg.system")).to_have_count(0)
    assert page.errors == []


def test_reconnect_resumes_and_shows_what_was_missed(page: Any, served: Served) -> None:
    control_sockets(page)
    open_page(page, served)
    new_session(page)
    # ~2,300 characters: some 190 chunks of 20 ms, so the drop lands well inside the reply.
    text = " ".join(f"w{i}" for i in range(450))
    page.fill("#prompt", text)
    page.click("#send")
    expect(page.locator(".msg.assistant.streaming .text")).to_contain_text("w1 ")
    # The session's socket drops mid-reply and cannot come back yet.
    page.evaluate("window.__drop('/v1/sessions/')")
    expect(page.locator("#notice")).to_contain_text("Disconnected from the session")
    # The reply ends meanwhile (the host socket still reports it: the list says idle). The
    # count is the host's messageCount: pi 1.6.0 counts the system message, the prompt, the reply.
    expect(page.locator("#sessions li.active .meta")).to_have_text(
        "live · 3 messages", timeout=LONG
    )
    assert page.locator(".msg.assistant .text").last.inner_text() != text
    page.evaluate("window.__offline = false")
    line = page.locator(".line.reconnected")
    expect(line).to_have_text(re.compile(r"^reconnected — \d+ events replayed$"), timeout=LONG)
    replayed = int(re.findall(r"\d+", line.inner_text())[0])
    assert replayed > 1
    expect(page.locator(".msg.assistant")).to_have_count(1)
    expect(page.locator(".msg.system")).to_have_count(0)
    expect(page.locator(".msg.assistant .text")).to_have_text(text)
    expect(page.locator("#notice")).to_be_hidden()
    # The session goes on over the new socket.
    ask(page, "after")
    expect(page.locator(".msg.assistant .text").last).to_have_text("after")
    assert page.errors == []


def test_a_lost_daemon_connection_shows_a_banner_with_retry(page: Any, served: Served) -> None:
    control_sockets(page)
    record_values(page, "__banner", "banner-text", BANNER_TEXTS)
    open_page(page, served)
    new_session(page)
    page.evaluate("window.__drop('/v1/host')")
    banner = page.locator("#banner")
    expect(banner).to_be_visible()
    # What the banner said first, however briefly (the page's next attempt, a second later,
    # changes it: a check polling for it could come too late).
    page.wait_for_function("() => window.__banner.length > 0")
    assert page.evaluate("() => window.__banner[0]").startswith(
        "Lost the connection to the daemon. Retrying in"
    )
    expect(page.locator("#host-status.on")).to_have_count(0)
    # Still offline at the next attempt: the banner says so and keeps counting.
    expect(banner).to_contain_text("Cannot reach the daemon", timeout=LONG)
    # Online for the socket "Retry now" opens only: the page's own attempts, on its timer,
    # stay offline, so they cannot reconnect first (hiding the button before the click).
    page.evaluate(
        """() => {
          const retry = document.getElementById("banner-retry");
          document.addEventListener("click", (event) => {
            if (event.target === retry) window.__offline = false;
          }, true);
          document.addEventListener("click", (event) => {
            if (event.target === retry) window.__offline = true;
          });
        }"""
    )
    page.click("#banner-retry")
    expect(banner).to_be_hidden()
    expect(page.locator("#host-status.on")).to_be_visible()
    expect(page.locator("#sessions li.session")).to_have_count(1)
    assert page.errors == []


def test_a_restarted_daemon_is_reconnected_and_the_session_reloaded(
    page: Any, tmp_path: Path
) -> None:
    port = closed_port()
    with serve(tmp_path, "--port", str(port)) as daemon:
        open_page(page, daemon)
        new_session(page)
        ask(page, "before the restart")
    banner = page.locator("#banner")
    expect(banner).to_contain_text("Cannot reach the daemon", timeout=LONG)
    expect(page.locator("#notice")).to_contain_text("Disconnected from the session")
    with serve(tmp_path, "--port", str(port)):
        # "Retry now", unless the page's own next attempt has reconnected already (it keeps
        # retrying: a daemon slow to start met it first, and the hidden button then could
        # not be clicked). Checked and clicked in one step of the page's own thread.
        page.evaluate(
            "() => { if (!document.getElementById('banner').classList.contains('hidden'))"
            " document.getElementById('banner-retry').click(); }"
        )
        expect(banner).to_be_hidden(timeout=LONG)
        # The new daemon numbers the session's events afresh: the page reloads it.
        expect(page.locator(".line.reconnected")).to_have_text(
            "reconnected — the events missed were no longer held; the session was reloaded",
            timeout=LONG,
        )
        expect(page.locator(".msg.assistant .text")).to_have_text("before the restart")
        ask(page, "after the restart")
        expect(page.locator(".msg.assistant .text").last).to_have_text("after the restart")
        expect(page.locator("#sessions li.session")).to_have_count(1)
    assert page.errors == []


@pytest.mark.parametrize("fate", ["lose", "deliver"])
def test_a_prompt_cut_off_with_its_socket_is_sent_again_and_runs_once(
    page: Any, served: Served, fate: str
) -> None:
    # Exactly-once commands: the page keeps a prompt until it is answered and sends it again,
    # with its id, after the reconnect. Lost on the way, it runs then; delivered, the daemon
    # answers the repeat and does not run it again.
    control_sockets(page)
    open_page(page, served)
    new_session(page)
    page.evaluate(f"window.__promptFate = {json.dumps(fate)}")
    page.fill("#prompt", "only once")
    page.click("#send")
    expect(page.locator("#notice")).to_contain_text("Disconnected from the session")
    # Delivered, the daemon took the prompt and answered it; the page never saw that answer.
    assert page.evaluate("window.__answersLost || 0") == (1 if fate == "deliver" else 0)
    page.evaluate("window.__offline = false")
    expect(page.locator(".line.reconnected")).to_have_count(1, timeout=LONG)
    expect(page.locator(".msg.assistant .text")).to_have_text("only once", timeout=LONG)
    expect(page.locator("#status")).to_have_text("idle", timeout=LONG)
    # One prompt and one reply in the session (pi 1.6.0 counts its system message too).
    expect(page.locator("#sessions li.active .meta")).to_have_text(
        "live · 3 messages", timeout=LONG
    )
    expect(page.locator(".msg.user")).to_have_count(1)
    # Ran once, also after these checks: a second run of the prompt sent again would start
    # at once, before the session takes the next prompt (it takes them in order): once the
    # reply to the next one is drawn, it would be in the transcript and the count.
    ask(page, "and then")
    expect(page.locator(".msg.user .text")).to_have_text(["only once", "and then"])
    expect(page.locator("#sessions li.active .meta")).to_have_text(
        "live · 5 messages", timeout=LONG
    )
    assert page.errors == []
