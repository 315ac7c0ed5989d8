"""The web page answers the daemon's project-trust question (system Chromium, a real
``pitrio serve``): a new session in a project with its own extension shows pi 1.6.0's choices
as a dialog; the answer decides whether the extension loads and what ``trust.json`` keeps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from pitrio.actors.session.resources.trust import canonical_path
from tests.transports.browser import (
    ONE_PROCESS,
    Served,
    browser,
    needs_chromium,
    open_page,
    page,
    serve,
)

__all__ = ["browser", "page"]  # fixtures used by name
pytestmark = needs_chromium

MARKER = """
from pathlib import Path
Path({marker!r}).write_text("imported")

def setup(api):
    pass
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Served]:
    extensions = tmp_path / "work" / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "marker.py").write_text(MARKER.format(marker=str(tmp_path / "imported")))
    with serve(tmp_path, *ONE_PROCESS) as served:
        yield served


@pytest.mark.parametrize(
    ("choice", "imported", "saved"),
    [("Trust", True, True), ("Do not trust", False, False), (None, False, None)],
)
def test_the_trust_question_is_answered_on_the_page(
    page: Any,
    daemon: Served,
    tmp_path: Path,
    choice: str | None,
    imported: bool,
    saved: bool | None,
) -> None:
    open_page(page, daemon)
    page.click("#new-session")
    dialog = page.locator(".dialog.project-trust")
    expect(dialog).to_be_visible()
    work = canonical_path(daemon.cwd)
    expect(dialog.locator(".dialog-title")).to_contain_text(work)
    expect(dialog.locator("button.option")).to_have_count(5)
    if choice is None:
        dialog.get_by_role("button", name="Cancel").click()
    else:
        dialog.get_by_role("button", name=choice, exact=True).click()
    expect(page.locator(".dialog")).to_have_count(0)
    expect(page.locator("body[data-connected]")).to_have_count(1)
    assert (tmp_path / "imported").exists() == imported
    trust = daemon.agent / "trust.json"
    expected = None if saved is None else {work: saved}
    assert (json.loads(trust.read_text()) if trust.exists() else None) == expected
