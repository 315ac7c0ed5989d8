"""The recording extension of the pi fixtures (fixtures README, "Features reached through the
recording extension"), as a pitrio extension: slash commands for labels, custom entries,
custom messages, tree navigation and the session name, which RPC has no commands for."""

from __future__ import annotations

import json
from typing import Any

from pitrio.messages.entries import MessageEntry


async def _resolve(ctx: Any, target: str) -> str | None:
    """An entry id, ``leaf``, or ``user:N`` / ``assistant:N`` (N-th message entry of that
    role in file order; negative N counts from the end)."""
    if target == "leaf":
        leaf: str | None = await ctx.session_manager.leaf_id()
        return leaf
    role, _, number = target.partition(":")
    if role in ("user", "assistant") and number.lstrip("-").isdigit():
        entries = await ctx.session_manager.entries()
        matching = [e.id for e in entries if isinstance(e, MessageEntry) and e.message.role == role]
        index = int(number)
        try:
            return matching[index - 1 if index > 0 else index]
        except IndexError:
            return None
    return target


def setup(api: Any) -> None:
    """Register the fixture commands."""

    async def label(args: str, ctx: Any) -> None:
        target, _, text = args.strip().partition(" ")
        entry_id = await _resolve(ctx, target)
        if entry_id is not None:
            await api.set_label(entry_id, text.strip() or None)

    async def note(args: str, ctx: Any) -> None:
        data = json.loads(args) if args.strip() else None
        await api.append_entry("fixture-note", data)

    async def inject(args: str, ctx: Any) -> None:
        words = args.split(" ")
        display, turn = True, False
        while words and words[0] in ("hidden", "turn"):
            if words.pop(0) == "hidden":
                display = False
            else:
                turn = True
        text = " ".join(words)
        api.send_message(
            "fixture-info",
            text,
            display=display,
            details={"source": "fixture", "display": display},
            trigger_turn=turn,
        )

    async def nav(args: str, ctx: Any) -> None:
        words = args.split()
        target = await _resolve(ctx, words[0]) if words else None
        summarize = "summarize" in words[1:]
        label_text = next((w[6:] for w in words[1:] if w.startswith("label=")), None)
        if target is not None:
            await ctx.navigate_tree(target, summarize=summarize, label=label_text)

    async def rename(args: str, ctx: Any) -> None:
        await api.set_session_name(args)

    api.register_command(
        "label", label, description="Set (or clear, without text) a label on an entry"
    )
    api.register_command("note", note, description="Append a custom entry")
    api.register_command("inject", inject, description="Send a custom message")
    api.register_command("nav", nav, description="Navigate the session tree")
    api.register_command("rename", rename, description="Set the session name from the extension")
