"""A private PostgreSQL cluster for tests and benchmarks: initdb in a temporary directory.

The server binaries come from the distribution (``initdb`` on ``PATH``, else
``/usr/lib/postgresql/<version>/bin``). initdb refuses to run as root, so as root the cluster
belongs to the ``postgres`` system user and every server command runs through ``runuser``.
The server listens on 127.0.0.1 at a free port and on a Unix socket inside the directory, so
nothing else on the machine is touched; :meth:`Cluster.stop` removes it all.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import attrs


def find_bin_dir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, or ``None`` when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    """A TCP port nobody listens on right now (loopback)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.define
class Cluster:
    """A running test cluster: its URL, and commands to stop, start and remove it."""

    bin_dir: Path
    root: Path
    port: int
    fsync: bool
    _names: itertools.count[int] = attrs.field(factory=itertools.count)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of one database of the cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-k {self.root} -p {self.port} -h 127.0.0.1"
        if not self.fsync:
            options += " -F"  # tests only: a crash of the machine is not what they check
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: like a crash; the next start recovers from WAL)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def new_database(self, template: str | None = None) -> str:
        """A fresh, empty database (a copy of ``template`` if given); returns its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            clause = f" TEMPLATE {template}" if template else ""
            conn.execute(f"CREATE DATABASE {name}{clause}".encode())
        return self.url(name)

    def remove(self) -> None:
        """Stop the server (if it runs) and delete the cluster's directory."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(*, fsync: bool = False) -> Cluster:
    """initdb a cluster in a new temporary directory and start it."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries (initdb) found")
    root = Path(tempfile.mkdtemp(prefix="pitrio-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    os.chmod(root, 0o700)
    cluster = Cluster(bin_dir=bin_dir, root=root, port=free_port(), fsync=fsync)
    initdb = [
        "initdb",
        "-D",
        str(cluster.data),
        "-U",
        "postgres",
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]
    try:
        cluster._run(*initdb)
        cluster.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


# -- one cluster per test run ----------------------------------------------------------------

TEMPLATE = "pitrio_template"
_shared: Cluster | None = None
_failure: str | None = None


def shared_cluster() -> Cluster:
    """The test run's cluster, started on first use with a migrated template database, and
    removed when the run ends. Skips the calling test only when PostgreSQL is not installed."""
    global _shared, _failure
    import pytest

    if _shared is not None:
        return _shared
    if find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql)")
    if _failure is not None:
        raise RuntimeError(_failure)
    try:
        cluster = start_cluster()
    except (subprocess.SubprocessError, OSError) as exc:
        _failure = f"starting the PostgreSQL test cluster failed: {exc}"
        raise
    atexit.register(cluster.remove)
    import psycopg

    from pitrio.actors.session_store.postgres.database import migrate

    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {TEMPLATE}".encode())
    with psycopg.connect(cluster.url(TEMPLATE), autocommit=True) as conn:
        migrate(conn)
    _shared = cluster
    return cluster


def fresh_database() -> str:
    """The URL of a new, migrated database of the shared cluster."""
    return shared_cluster().new_database(TEMPLATE)
