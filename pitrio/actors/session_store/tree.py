"""The entry tree of one session: ids, parents, children, leaf, labels, name (spec §4.7, §4.8).

Pure: no I/O and no trio. Entries are :class:`~pitrio.actors.session_store.stored.StoredEntry`
objects, kept in file order. Rules carried over from pi:

* the leaf after loading is the *last entry in file order*, not the deepest node;
* ``children(id)`` lists children in file order; :meth:`SessionTree.tree` sorts each node's
  children by timestamp and puts the labels on the nodes;
* roots are entries whose ``parentId`` is null, their own id, or a missing entry (orphans);
* labels and the session name are resolved over *all* entries in file order, whatever the
  branch: the latest ``label`` entry for a target wins (an empty label clears it), and the
  latest ``session_info`` names the session (an empty name clears it).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterable, Iterator

import attrs

from pitrio.actors.session_store.stored import StoredEntry, iso_to_ms
from pitrio.errors import EntryNotFoundError
from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.entries import LabelEntry, MessageEntry, SessionHeader, SessionInfoEntry

IdFactory = Callable[[Callable[[str], bool]], str]
"""Makes a fresh entry id given a predicate telling whether an id is already taken."""


def random_entry_id(taken: Callable[[str], bool]) -> str:
    """pi's scheme: 8 hex digits, drawn again on collision (100 tries), then a full UUID."""
    for _ in range(100):
        candidate = secrets.token_hex(4)
        if not taken(candidate):
            return candidate
    return str(uuid.uuid4())


@attrs.frozen
class TreeIndex:
    """What a :class:`SessionTree` indexes of its entries, made by their reader while it had
    each at hand (:class:`~.file_format.SessionParser`): the entries by id, whether they are
    one chain in file order (each the child of the one before, ids unique), and the label and
    session info entries in file order. It must be what the tree's own pass finds; the tree
    takes ``by_id`` over (issue 38: that pass over a resumed long file was ~5 ms)."""

    by_id: dict[str, StoredEntry]
    chain: bool
    noted: list[StoredEntry]


@attrs.define
class TreeNode:
    """A node of :meth:`SessionTree.tree`: the entry, its children, its label if any."""

    entry: StoredEntry
    children: list[TreeNode] = attrs.field(factory=list)
    label: str | None = None
    label_timestamp: str | None = None


@attrs.frozen
class ForkMessage:
    """A user message one can fork from (pi's ``getUserMessagesForForking``)."""

    entry_id: str
    text: str


class SessionTree:
    """Entries by id and in file order, the leaf, labels and the session name."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_by_id", "_chain", "_children", "_entries", "_labels", "_name",
        "_new_id", "header", "leaf_id",
    )
    # fmt: on

    def __init__(
        self,
        header: SessionHeader,
        entries: Iterable[StoredEntry] = (),
        *,
        new_id: IdFactory = random_entry_id,
        index: TreeIndex | None = None,
    ) -> None:
        """``index``: :attr:`entries`' index as their reader made it (taken over, not copied:
        the reader keeps no use of it); else the tree makes it."""
        self.header = header
        self._new_id = new_id
        self._entries: list[StoredEntry] = []
        self._by_id: dict[str, StoredEntry] = {}
        self._children: dict[str, list[StoredEntry]] | None = None  # built on first use
        self._labels: dict[str, tuple[str, str]] = {}  # target id -> (label, label timestamp)
        self._name: str | None = None
        self.leaf_id: str | None = None
        # What add() does for each, in one pass: a long session is thousands of entries, and
        # only labels and session infos need more than the two indexes.
        listed = self._entries
        listed.extend(entries)
        if index is not None:
            self._by_id = by_id = index.by_id
            for stored in index.noted:
                self._note(stored)
            chain = index.chain
        else:
            by_id = self._by_id
            chain = True
            previous = None
            for stored in listed:
                by_id[stored.id] = stored
                kind = stored.type
                if kind == "label" or kind == "session_info":
                    self._note(stored)
                if stored.parent_id != previous:
                    chain = False
                previous = stored.id
        # One chain in file order (each entry the child of the one before, ids unique): the
        # usual file, whose path to its last entry is then every entry, without the walk up
        # (~9 ms of a 48,000-entry resume; issue 38). The entries only grow: add() keeps it
        # for an append on the last entry with a new id and drops it for good otherwise;
        # path() asks it only about the last entry.
        self._chain = chain and len(by_id) == len(listed)
        if listed:
            self.leaf_id = listed[-1].id

    # -- reading -----------------------------------------------------------------------------

    @property
    def new_id(self) -> IdFactory:
        """How this tree makes entry ids (a tree rebuilt from it makes them the same way)."""
        return self._new_id

    @property
    def entries(self) -> list[StoredEntry]:
        """Every entry in file order (do not modify)."""
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._by_id

    def get(self, entry_id: str) -> StoredEntry | None:
        """The entry with that id, if any."""
        return self._by_id.get(entry_id)

    def require(self, entry_id: str) -> StoredEntry:
        """The entry with that id; raises ``Entry <id> not found``."""
        stored = self._by_id.get(entry_id)
        if stored is None:
            raise EntryNotFoundError(f"Entry {entry_id} not found")
        return stored

    @property
    def leaf(self) -> StoredEntry | None:
        """The entry at the leaf, or ``None`` when the leaf is reset (or there are none)."""
        return None if self.leaf_id is None else self._by_id.get(self.leaf_id)

    def ancestors(self, entry_id: str | None) -> Iterator[StoredEntry]:
        """The entry and its ancestors, leaf first; stops at a root or a missing parent."""
        return iter(self._walk_up(entry_id))

    def _walk_up(self, entry_id: str | None) -> list[StoredEntry]:
        # A plain loop into a list, not a generator: a long session's path is thousands of
        # steps, and path() runs on every open and every branch switch.
        by_id = self._by_id
        stored = None if entry_id is None else by_id.get(entry_id)
        out: list[StoredEntry] = []
        append = out.append
        limit = len(self._entries)
        while stored is not None and len(out) <= limit:  # the limit guards against a cycle
            append(stored)
            parent = stored.parent_id
            if parent is None or parent == stored.id:
                break
            stored = by_id.get(parent)
        return out

    def path(self, to_id: str | None = None) -> list[StoredEntry]:
        """Entries root -> ``to_id`` (default: the leaf); empty for an unknown id or no leaf."""
        target = self.leaf_id if to_id is None else to_id
        entries = self._entries
        if self._chain and entries and target == entries[-1].id:
            return list(entries)
        out = self._walk_up(target)
        out.reverse()
        return out

    def children(self, entry_id: str) -> list[StoredEntry]:
        """The entries whose parent is ``entry_id``, in file order."""
        return list(self._child_index().get(entry_id, ()))

    def roots(self) -> list[StoredEntry]:
        """Entries with no parent, themselves as parent, or a missing parent; file order."""
        by_id = self._by_id
        return [
            stored
            for stored in self._entries
            if stored.parent_id is None
            or stored.parent_id == stored.id
            or stored.parent_id not in by_id
        ]

    def label(self, entry_id: str) -> str | None:
        """The label of an entry, if set."""
        found = self._labels.get(entry_id)
        return None if found is None else found[0]

    def label_timestamp(self, entry_id: str) -> str | None:
        """The timestamp of the ``label`` entry that set the entry's label, if set."""
        found = self._labels.get(entry_id)
        return None if found is None else found[1]

    @property
    def labels(self) -> dict[str, str]:
        """Every resolved label, by target id (a copy)."""
        return {target: label for target, (label, _) in self._labels.items()}

    @property
    def session_name(self) -> str | None:
        """The session's name: the latest ``session_info`` in file order, if not empty."""
        return self._name

    def tree(self) -> list[TreeNode]:
        """pi's ``getTree``: roots, children sorted by timestamp, labels on the nodes.

        Built without recursion: sessions can hold chains tens of thousands deep.
        """
        nodes: dict[str, TreeNode] = {}
        for stored in self._entries:
            found = self._labels.get(stored.id)
            node = TreeNode(stored)
            if found is not None:
                node.label, node.label_timestamp = found
            nodes[stored.id] = node
        roots: list[TreeNode] = []
        for stored in self._entries:
            parent = stored.parent_id
            node = nodes[stored.id]
            if parent is None or parent == stored.id or parent not in nodes:
                roots.append(node)
            else:
                nodes[parent].children.append(node)
        for node in nodes.values():
            if len(node.children) > 1:
                node.children.sort(key=lambda child: iso_to_ms(child.entry.timestamp))
        return roots

    def user_messages_for_forking(self) -> list[ForkMessage]:
        """Every user ``message`` entry in file order (all branches) with non-empty text."""
        out: list[ForkMessage] = []
        for stored in self._entries:
            if stored.type == "message" and stored.role == "user":
                message = stored.message()
                assert isinstance(message, UserMessage)
                text = text_of(message.content)
                if text:
                    out.append(ForkMessage(stored.id, text))
        return out

    def has_assistant(self) -> bool:
        """Whether any entry is an assistant message (the lazy-creation trigger, §4.6)."""
        return any(stored.is_assistant_message for stored in self._entries)

    def branched_entries(self, leaf_id: str) -> list[StoredEntry]:
        """What pi's ``createBranchedSession(leaf_id)`` puts in the new file, header aside.

        The path root -> ``leaf_id`` without its ``label`` entries, the others byte for byte,
        then one new ``label`` entry per labelled path entry, chained after the last one and
        keeping the label's timestamp; they come in the order of the label map (the order
        the labels were first set), as pi iterates it. An entry whose parent was one of the
        dropped labels is re-parented to the entry before it, so the new file's chain stays
        whole. Raises ``Entry <id> not found``.
        """
        self.require(leaf_id)
        path = self.path(leaf_id)
        dropped = {stored.id for stored in path if stored.type == "label"}
        out: list[StoredEntry] = []
        for stored in path:
            if stored.type == "label":
                continue
            if stored.parent_id in dropped:
                stored = stored.reparented(out[-1].id if out else None)
            out.append(stored)
        taken = {stored.id for stored in out}
        parent = out[-1].id if out else None
        for target, (label, stamp) in self._labels.items():
            if target not in taken:
                continue
            entry_id = self._new_id(lambda candidate: candidate in taken or candidate in self)
            taken.add(entry_id)
            made = LabelEntry(
                id=entry_id, parent_id=parent, timestamp=stamp, target_id=target, label=label
            )
            out.append(StoredEntry.from_entry(made))
            parent = entry_id
        return out

    # -- changing ----------------------------------------------------------------------------

    def next_id(self) -> str:
        """A fresh entry id not used in this session."""
        return self._new_id(self._by_id.__contains__)

    def add(self, stored: StoredEntry) -> None:
        """Add an entry at the end of the file order; it becomes the leaf.

        The caller sets its ``parent_id`` (normally the current leaf) and a fresh id.
        """
        entries = self._entries
        if self._chain:
            last = entries[-1].id if entries else None
            self._chain = stored.parent_id == last and stored.id not in self._by_id
        entries.append(stored)
        self._by_id[stored.id] = stored
        if self._children is not None and stored.parent_id is not None:
            self._children.setdefault(stored.parent_id, []).append(stored)
        self._note(stored)
        self.leaf_id = stored.id

    def _note(self, stored: StoredEntry) -> None:
        """Take a label or session info into the labels or the name (other types: nothing)."""
        if stored.type == "label":
            label = stored.entry()
            if isinstance(label, LabelEntry):
                if label.label:
                    self._labels[label.target_id] = (label.label, label.timestamp)
                else:
                    self._labels.pop(label.target_id, None)
        elif stored.type == "session_info":
            info = stored.entry()
            if isinstance(info, SessionInfoEntry):
                self._name = (info.name or "").strip() or None

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry; the next append starts a sibling branch."""
        self.require(entry_id)
        self.leaf_id = entry_id

    def reset_leaf(self) -> None:
        """Leaf = none: the next append creates a new root."""
        self.leaf_id = None

    def _child_index(self) -> dict[str, list[StoredEntry]]:
        index = self._children
        if index is None:
            index = {}
            for stored in self._entries:
                if stored.parent_id is not None:
                    index.setdefault(stored.parent_id, []).append(stored)
            self._children = index
        return index


def is_user_message_entry(stored: StoredEntry) -> bool:
    """Whether the entry is a ``message`` entry holding a user message."""
    return stored.type == "message" and stored.role == "user"


def message_entry(stored: StoredEntry) -> MessageEntry:
    """The decoded ``message`` entry (the caller checked the type)."""
    entry = stored.entry()
    assert isinstance(entry, MessageEntry)
    return entry
