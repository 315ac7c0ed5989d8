"""The bash output accumulator: totals, rolling tail, when the full output must be saved."""

from __future__ import annotations

from pitrio.actors.tool_executor.tools.output import OutputAccumulator


def test_small_output_is_held_not_spilled() -> None:
    acc = OutputAccumulator()
    acc.append(b"hello\n")
    acc.append(b"world")
    acc.finish()
    snap = acc.snapshot()
    assert snap.content == "hello\nworld"
    assert not snap.truncation.truncated
    assert acc.take_spill() == []
    assert (acc.total_lines, acc.total_bytes, acc.last_line_bytes) == (2, 11, 5)


def test_split_multibyte_character_across_chunks() -> None:
    acc = OutputAccumulator()
    data = "é€".encode()
    for byte in data:
        acc.append(bytes([byte]))
    acc.finish()
    assert acc.snapshot().content == "é€"


def test_cut_character_at_the_end_becomes_replacement() -> None:
    acc = OutputAccumulator()
    acc.append("x€".encode()[:-1])
    acc.finish()
    assert acc.snapshot().content == "x\ufffd"


def test_spill_starts_past_the_limit_and_hands_out_all_raw_bytes() -> None:
    acc = OutputAccumulator(max_lines=10, max_bytes=100)
    acc.append(b"a\n" * 5)
    assert not acc.spilling and acc.take_spill() == []
    acc.append(b"b\n" * 10)
    assert acc.spilling
    assert b"".join(acc.take_spill()) == b"a\n" * 5 + b"b\n" * 10
    acc.append(b"c\n")
    assert acc.take_spill() == [b"c\n"]


def test_snapshot_reports_whole_output_totals() -> None:
    acc = OutputAccumulator(max_lines=3, max_bytes=1000)
    acc.append(b"1\n2\n3\n4\n5")
    snap = acc.snapshot()
    assert snap.content == "3\n4\n5"
    t = snap.truncation
    assert (t.truncated, t.truncated_by, t.total_lines, t.output_lines) == (True, "lines", 5, 3)


def test_rolling_tail_stays_bounded_and_starts_on_a_line() -> None:
    acc = OutputAccumulator(max_lines=1000, max_bytes=100)
    for index in range(200):
        acc.append(f"line-{index:04d}\n".encode())
    snap = acc.snapshot()
    assert acc.total_lines == 201
    assert snap.content.endswith("line-0199\n")
    first = snap.content.split("\n")[0]
    assert first.startswith("line-")  # no partial first line after trimming
    assert len(acc._tail.encode()) <= 400
