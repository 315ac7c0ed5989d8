"""Where the differential harness finds real pi 0.73.1, installing it from npm when missing.

pi is installed once per machine into a cache folder outside the repository (the test command
does it, so a fresh machine needs nothing by hand); ``PITRIO_INTEROP_PI`` names another copy.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

PI_VERSION = "0.73.1"
PI_ENV = "PITRIO_INTEROP_PI"

__all__ = ["PI_ENV", "PI_VERSION", "find_pi_cli", "install_pi", "pi_install_dir"]


def pi_install_dir(env: dict[str, str] | None = None) -> Path:
    """Where the harness installs pi: ``${XDG_CACHE_HOME:-~/.cache}/pitrio-interop/pi-0.73.1``."""
    env = dict(os.environ) if env is None else env
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pitrio-interop" / f"pi-{PI_VERSION}"


def install_pi(base: Path) -> str:
    """Install pi from the npm registry into ``base`` (a cache folder outside the repository,
    once per machine: the test command itself does it, so a fresh machine needs nothing by
    hand); ``""``, or why it could not be installed."""
    npm = shutil.which("npm")
    if npm is None:
        return f"npm is not installed: pi {PI_VERSION} cannot be installed"
    base.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(
            [*command, f"@mariozechner/pi-coding-agent@{PI_VERSION}"],
            cwd=base,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return f"npm install of pi {PI_VERSION} took over 600 s"
    if done.returncode != 0:
        return f"npm install of pi {PI_VERSION} failed: {done.stderr.strip()[-300:]}"
    return ""


def find_pi_cli() -> tuple[Path | None, str]:
    """pi's ``cli.js`` and ``""``, or ``None`` and the reason the harness cannot run."""
    node = shutil.which("node")
    if node is None:
        return None, "node is not installed (pi 0.73.1 needs node >= 20)"
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    try:
        major = int(out.strip().lstrip("v").split(".")[0])
    except ValueError:
        return None, f"cannot read node's version from {out!r}"
    if major < 20:
        return None, f"node {out.strip()} is older than 20, which pi 0.73.1 needs"
    configured = os.environ.get(PI_ENV)
    base = Path(configured) if configured else pi_install_dir()
    cli = (
        base
        if base.suffix == ".js"
        else base / "node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
    )
    if not cli.is_file() and not configured:
        # Test workers (pytest-xdist) import this module at once: the first installs while the
        # others wait on the lock, then find pi there.
        base.parent.mkdir(parents=True, exist_ok=True)
        with open(base.parent / f".pi-{PI_VERSION}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            failure = "" if cli.is_file() else install_pi(base)
        if failure:
            return None, failure
    if not cli.is_file():
        return None, f"pi {PI_VERSION} is not installed at {cli} (set {PI_ENV} to where it is)"
    pkg = json.loads((cli.parent.parent / "package.json").read_text())
    if pkg.get("version") != PI_VERSION:
        return None, f"{cli} is pi {pkg.get('version')}, not {PI_VERSION}"
    return cli, ""
