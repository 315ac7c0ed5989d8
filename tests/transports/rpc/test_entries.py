"""``get_entries`` / ``get_tree`` data spliced from kept entry lines (pi 1.6.0's shapes)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.tree import TreeNode
from pitrio.transports.rpc.entries import EntryNotFound, entries_data, tree_data
from pitrio.transports.rpc.protocol import EncodedData


def decoded(data: EncodedData) -> Any:
    return orjson.loads(b"".join(data.pieces))


def stored(entry_id: str, parent: str | None, **extra: Any) -> StoredEntry:
    # Unknown fields and their order come through: the bytes are the file's.
    value = {"type": "custom", "id": entry_id, "parentId": parent, "timestamp": "t", **extra}
    return StoredEntry(
        type="custom",
        id=entry_id,
        parent_id=parent,
        timestamp="2026-01-01T00:00:00.000Z",
        raw=orjson.dumps(value),
    )


def test_entries_in_append_order_and_since() -> None:
    lines = [(e.id, e.raw) for e in (stored("a", None), stored("b", "a", zz=1, aa=2))]
    whole = decoded(entries_data(lines, "b", None))
    assert list(whole) == ["entries", "leafId"]
    assert [e["id"] for e in whole["entries"]] == ["a", "b"]
    assert list(whole["entries"][1])[-2:] == ["zz", "aa"]  # the line's own key order
    assert decoded(entries_data(lines, "b", "a"))["entries"] == whole["entries"][1:]
    assert decoded(entries_data(lines, "b", "b")) == {"entries": [], "leafId": "b"}
    assert decoded(entries_data([], None, None)) == {"entries": [], "leafId": None}
    with pytest.raises(EntryNotFound, match=r"^Entry not found: c$"):
        entries_data(lines, "b", "c")


def test_tree_with_branches_and_labels_in_pi_key_order() -> None:
    root, left, right = stored("r", None), stored("l", "r"), stored("x", "r")
    labelled = TreeNode(right, label="keep", label_timestamp="2026-01-02T00:00:00.000Z")
    tree = decoded(tree_data([TreeNode(root, [TreeNode(left), labelled])], "x"))
    assert list(tree) == ["tree", "leafId"] and tree["leafId"] == "x"
    [node] = tree["tree"]
    assert list(node) == ["entry", "children"] and node["entry"]["id"] == "r"
    first, second = node["children"]
    assert first == {"entry": orjson.loads(left.raw), "children": []}
    assert list(second) == ["entry", "children", "label", "labelTimestamp"]
    assert second["label"] == "keep"
    assert decoded(tree_data([], None)) == {"tree": [], "leafId": None}


def test_a_deep_chain_is_written_without_recursion() -> None:
    depth = 5_000  # far deeper than a JSON encoder nests (orjson stops at 255)
    node = TreeNode(stored(f"e{depth}", f"e{depth - 1}"))
    for index in range(depth - 1, 0, -1):
        node = TreeNode(stored(f"e{index}", f"e{index - 1}" if index > 1 else None), [node])
    raw = b"".join(tree_data([node], f"e{depth}").pieces)
    assert raw.count(b'"entry":') == depth
    assert raw.startswith(b'{"tree":[{"entry":{"type":"custom","id":"e1"')
    assert raw.endswith(b"]}]}" * 1 + b'],"leafId":"e5000"}') or raw.endswith(b'"leafId":"e5000"}')
