"""Where a ``branch_summary`` entry's ``fromId`` points, against pi 1.6.0's own SessionManager.

pi's ``branchWithSummary`` records the leaf the branch leaves (``"root"`` when there is none),
not the entry it continues from. Both build the same small tree (three messages, a summary back
to the first, one to no entry, one after the leaf was reset) and the entries' shapes, with ids
replaced by their positions, must be the same.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.session_store import create_store
from pitrio.messages.agent import user_message
from tests.actors.test_session_store_actor import CWD, assistant, running
from tests.interop.pi_install import find_pi
from tests.interop.test_pi_session_manager_foreign import pi_assistant, pi_user

HERE = Path(__file__).parent
SCRIPT = HERE / "session_manager_branch.mjs"
NODE, PI_CLI, SKIP_REASON = find_pi()

Row = tuple[str, int | None, int | str | None]


def by_position(entries: list[list[Any]]) -> list[Row]:
    """``(type, parent position, fromId position or "root")`` for each entry."""
    where = {entry[1]: index for index, entry in enumerate(entries)}

    return [
        (kind, None if parent is None else where[parent], where.get(from_id, from_id))
        for kind, _id, parent, from_id in entries
    ]


def pi_tree(work: Path) -> list[Row]:
    assert NODE is not None and PI_CLI is not None
    output = work / "pi.json"
    config = {
        "module": str(PI_CLI.parent / "core" / "session-manager.js"),
        "cwd": str(work),
        "dir": str(work / "pi-sessions"),
        "messages": [pi_user("1"), pi_assistant("2"), pi_user("3")],
        "output": str(output),
    }
    subprocess.run([str(NODE), str(SCRIPT), json.dumps(config)], check=True, timeout=60)
    return by_position(json.loads(output.read_text())["entries"])


async def pitrio_tree(work: Path) -> list[Row]:
    async with running(create_store, CWD, session_dir_override=str(work / "ours")) as store:
        one = await store.append_message(user_message("1", timestamp=1))
        await store.append_message(assistant("2"))
        await store.append_message(user_message("3", timestamp=3))
        await store.branch_with_summary(one.id, "explored")
        await store.branch_with_summary(None, "from the top")
        await store.reset_leaf()
        await store.branch_with_summary(one.id, "nothing was left")
        path = store.path
    assert path is not None
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return by_position(
        [
            [line["type"], line["id"], line["parentId"], line.get("fromId")]
            for line in lines
            if line["type"] != "session"
        ]
    )


async def test_branch_summaries_point_from_the_leaf_they_leave_as_pi_does(tmp_path: Path) -> None:
    if PI_CLI is None:
        pytest.skip(SKIP_REASON)
    ours = await pitrio_tree(tmp_path)
    assert ours == pi_tree(tmp_path)
    # The rule itself, so the comparison cannot pass by both sides agreeing on something else.
    assert [row[2] for row in ours if row[0] == "branch_summary"] == [2, 3, "root"]
