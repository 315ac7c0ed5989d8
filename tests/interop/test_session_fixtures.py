"""The session store against every session file pi 0.73.1 wrote (shared/fixtures/sessions).

For each fixture: our tree is pi's ``*.tree.json`` (ids, parents, children, branch, labels,
session name, leaf, the nested tree), our projection is pi's ``*.context.json`` and every
``*.context.<entryId>.json`` exactly (as JSON values), a file we write from it re-reads the
same (byte for byte), and the legacy files migrate as pi migrates them, unknown fields kept.
``legacy_v1``'s ids are random, so it is compared after mapping our ids onto pi's by position.

The fixtures live in ``shared/`` beside the repository; when they are missing these tests fail.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.actors.session_store import (
    SessionContext,
    SessionSeed,
    open_store,
    start_seeded_store,
)
from pitrio.actors.session_store.file_format import ParsedSession, parse_session_bytes
from pitrio.actors.session_store.projection import Projection
from pitrio.actors.session_store.tree import SessionTree, TreeNode
from pitrio.messages.codec import to_json
from tests.shared_dir import SESSIONS

MISSING = "<fixtures missing>"


def session_names() -> list[str]:
    names = sorted(
        path.name[: -len(".jsonl")]
        for path in SESSIONS.glob("*.jsonl")
        if not path.name.endswith(".migrated.jsonl")
    )
    return names or [MISSING]


def extra_contexts() -> list[tuple[str, str]]:
    found = sorted(
        (path.name.split(".")[0], path.name.split(".")[2])
        for path in SESSIONS.glob("*.context.*.json")
    )
    return found or [(MISSING, MISSING)]


def fixture(name: str) -> Path:
    if name == MISSING:
        pytest.fail(f"no session fixtures in {SESSIONS} (is shared/ beside the repository?)")
    return SESSIONS / f"{name}.jsonl"


def load(name: str) -> tuple[ParsedSession, SessionTree]:
    path = fixture(name)
    parsed = parse_session_bytes(path.read_bytes(), origin=str(path))
    assert parsed.header is not None
    assert parsed.problems == [], [p.describe(str(path)) for p in parsed.problems]
    return parsed, SessionTree(parsed.header, parsed.entries)


def expected(name: str, suffix: str) -> Any:
    return json.loads((SESSIONS / f"{name}.{suffix}").read_text())


def context_json(context: SessionContext) -> dict[str, Any]:
    """A context in the form of pi's ``*.context*.json``."""
    model = context.model
    return {
        "leafId": context.leaf_id,
        "thinkingLevel": context.thinking_level,
        "model": None if model is None else {"provider": model.provider, "modelId": model.model_id},
        "messages": [to_json(message) for message in context.messages],
    }


def node_json(node: TreeNode) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node.entry.id, "type": node.entry.type}
    if node.entry.role is not None:
        out["role"] = node.entry.role
    if node.label is not None:
        out["label"] = node.label
        out["labelTimestamp"] = node.label_timestamp
    out["children"] = [node_json(child) for child in node.children]
    return out


def tree_json(tree: SessionTree, *, migrated: bool) -> dict[str, Any]:
    """A tree in the form of pi's ``*.tree.json``."""
    entries = []
    for stored in tree.entries:
        item: dict[str, Any] = {"id": stored.id, "parentId": stored.parent_id, "type": stored.type}
        if stored.role is not None:
            item["role"] = stored.role
        item["children"] = [child.id for child in tree.children(stored.id)]
        entries.append(item)
    return {
        "header": to_json(tree.header),
        "migrated": migrated,
        "sessionName": tree.session_name,
        "leafId": tree.leaf_id,
        "branch": [stored.id for stored in tree.path()],
        "labels": tree.labels,
        "entries": entries,
        "tree": [node_json(root) for root in tree.tree()],
    }


def rename_ids(value: Any, mapping: dict[str, str]) -> Any:
    """Replace every string that is one of our ids by pi's id at the same position."""
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [rename_ids(item, mapping) for item in value]
    if isinstance(value, dict):
        return {mapping.get(key, key): rename_ids(item, mapping) for key, item in value.items()}
    return value


def id_mapping(name: str, tree: SessionTree) -> dict[str, str]:
    """Ours -> pi's by file position for legacy_v1 (random ids); identity otherwise."""
    if name != "legacy_v1":
        return {}
    theirs = [entry["id"] for entry in expected(name, "tree.json")["entries"]]
    ours = [stored.id for stored in tree.entries]
    assert len(ours) == len(theirs)
    return dict(zip(ours, theirs, strict=True))


def test_fixtures_are_present() -> None:
    assert SESSIONS.is_dir(), f"{SESSIONS} is missing: the fixtures must sit beside the repo"
    assert len(session_names()) >= 20
    assert len(extra_contexts()) >= 10


@pytest.mark.parametrize("name", session_names())
def test_tree_matches_pi(name: str) -> None:
    parsed, tree = load(name)
    ours = tree_json(tree, migrated=parsed.migrated)
    assert rename_ids(ours, id_mapping(name, tree)) == expected(name, "tree.json")


@pytest.mark.parametrize("name", session_names())
def test_context_at_leaf_matches_pi(name: str) -> None:
    _, tree = load(name)
    ours = context_json(Projection(tree.path()).context())
    assert rename_ids(ours, id_mapping(name, tree)) == expected(name, "context.json")


@pytest.mark.parametrize(("name", "entry_id"), extra_contexts())
def test_context_at_other_leaves_matches_pi(name: str, entry_id: str) -> None:
    _, tree = load(name)
    ours = context_json(Projection(tree.path(entry_id)).context())
    assert ours == expected(name, f"context.{entry_id}.json")


@pytest.mark.parametrize("name", session_names())
def test_context_built_incrementally_matches_pi(name: str) -> None:
    # Appending entry by entry (the live path) gives what loading the file gives.
    parsed, _ = load(name)
    assert parsed.header is not None
    tree = SessionTree(parsed.header)
    projection = Projection()
    for stored in parsed.entries:
        if stored.parent_id != tree.leaf_id:
            tree.add(stored)
            projection.reset(tree.path())
        else:
            tree.add(stored)
            projection.append(stored)
    ours = context_json(projection.context())
    assert rename_ids(ours, id_mapping(name, tree)) == expected(name, "context.json")


@pytest.mark.parametrize("name", session_names())
async def test_store_answers_like_pi(name: str) -> None:
    # The same through the actor, read-only (the shared folder is never written).
    path = fixture(name)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, read_only=True)
        ours = context_json(await store.context())
        leaf = await store.leaf_id()
        name_ = await store.session_name()
        await store.aclose()
    mapping = {} if name != "legacy_v1" else id_mapping(name, load(name)[1])
    pi_tree = expected(name, "tree.json")
    if name != "legacy_v1":
        assert rename_ids(ours, mapping) == expected(name, "context.json")
        assert leaf == pi_tree["leafId"]
    assert name_ == pi_tree["sessionName"]
    assert not (path.parent / (path.name + ".lock")).exists()


@pytest.mark.parametrize("name", session_names())
async def test_a_file_we_write_rereads_identically(name: str, tmp_path: Path) -> None:
    parsed, tree = load(name)
    assert parsed.header is not None
    target = tmp_path / "copy.jsonl"
    seed = SessionSeed(header=parsed.header, entries=tuple(parsed.entries), path=target)
    async with trio.open_nursery() as nursery:
        store = await start_seeded_store(nursery, seed)
        await store.aclose()
    original = fixture(name).read_bytes()
    if not parsed.migrated:
        assert target.read_bytes() == original  # pi's bytes, unknown fields and key order kept
    again = parse_session_bytes(target.read_bytes(), origin=str(target))
    assert again.problems == []
    tree_again = SessionTree(again.header or parsed.header, again.entries)
    assert tree_json(tree_again, migrated=False) == tree_json(tree, migrated=False)
    assert context_json(Projection(tree_again.path()).context()) == context_json(
        Projection(tree.path()).context()
    )


@pytest.mark.parametrize("name", ["legacy_v1", "legacy_v2"])
async def test_migration_rewrites_the_file_as_pi(name: str, tmp_path: Path) -> None:
    target = tmp_path / f"{name}.jsonl"
    shutil.copyfile(fixture(name), target)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, target)
        status = await store.status()
        await store.aclose()
    assert status.migrated
    ours = target.read_bytes()
    theirs = (SESSIONS / f"{name}.migrated.jsonl").read_bytes()
    if name == "legacy_v2":
        assert ours == theirs
    else:
        parsed = parse_session_bytes(ours, origin=str(target))
        assert parsed.header is not None
        mapping = id_mapping(name, SessionTree(parsed.header, parsed.entries))
        renamed = [rename_ids(orjson.loads(line), mapping) for line in ours.splitlines()]
        assert renamed == [orjson.loads(line) for line in theirs.splitlines()]
        # Key order too: pi appends the new keys at the end of each object.
        assert [list(line) for line in renamed] == [
            list(orjson.loads(line)) for line in theirs.splitlines()
        ]
    # Opening the rewritten file again migrates nothing and gives the same tree.
    again = parse_session_bytes(ours, origin=str(target))
    assert not again.migrated and again.problems == []
    # Issue 21: a migration keeps the original beside the file, byte for byte, and the store
    # closed cleanly: its lock file is gone too, as pi leaves nothing.
    backup = tmp_path / f"{name}.jsonl.v{name[-1]}.bak"
    assert backup.read_bytes() == fixture(name).read_bytes()
    assert sorted(path.name for path in os.scandir(tmp_path)) == [f"{name}.jsonl", backup.name]


UNKNOWN = {"xFuture": {"nested": [1, "two", None]}, "xFlag": True}


def with_unknown_fields(data: bytes, *, legacy_v1: bool) -> bytes:
    """Every line gets unknown keys (also inside messages); plus an entry of an unknown type."""
    out = []
    for line in data.splitlines():
        value = orjson.loads(line)
        value.update(UNKNOWN)
        if isinstance(value.get("message"), dict):
            value["message"]["xInner"] = "kept"
        out.append(orjson.dumps(value))
    future: dict[str, Any] = {"type": "future_kind", "timestamp": "2025-01-01T00:00:00.000Z"}
    if not legacy_v1:
        last = orjson.loads(out[-1])
        future.update({"id": "feedf00d", "parentId": last["id"]})
    future["payload"] = {"a": 1}
    out.append(orjson.dumps(future))
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("name", ["legacy_v1", "legacy_v2"])
async def test_migration_keeps_every_unknown_field(name: str, tmp_path: Path) -> None:
    target = tmp_path / f"{name}.jsonl"
    data = with_unknown_fields(fixture(name).read_bytes(), legacy_v1=name == "legacy_v1")
    target.write_bytes(data)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, target)
        assert (await store.status()).migrated
        context = await store.context()
        await store.aclose()
    lines = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert lines[0]["version"] == 3
    for value in lines:
        for key, item in UNKNOWN.items():
            if value.get("type") != "future_kind":
                assert value[key] == item, value
        if isinstance(value.get("message"), dict):
            assert value["message"]["xInner"] == "kept"
    future = [value for value in lines if value.get("type") == "future_kind"]
    assert len(future) == 1 and future[0]["payload"] == {"a": 1} and "id" in future[0]
    # The unknown entry is in the tree (it is the leaf) but not in the context.
    assert context.leaf_id == future[0]["id"]
    assert all(to_json(message).get("xInner") in (None, "kept") for message in context.messages)


async def test_fork_reproduces_pi_fork_child(tmp_path: Path) -> None:
    # fork_child = RPC fork of fork_source at its user message "question two", then one turn.
    source = tmp_path / "source.jsonl"
    shutil.copyfile(fixture("fork_source"), source)
    child_lines = fixture("fork_child").read_bytes().splitlines()
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, source)
        result = await store.fork("54b831fa")
        await store.aclose()
        assert result.selected_text == "Fork demo: question two."
        seed = result.seed
        assert seed.header.parent_session == str(source)
        assert seed.path is not None and seed.path.parent == tmp_path
        child = await start_seeded_store(nursery, seed)
        context = await child.context()  # S92: the first user message and its answer
        assert [message.role for message in context.messages] == ["user", "assistant"]
        await child.aclose()
    assert source.read_bytes() == fixture("fork_source").read_bytes()  # left untouched
    written = seed.path.read_bytes().splitlines()
    assert written[1:] == child_lines[1:5]  # the path up to the parent, pi's bytes
    header = orjson.loads(written[0])
    assert header["parentSession"] == str(source) and header["cwd"] == "/home/user/project"


async def test_clone_reproduces_pi_fork_clone(tmp_path: Path) -> None:
    # fork_clone = RPC clone of fork_child at its leaf, then one turn.
    source = tmp_path / "child.jsonl"
    shutil.copyfile(fixture("fork_child"), source)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, source, read_only=True)
        result = await store.clone()
        await store.aclose()
        assert result.selected_text is None and result.seed.path is not None
        clone = await start_seeded_store(nursery, result.seed)
        await clone.aclose()
    written = result.seed.path.read_bytes().splitlines()
    assert written[1:] == fixture("fork_clone").read_bytes().splitlines()[1:7]
