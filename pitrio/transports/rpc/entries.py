"""``get_entries`` and ``get_tree`` data (pi 1.6.0, rpc-commands.md), encoded from the kept lines.

The session store holds every entry's JSON as it was read or written, so both responses are
spliced together from those bytes: an entry comes out exactly as the file has it (unknown
fields and their order included) and nothing is decoded. A tree is written without recursion:
a session can be a chain tens of thousands of entries deep, deeper than any JSON encoder
nests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson

from pitrio.errors import PitrioError
from pitrio.transports.rpc.protocol import EncodedData

if TYPE_CHECKING:  # only named: sdk.store's catalog, export and repair are not a start's
    from pitrio.sdk.store import TreeNode


class EntryNotFound(PitrioError):
    """``get_entries`` named a ``since`` entry the session does not have."""


def _leaf(leaf_id: str | None) -> bytes:
    return b"null" if leaf_id is None else orjson.dumps(leaf_id)


def entries_data(
    lines: Sequence[tuple[str, bytes]], leaf_id: str | None, since: str | None
) -> EncodedData:
    """``{entries, leafId}``: the entries after ``since`` (every entry without it), in append
    order; raises :class:`EntryNotFound` (pi's text) for an unknown ``since``."""
    start = 0
    if since is not None:
        index = next((i for i, (entry_id, _) in enumerate(lines) if entry_id == since), -1)
        if index < 0:
            raise EntryNotFound(f"Entry not found: {since}")
        start = index + 1
    body = b",".join(raw for _, raw in lines[start:])
    return EncodedData((b'{"entries":[', body, b'],"leafId":', _leaf(leaf_id), b"}"))


def _node_tail(node: TreeNode) -> bytes:
    """What follows a node's children: its label, if any, and the closing brace."""
    tail = b"]"
    if node.label is not None:
        tail += b',"label":' + orjson.dumps(node.label)
    if node.label_timestamp is not None:
        tail += b',"labelTimestamp":' + orjson.dumps(node.label_timestamp)
    return tail + b"}"


def _push_nodes(stack: list[TreeNode | bytes], nodes: Sequence[TreeNode]) -> None:
    """Push ``nodes`` so they pop in order, separated by commas."""
    for position in range(len(nodes) - 1, -1, -1):
        stack.append(nodes[position])
        if position:
            stack.append(b",")


def tree_data(roots: Sequence[TreeNode], leaf_id: str | None) -> EncodedData:
    """``{tree: [{entry, children, label?, labelTimestamp?}], leafId}`` in pi's key order."""
    pieces: list[bytes] = [b'{"tree":[']
    stack: list[TreeNode | bytes] = [b'],"leafId":' + _leaf(leaf_id) + b"}"]
    _push_nodes(stack, roots)
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):
            pieces.append(item)
            continue
        pieces.append(b'{"entry":')
        pieces.append(item.entry.raw)
        pieces.append(b',"children":[')
        stack.append(_node_tail(item))
        _push_nodes(stack, item.children)
    return EncodedData((b"".join(pieces),))
