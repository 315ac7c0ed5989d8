"""Where the ACP tests find the official TypeScript client library, installing it from npm.

``@agentclientprotocol/sdk`` (the Agent Client Protocol's own TypeScript SDK, which ships the
protocol's ``schema.json``) goes once per machine into the interop cache folder, under a file
lock, as :mod:`tests.interop.pi_install` installs pi; the machine's node runs it.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from tests.interop.pi_install import npm_install

SDK_PACKAGE = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"


def sdk_install_dir() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/pitrio-interop/acp-sdk-<version>``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pitrio-interop" / f"acp-sdk-{SDK_VERSION}"


def _install(base: Path) -> str:
    return npm_install(base, [f"{SDK_PACKAGE}@{SDK_VERSION}"], f"{SDK_PACKAGE} {SDK_VERSION}")


def find_sdk() -> tuple[Path | None, str]:
    """The installed package folder and ``""``, or ``None`` and why it cannot be had."""
    base = sdk_install_dir()
    package = base / "node_modules" / SDK_PACKAGE
    if not (package / "package.json").is_file():
        base.parent.mkdir(parents=True, exist_ok=True)
        with open(base.parent / f".acp-sdk-{SDK_VERSION}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            failure = "" if (package / "package.json").is_file() else _install(base)
        if failure:
            return None, failure
    version = json.loads((package / "package.json").read_text()).get("version")
    if version != SDK_VERSION:
        return None, f"{package} is version {version}, not {SDK_VERSION}"
    return package, ""
