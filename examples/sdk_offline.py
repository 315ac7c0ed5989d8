"""Drive a pitrio session from Python, offline: the built-in ``faux/echo`` model answers.

Run it with ``python examples/sdk_offline.py``. It prompts twice, prints the events of the first
run as they stream, then the transcript, and where the session file went (under
``$PITRIO_AGENT_DIR`` or ``~/.pitrio/agent``).
"""

from __future__ import annotations

import trio

import pitrio
from pitrio.messages.content import text_of
from pitrio.messages.events import MessageUpdate


async def main() -> None:
    async with pitrio.create_session(model="faux/echo") as session, trio.open_nursery() as nursery:

        async def show_events() -> None:
            async for event in session.events():
                if isinstance(event, MessageUpdate):
                    delta = getattr(event.assistant_message_event, "delta", "")
                    print(f"  delta: {delta!r}")
                else:
                    print(f"event: {event.type}")
                if event.type == "agent_settled":
                    return

        nursery.start_soon(show_events)
        await session.prompt("hello from the SDK")
        await session.prompt("a second prompt")
        for message in await session.messages():
            content = getattr(message, "content", "")
            print(f"{message.role}: {text_of(content)}")
        print(f"session file: {session.session_file}")


if __name__ == "__main__":
    trio.run(main)
