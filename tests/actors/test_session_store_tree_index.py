"""A tree indexed by its reader (the parser's ``TreeIndex``: the entries by id, whether they
are one chain, the labels and session infos) is the tree that indexes its entries itself
(pitrio/actors/session_store/tree.py, file_format.py; issue 38). Every file the fuzz suite
mutates, read line by line and in blocks, plus files with labels, a session name, a branch,
a version 2 file and lines the fallback parser reads."""

from __future__ import annotations

import io
import random
from typing import Any

import orjson
import pytest

from pitrio.actors.session_store.file_format import (
    ParsedSession,
    parse_lines,
    parse_session_bytes,
)
from pitrio.actors.session_store.tree import SessionTree
from tests.actors.test_session_store_fuzz import MUTATIONS, base_lines, join

HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/p"}


def line(kind: str, entry_id: str, parent: str | None, **fields: Any) -> bytes:
    value: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": parent}
    value["timestamp"] = "2026-01-01T00:00:01.000Z"
    value.update(fields)
    return orjson.dumps(value)


def message(entry_id: str, parent: str | None, text: str = "hi") -> bytes:
    return line(
        "message",
        entry_id,
        parent,
        message={"role": "user", "content": text, "timestamp": 1},
    )


def trees(parsed: ParsedSession) -> tuple[Any, Any]:
    """The tree as the store opens it (the parser's index) and as it indexes itself."""
    assert parsed.header is not None and parsed.index is not None
    given = SessionTree(parsed.header, parsed.entries, index=parsed.index)
    made = SessionTree(parsed.header, parsed.entries)
    return described(given), described(made)


def described(tree: SessionTree) -> Any:
    return (
        {entry_id: id(stored) for entry_id, stored in tree._by_id.items()},
        tree._chain,
        tree._labels,
        tree._name,
        tree.leaf_id,
        [id(stored) for stored in tree.path()],
    )


def readings(data: bytes) -> list[ParsedSession]:
    """The file read line by line, in one block and in blocks of 7 bytes."""
    blocks = [data[i : i + 7] for i in range(0, len(data), 7)]
    return [
        parse_session_bytes(data, origin="f"),
        parse_lines(io.BytesIO(data), origin="f"),
        parse_lines(iter(blocks), origin="f"),
    ]


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_parsers_index_is_the_trees_own_for_mutated_files(mutation: str) -> None:
    for seed in range(4):
        rng = random.Random(f"{mutation}/{seed}")
        for parsed in readings(MUTATIONS[mutation](rng, base_lines(rng))):
            if parsed.header is None:
                continue
            given, made = trees(parsed)
            assert given == made, (mutation, seed)


def test_labels_names_branches_and_odd_parents_index_the_same() -> None:
    lines = [
        orjson.dumps(HEADER),
        message("a", None),
        message("b", "a"),
        line("label", "l1", "b", targetId="a", label="start"),
        line("session_info", "i1", "l1", name="first"),
        message("c", "a"),  # a branch: the chain ends here
        line("label", "l2", "c", targetId="a", label=""),  # cleared
        line("session_info", "i2", "l2", name=" second "),
        message("d", ""),  # an empty parentId
        message("e", "e"),  # its own parent
        message("f", "later"),
        message("later", "f"),
        message("s", "f", text="SURROGATE").replace(b"SURROGATE", b"\\ud800"),
    ]
    for parsed in readings(join(lines)):
        given, made = trees(parsed)
        assert given == made
        assert not given[1] and given[3] == "second"


@pytest.mark.parametrize("count", [0, 1, 2, 500])
def test_a_chain_is_noted_as_one(count: int) -> None:
    # Messages each the child of the one before, a model change among them (not the
    # parser's quick path): one chain, whose path is its entries.
    lines = [orjson.dumps(HEADER), message("n0", None)]
    lines.append(line("model_change", "m", "n0", provider="p", modelId="x"))
    lines += [message(f"n{n}", "m" if n == 1 else f"n{n - 1}") for n in range(1, count + 1)]
    for parsed in readings(join(lines)):
        given, made = trees(parsed)
        assert given == made and given[1] is True


def test_a_version_2_file_indexes_its_migrated_entries() -> None:
    header = dict(HEADER, version=2)
    lines = [orjson.dumps(header), message("a", None), message("b", "a")]
    for parsed in readings(join(lines)):
        assert parsed.migrated or parsed.version == 2
        given, made = trees(parsed)
        assert given == made
