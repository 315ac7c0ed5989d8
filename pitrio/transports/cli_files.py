"""pi's ``@file`` arguments: ``pitrio @notes.md @shot.png "what is wrong here?"``.

A word of the command line that starts with ``@`` (also after ``--``) names a file whose
contents go into the first message, as pi 1.6.0 puts them there: a text file as
``<file name="ABSOLUTE PATH">\\nTEXT\\n</file>\\n``, an image (PNG, JPEG, GIF, WebP, known by
its first bytes) as an attachment of the first message with an empty ``<file name="...">``
element naming it. Empty files are skipped. A missing or unreadable file ends the command with
pi's error line (exit 1); RPC mode refuses ``@file`` arguments, as pi's does.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from pitrio.errors import PitrioError
from pitrio.messages.content import ImageContent
from pitrio.messages.ostext import check_os_text
from pitrio.sdk.tools import SNIFF_BYTES, detect_image_mime

RPC_REFUSAL = "@file arguments are not supported in RPC mode"


class FileArgumentError(PitrioError):
    """An ``@file`` argument that cannot be read; the message names its absolute path."""


@attrs.frozen
class FileArguments:
    """What the ``@file`` arguments add to the first message: text and image attachments."""

    text: str = ""
    images: tuple[ImageContent, ...] = ()


def split_file_arguments(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(files, messages)``: the words naming files (``@`` taken off) and the rest, in order."""
    files = [word[1:] for word in words if word.startswith("@")]
    messages = [word for word in words if not word.startswith("@")]
    return files, messages


def read_file_arguments(paths: Sequence[str], cwd: str | None = None) -> FileArguments:
    """Read ``paths`` (``~`` expanded, relative to ``cwd``) into the first message's parts.

    Raises :class:`FileArgumentError` with pi's text for a file that does not exist or cannot
    be read.
    """
    base = Path(cwd or os.getcwd())
    text: list[str] = []
    images: list[ImageContent] = []
    for raw in paths:
        check_os_text(raw, "@file argument")
        path = Path(os.path.abspath(base / Path(raw).expanduser()))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FileArgumentError(f"File not found: {path}") from None
        except OSError as exc:
            raise FileArgumentError(f"Could not read file {path}: {exc.strerror or exc}") from None
        if not data:
            continue  # pi skips empty files
        mime = detect_image_mime(data[:SNIFF_BYTES])
        if mime is not None:
            images.append(ImageContent(data=base64.b64encode(data).decode(), mime_type=mime))
            text.append(f'<file name="{path}"></file>\n')
            continue
        content = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        text.append(f'<file name="{path}">\n{content}\n</file>\n')
    return FileArguments("".join(text), tuple(images))
