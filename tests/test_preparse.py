"""The launcher's parsing child (pitrio/_preparse.py, pitrio/_preparse_child.py; issue 38):
which command lines start one, and that every way it can go wrong leaves the in-process
read, no zombie and no orphan. That what it offers reads the same as the file read
in-process is ``tests/actors/test_session_store_preparsed.py``'s."""

from __future__ import annotations

import io
import marshal
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import orjson
import pytest

from pitrio import _preparse as preparse
from pitrio import _preparse_child as preparse_child
from pitrio.actors.session_store.catalog import most_recent_session, resolve_session_arg
from pitrio.actors.session_store.paths import session_dir
from pitrio.actors.session_store.storage import read_session

HEADER = b'{"type":"session","version":3,"id":"s-1","timestamp":"t","cwd":"/p"}'


def message(entry_id: str, parent: str | None) -> bytes:
    return orjson.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        }
    )


def session_file(path: Path, count: int = 50, header: bytes = HEADER) -> Path:
    lines = [header, *(message(f"e{n}", f"e{n - 1}" if n else None) for n in range(count))]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def reaped(offer: preparse.Offer) -> bool:
    """Whether the child was reaped (by the reader, or by its thread once it exited)."""
    if offer.reaper is not None:
        offer.reaper.join(30)
    try:
        os.waitpid(offer.pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def finished(offer: preparse.Offer) -> None:
    watch = os.pidfd_open(offer.pid)
    try:
        ready, _, _ = select.select([watch], [], [], 30)
        assert ready, "the child did not finish"
    finally:
        os.close(watch)


def forked_offer(path: Path) -> preparse.Offer:
    """What :func:`preparse.start` makes, but with the child forked from this process: what
    a test patched in the child's code (``pitrio._preparse_child``) holds in the child too."""
    memory = os.memfd_create("pitrio-preparse")
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # never returns
        preparse_child._child(str(path), memory, parent, preparse.BLOCK)
    offer = preparse.Offer(pid, memory)
    preparse._OFFERS.append(offer)
    return offer


@pytest.fixture(autouse=True)
def no_offer_left() -> object:
    yield
    preparse.discard()
    preparse.release()


@pytest.mark.parametrize(
    ("argv", "found"),
    [
        (["--mode", "rpc", "--session", "s.jsonl"], True),
        (["--session=./s.jsonl", "--mode=rpc"], True),
        (["--mode", "rpc", "--session", "s"], False),  # an id prefix, no session dir
        (["--mode", "json", "--session", "s.jsonl"], False),
        (["--session", "s.jsonl"], False),
        (["--mode", "rpc", "--session", "missing.jsonl"], False),
        (["--mode", "rpc", "--session", "fifo.jsonl"], False),  # its bytes are the parent's
        (["--mode", "rpc", "--", "--session", "s.jsonl"], False),
    ],
)
def test_the_command_lines_that_name_a_session_file(
    tmp_path: Path, argv: list[str], found: bool
) -> None:
    session_file(tmp_path / "s.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")
    named = preparse.named_session(argv, str(tmp_path), {"PITRIO_AGENT_DIR": str(tmp_path)})
    assert (named is not None) is found
    if found:
        assert named is not None and Path(named).samefile(tmp_path / "s.jsonl")


def test_continue_and_an_id_prefix_find_the_file_pitrio_opens(tmp_path: Path) -> None:
    """The launcher's guess for ``--continue`` and a session id prefix is the file the
    store's own resolution opens, in the session dir the environment or the flag names."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    env = {"PITRIO_AGENT_DIR": str(tmp_path / "agent")}
    folder = session_dir(str(cwd), env=env)
    folder.mkdir(parents=True)
    names = [
        "2026-12-01T10-00-00-000Z_aaaa1111.jsonl",
        "2026-12-02T10-00-00-000Z_bbbb2222.jsonl",
        "2026-12-03T10-00-00-000Z_aaaa3333.jsonl",
    ]
    for age, name in enumerate(names):
        session_id = name.partition("_")[2].removesuffix(".jsonl")
        header = HEADER.replace(b'"s-1"', f'"{session_id}"'.encode())
        session_file(folder / name, count=3, header=header)
        os.utime(folder / name, ns=(10**18 + age * 10**9, 10**18 + age * 10**9))
    os.utime(folder / names[1], ns=(2 * 10**18, 2 * 10**18))  # the newest now
    rpc = ["--mode", "rpc"]

    def guess(*argv: str, environ: dict[str, str] = env) -> Path | None:
        found = preparse.named_session([*rpc, *argv], str(cwd), environ)
        return None if found is None else Path(found)

    assert guess("--continue") == most_recent_session(folder) == folder / names[1]
    assert guess("-c") == folder / names[1]
    for prefix, name in (("aaaa1", names[0]), ("aaaa3", names[2])):
        expected = resolve_session_arg(prefix, cwd=str(cwd), directory=folder).path
        assert guess("--session", prefix) == expected == folder / name
    # An ambiguous prefix: the newest file of the two (pitrio orders by the sessions' own
    # modification stamps, which a file's time usually follows; a wrong guess costs a child).
    assert guess("--session", "aaaa") == folder / names[2]
    assert guess("--session=bbbb") == folder / names[1]
    assert guess("--session", "cccc") is None
    # --session-dir and $PITRIO_SESSION_DIR name the folder instead (relative: to the cwd).
    elsewhere = cwd / "here"
    elsewhere.mkdir()
    session_file(elsewhere / "2026-12-04T10-00-00-000Z_dddd4444.jsonl", count=3)
    assert guess("-c", "--session-dir", "here") == elsewhere / (
        "2026-12-04T10-00-00-000Z_dddd4444.jsonl"
    )
    assert guess("-c", environ={"PITRIO_SESSION_DIR": str(elsewhere)}) is not None
    assert guess("-c", environ={"PITRIO_AGENT_DIR": str(tmp_path / "none")}) is None
    assert preparse.named_session(["--continue"], str(cwd), env) is None  # not RPC mode


def test_the_file_continue_opens_takes_the_launchers_offer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    monkeypatch.setattr(preparse, "idle_core", lambda: True)
    folder = session_dir(str(cwd))
    folder.mkdir(parents=True)
    session_file(folder / "2026-12-06T00-00-00-000Z_s-1.jsonl")
    assert preparse.start_for(["--mode", "rpc", "--continue"])
    offer = preparse._OFFERS[-1]
    opened = most_recent_session(folder)  # the store's own choice
    assert opened is not None
    parsed = read_session(opened)
    assert parsed is not None and len(parsed.entries) == 50
    assert not preparse._OFFERS  # taken, not discarded
    # Taken whole from a child that finished, it is kept for a prefix request; caught up
    # with, it was killed and reaped.
    assert [offer] == preparse._KEPT or (reaped(offer) and not preparse._KEPT)
    preparse.release()
    assert reaped(offer)


def test_a_file_changed_after_the_child_read_it_is_read_again(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl")
    assert preparse.start(str(path), requests=False)  # it exits when done
    offer = preparse._OFFERS[-1]
    finished(offer)
    with path.open("ab") as file:
        file.write(message("late", "e49") + b"\n")
    parsed = read_session(path)
    assert parsed is not None and parsed.entries[-1].id == "late"
    assert len(parsed.entries) == 51 and reaped(offer)


def test_a_replaced_file_is_read_again(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl")
    assert preparse.start(str(path), requests=False)  # it exits when done
    offer = preparse._OFFERS[-1]
    finished(offer)
    session_file(tmp_path / "other.jsonl", count=3).replace(path)
    parsed = read_session(path)
    assert parsed is not None and len(parsed.entries) == 3 and reaped(offer)


def test_a_child_killed_before_it_began_leaves_the_in_process_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "s.jsonl")

    def killed(*args: object) -> bool:
        os.kill(os.getpid(), signal.SIGKILL)
        return False

    monkeypatch.setattr(preparse_child, "write_records", killed)  # in the child, once forked
    offer = forked_offer(path)
    finished(offer)
    parsed = read_session(path)
    assert parsed is not None and len(parsed.entries) == 50
    assert offer.covered == 0 and reaped(offer)


def test_a_child_caught_up_with_is_killed_and_the_rest_read_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The child stops itself (as if starved of CPU) after handing over three blocks: the
    # reader takes those, does not wait, kills and reaps it and reads the rest itself.
    path = session_file(tmp_path / "s.jsonl", count=400)
    with path.open("ab") as file:
        file.write(b"garbage\n" + message("last", "e399"))  # no newline at the end
    records = 0
    write = preparse_child._record

    def stopping(memory: int, at: int, data: bytes) -> int:
        nonlocal records
        records += 1
        if records == 4:
            os.kill(os.getpid(), signal.SIGSTOP)
        return write(memory, at, data)

    monkeypatch.setattr(preparse, "BLOCK", 4096)
    monkeypatch.setattr(preparse_child, "_record", stopping)
    offer = forked_offer(path)
    os.waitpid(offer.pid, os.WUNTRACED)  # stopped
    parsed = read_session(path)
    assert 0 < offer.covered < path.stat().st_size
    assert offer.covered == 3 * 4096 - len(path.read_bytes()[: 3 * 4096].rsplit(b"\n", 1)[1])
    assert reaped(offer)
    assert parsed is not None
    in_process = read_session(path)
    assert in_process is not None
    assert [(e.id, e.parent_id, e.raw, e.line) for e in parsed.entries] == [
        (e.id, e.parent_id, e.raw, e.line) for e in in_process.entries
    ]
    assert parsed.problems == in_process.problems and len(parsed.entries) == 401
    assert parsed.mark == in_process.mark and not parsed.ends_clean


def test_the_file_is_closed_before_the_records_are_said_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A taker that sees the header say "finished" must see a child holding only its memory
    # file and pipes (a test of the launcher's child counts them): the session file is
    # closed before that header is written, and on a failed read too.
    path = session_file(tmp_path / "s.jsonl", count=50)
    headers: list[tuple[bool, bool]] = []  # (finished, the file still open) at each header
    write = preparse_child.write_all
    source = -1

    def watching(memory: int, data: bytes, at: int) -> int:
        if at == 0:
            try:
                os.fstat(source)
                still_open = True
            except OSError:
                still_open = False
            headers.append((preparse.HEADER.unpack(data)[-1] == 1, still_open))
        return write(memory, data, at)

    monkeypatch.setattr(preparse, "BLOCK", 4096)
    monkeypatch.setattr(preparse_child, "write_all", watching)
    memory = os.memfd_create("pitrio-preparse-test")
    try:
        source = os.open(path, os.O_RDONLY)
        assert preparse_child.write_records(source, memory, block_size=4096)
        assert headers[-1] == (True, False) and all(open_ for _, open_ in headers[:-1])
        assert len(headers) > 2  # blocks said unfinished while the file was read
        source = os.open(tmp_path, os.O_RDONLY)  # not a regular file: refused, and closed
        assert not preparse_child.write_records(source, memory)
        with pytest.raises(OSError):
            os.fstat(source)
    finally:
        os.close(memory)


def test_a_record_that_does_not_fit_its_block_leaves_the_in_process_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A record with one check fewer than its block has lines: nothing of the offer is
    # taken (a line would be built from another's check), the file is read in-process.
    path = session_file(tmp_path / "s.jsonl")
    write = preparse_child._record

    def short(memory: int, at: int, data: bytes) -> int:
        record = marshal.loads(data)
        if isinstance(record, tuple):
            size, ids, parents, roles, bounds, starts = record
            record = (size, ids[:-1], parents[:-1], roles[:-1], bounds, starts)
        return write(memory, at, marshal.dumps(record))

    monkeypatch.setattr(preparse_child, "_record", short)
    offer = forked_offer(path)
    finished(offer)
    parsed = read_session(path)
    monkeypatch.undo()
    in_process = read_session(path)
    assert parsed is not None and in_process is not None and not preparse._OFFERS
    assert [(e.id, e.parent_id, e.raw, e.line) for e in parsed.entries] == [
        (e.id, e.parent_id, e.raw, e.line) for e in in_process.entries
    ]
    assert len(parsed.entries) == 50 and reaped(offer)


def test_a_stopped_child_is_not_waited_for(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl")
    assert preparse.start(str(path))
    offer = preparse._OFFERS[-1]
    os.kill(offer.pid, signal.SIGSTOP)  # may have finished, or not begun: either way
    parsed = read_session(path)
    assert parsed is not None and len(parsed.entries) == 50 and not preparse._OFFERS
    # Finished: kept (stopped) for a request, until released; else killed and reaped.
    assert [offer] == preparse._KEPT or (reaped(offer) and not preparse._KEPT)
    preparse.release()
    assert reaped(offer)


def test_an_offer_not_taken_is_discarded_without_a_zombie(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl")
    assert preparse.start(str(path))
    offer = preparse._OFFERS[-1]
    os.kill(offer.pid, signal.SIGSTOP)  # still running when discarded
    preparse.discard()
    assert reaped(offer) and not preparse._OFFERS
    assert preparse.take(os.stat(path)) is None  # nothing pending: read in-process


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_no_spawn_or_memory_file_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "s.jsonl")
    before = open_descriptors()

    def refused(*args: object, **options: object) -> int:
        raise OSError("no more processes")

    with monkeypatch.context() as patched:
        patched.setattr(os, "posix_spawn", refused)
        assert not preparse.start(str(path))
    assert open_descriptors() == before  # the memory file was closed
    with monkeypatch.context() as patched:
        patched.setattr(sys, "frozen", True, raising=False)  # its executable runs the app
        assert not preparse.start(str(path))
    monkeypatch.setattr(sys, "executable", "")  # an embedding without an interpreter to run
    assert not preparse.start(str(path))
    monkeypatch.delattr(os, "memfd_create")
    assert not preparse.start(str(path))
    assert not preparse._OFFERS


def test_the_child_is_a_new_interpreter_holding_none_of_the_parents_streams(
    tmp_path: Path,
) -> None:
    # Spawned, not forked (it shares no page with this process, whose writes would copy
    # them): its standard streams are /dev/null from its start, and the memory file it
    # writes was inheritable for its spawn alone.
    path = session_file(tmp_path / "s.jsonl", count=100_000)
    script = textwrap.dedent(
        f"""
        import os, sys
        from pitrio import _preparse as preparse
        preparse.BLOCK = 1  # a parse of many seconds
        assert preparse.start({str(path)!r})
        offer = preparse._OFFERS[-1]
        kept = (offer.memory, offer.requests, offer.answers)
        print(offer.pid, any(map(os.get_inheritable, kept)), flush=True)
        sys.stdin.read()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        pid, inheritable = parent.stdout.readline().split()
        assert inheritable == b"False"
        streams = [os.readlink(f"/proc/{int(pid)}/fd/{fd}") for fd in (0, 1, 2)]
        assert streams == [os.devnull] * 3
    finally:
        parent.kill()
        parent.wait()


def test_the_child_ends_with_its_parent(tmp_path: Path) -> None:
    # A parent killed while its child parses a long file: the child notices between blocks
    # and exits (reaped by init), rather than parsing on as an orphan.
    path = session_file(tmp_path / "s.jsonl", count=100_000)
    script = textwrap.dedent(
        f"""
        import os, sys
        from pitrio import _preparse as preparse
        preparse.BLOCK = 1  # a parse of many seconds
        assert preparse.start({str(path)!r})
        print(preparse._OFFERS[-1].pid, flush=True)
        sys.stdin.read()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    watch = os.pidfd_open(child)
    try:
        assert select.select([watch], [], [], 0)[0] == []  # still parsing
        parent.kill()
        parent.wait()
        # Parsing the whole file a byte a read takes the child tens of seconds.
        ready, _, _ = select.select([watch], [], [], 5)
        assert ready, "the child outlived its parent"
    finally:
        os.close(watch)


def test_a_child_not_yet_exited_when_stopped_is_reaped_by_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A killed process exits only once the scheduler runs it (long on a loaded machine): the
    # reader does not wait for that; a daemon thread does.
    path = session_file(tmp_path / "s.jsonl")
    real = os.waitpid
    looks: list[tuple[str, int]] = []

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        looks.append((threading.current_thread().name, options))
        return (0, 0) if options == os.WNOHANG else real(pid, options)

    assert preparse.start(str(path), requests=False)  # else, finished, it may be kept
    offer = preparse._OFFERS[-1]
    os.kill(offer.pid, signal.SIGSTOP)
    monkeypatch.setattr(os, "waitpid", waitpid)
    parsed = read_session(path)
    assert parsed is not None and len(parsed.entries) == 50
    assert offer.reaper is not None
    offer.reaper.join(30)
    assert looks == [("MainThread", os.WNOHANG), ("pitrio-preparse-reaper", 0)]
    monkeypatch.undo()
    assert reaped(offer)


def test_no_child_when_a_standard_stream_is_closed(tmp_path: Path) -> None:
    # The memory file would take the closed stream's number: RPC mode must find it closed.
    path = session_file(tmp_path / "s.jsonl")
    script = textwrap.dedent(
        f"""
        import os, sys
        from pitrio import _preparse as preparse
        os.close(0)
        print(preparse.start({str(path)!r}), os.path.exists("/proc/self/fd/0"), flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(("idle", "started"), [(True, True), (False, False)])
def test_a_child_only_where_a_core_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idle: bool, started: bool
) -> None:
    session_file(tmp_path / "s.jsonl")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preparse, "idle_core", lambda: idle)
    assert preparse.start_for(["--mode", "rpc", "--session", "s.jsonl"]) is started
    assert len(preparse._OFFERS) == started


def test_a_free_core_is_read_from_the_runnable_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    def loadavg(running: int) -> None:
        text = f"5.00 4.00 3.00 {running}/300 12345\n".encode()
        monkeypatch.setattr(preparse, "open", lambda *args: io.BytesIO(text), raising=False)

    monkeypatch.setattr(preparse, "quota_cores", lambda: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    loadavg(2)
    assert preparse.idle_core()
    loadavg(3)
    assert not preparse.idle_core()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    loadavg(1)
    assert not preparse.idle_core()  # one core: the child could only take the parent's


def test_a_control_groups_cpu_quota_counts_as_its_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores in the affinity mask but a quota of one core's time: no core is free."""
    text = b"0.00 0.00 0.00 1/300 12345\n"
    monkeypatch.setattr(preparse, "open", lambda *args: io.BytesIO(text), raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(preparse, "quota_cores", lambda: 1.5)
    assert not preparse.idle_core()
    monkeypatch.setattr(preparse, "quota_cores", lambda: 2.0)
    assert preparse.idle_core()


def _groups(tmp_path: Path, membership: str, files: dict[str, str]) -> tuple[str, str]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    listing = tmp_path / "membership"
    listing.write_text(membership)
    return str(root), str(listing)


def test_the_quota_is_read_from_cgroup_v2_the_tightest_of_the_ancestors(tmp_path: Path) -> None:
    root, listing = _groups(
        tmp_path,
        "0::/box/inner\n",
        {
            "cpu.max": "max 100000\n",
            "box/cpu.max": "150000 100000\n",
            "box/inner/cpu.max": "max 100000\n",
        },
    )
    assert preparse.quota_cores(root, listing) == 1.5


def test_the_quota_is_read_from_cgroup_v1s_cpu_controller(tmp_path: Path) -> None:
    root, listing = _groups(
        tmp_path,
        "4:memory:/elsewhere\n2:cpu,cpuacct:/box\n",
        {
            "cpu,cpuacct/box/cpu.cfs_quota_us": "50000\n",
            "cpu,cpuacct/box/cpu.cfs_period_us": "100000\n",
            "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    assert preparse.quota_cores(root, listing) == 0.5


def test_no_quota_where_none_is_set_or_nothing_can_be_read(tmp_path: Path) -> None:
    root, listing = _groups(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert preparse.quota_cores(root, listing) is None
    assert preparse.quota_cores(root, str(tmp_path / "missing")) is None
    garbled_root, garbled = _groups(tmp_path / "g", "0::/\n", {"cpu.max": "lots\n"})
    assert preparse.quota_cores(garbled_root, garbled) is None
