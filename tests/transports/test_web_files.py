"""The page's files as the daemon serves them: every file of ``web/`` is served with its
content type and the page's policy, every module a script imports is among them, and nothing
else is served."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import httpx

from pitrio.transports.daemon.server import PAGE_FILES, PAGE_TYPES
from tests.transports.browser import Served, served

__all__ = ["served"]  # fixture used by name

WEB = Path(str(resources.files("pitrio.transports.daemon").joinpath("web")))
SERVED_SUFFIXES = tuple(PAGE_TYPES)


def page_files() -> list[str]:
    """Every file under web/ a browser may load (by suffix), as a path below web/."""
    return sorted(
        path.relative_to(WEB).as_posix()
        for path in WEB.rglob("*")
        if path.is_file() and path.suffix in SERVED_SUFFIXES
    )


def test_every_page_file_is_listed_and_every_import_resolves() -> None:
    listed = {name for name, _kind in PAGE_FILES.values()}
    assert set(page_files()) == listed
    for name in page_files():
        if not name.endswith(".js"):
            continue
        text = (WEB / name).read_text()
        for target in re.findall(r"""^\s*import\b[^"']*["']([^"']+)["']""", text, re.M):
            resolved = (Path("/" + name).parent / target).resolve().as_posix()
            assert resolved in PAGE_FILES, f"{name} imports {target}, which is not served"


def test_every_page_file_is_served_with_its_type(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as http:
        for path, (name, kind) in PAGE_FILES.items():
            reply = http.get(path)
            assert reply.status_code == 200, path
            assert reply.headers["content-type"] == kind, path
            assert "script-src 'self'" in reply.headers["content-security-policy"]
            assert reply.content == (WEB / name).read_bytes()
        assert http.get("/server.py").status_code == 404
        assert http.get("/web/app.js").status_code == 404
