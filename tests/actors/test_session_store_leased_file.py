"""A file store's file and lease (pitrio/actors/session_store/leased_file.py) on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitrio.actors.session_store.commands import new_header
from pitrio.actors.session_store.lease import lock_path, read_lease
from pitrio.actors.session_store.leased_file import LeasedFile
from pitrio.actors.session_store.tree import random_entry_id
from pitrio.messages.codec import encode

HEADER = encode(new_header("/p")) + b"\n"


@pytest.mark.parametrize("inline", [False, True])
async def test_created_written_and_closed(tmp_path: Path, inline: bool) -> None:
    path = tmp_path / "s.jsonl"
    disk = LeasedFile(path, take_over=False, inline=inline)
    assert disk.file is None and disk.fence is None and not path.exists()
    await disk.create(HEADER)  # lazy creation's moment: the lease is taken first
    record = read_lease(path)
    assert disk.fence == 1 and record is not None and not record.released
    await disk.write([b'{"a":1}', b'{"b":2}'], sync=True)
    await disk.write([b'{"c":3}'], sync=False)
    assert path.read_bytes() == HEADER + b'{"a":1}\n{"b":2}\n{"c":3}\n'
    assert disk.file is not None and (disk.file.writes, disk.file.syncs) == (2, 1)
    disk.close()
    disk.close()  # idempotent: a clean stop leaves nothing to do
    assert not lock_path(path).exists()  # released cleanly


async def test_a_torn_last_line_is_never_written_into(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b'{"type":"mess')
    disk = LeasedFile(path, take_over=False, inline=False)
    opened = await disk.open(cwd="", read_only=False, strict=False, new_id=random_entry_id)
    assert disk.file is opened.file and disk.lease is opened.lease and disk.needs_newline
    await disk.write([b'{"a":1}'], sync=False)
    await disk.write([b'{"b":2}'], sync=False)
    assert path.read_bytes() == HEADER + b'{"type":"mess\n{"a":1}\n{"b":2}\n'
    assert not disk.needs_newline
    await disk.stop()
    assert not lock_path(path).exists()


async def test_a_store_in_memory_has_nothing_to_sync_or_close() -> None:
    disk = LeasedFile(None, take_over=False, inline=False)
    await disk.sync()
    await disk.stop()
    disk.close()
    assert disk.file is None and disk.fence is None
