"""RPC framing: LF-only records, CR stripping, split UTF-8, final record, oversize."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pitrio.transports.rpc.framing import Oversize, RecordSplitter


def split_all(chunks: list[bytes], max_record: int = 1 << 20) -> list[object]:
    splitter = RecordSplitter(max_record)
    out: list[object] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    out.extend(splitter.finish())
    return out


def test_lf_only_and_one_cr_stripped() -> None:
    assert split_all([b'{"a":1}\n{"b":2}\r\n\n']) == ['{"a":1}', '{"b":2}', ""]
    assert split_all([b"x\r\r\n"]) == ["x\r"]


def test_unicode_line_separators_are_not_breaks() -> None:
    text = '{"s":"a\u2028b\u2029c"}'
    assert split_all([text.encode() + b"\n"]) == [text]


def test_split_utf8_character_across_reads() -> None:
    data = '{"s":"héllo €"}\n'.encode()
    cut = data.index("€".encode()) + 1
    assert split_all([data[:cut], data[cut:]]) == ['{"s":"héllo €"}']


def test_last_record_without_lf_is_returned_at_end() -> None:
    assert split_all([b'{"a":1}\n{"b"', b":2}"]) == ['{"a":1}', '{"b":2}']
    assert split_all([b""]) == []


def test_oversize_record_is_reported_and_skipped() -> None:
    records = split_all([b"a" * 10, b"b" * 10, b"\nok\n"], max_record=15)
    assert records == [Oversize(20, 15), "ok"]


def test_a_ten_megabyte_line() -> None:
    big = b'{"s":"' + b"x" * (10 * 1024 * 1024) + b'"}\n'
    chunks = [big[i : i + 65536] for i in range(0, len(big), 65536)]
    records = split_all(chunks, max_record=64 * 1024 * 1024)
    assert len(records) == 1 and len(records[0]) == len(big) - 1  # type: ignore[arg-type]


@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)),
            max_size=20,
        ),
        max_size=8,
    ),
    st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=5),
)
def test_any_chunking_gives_the_same_records(lines: list[str], sizes: list[int]) -> None:
    data = "".join(line + "\n" for line in lines).encode()
    chunks: list[bytes] = []
    position = 0
    index = 0
    while position < len(data):
        size = sizes[index % len(sizes)]
        chunks.append(data[position : position + size])
        position += size
        index += 1
    assert split_all(chunks) == lines
