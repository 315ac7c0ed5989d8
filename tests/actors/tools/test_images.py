"""Prompt images as pi 1.6.0 sends them (``normalize_prompt_images``)."""

from __future__ import annotations

import base64
import io
import zlib

import pytest

from pitrio.actors.tool_executor.tools.images import (
    OMITTED_NOTE,
    normalize_prompt_images,
    resizing_available,
)
from pitrio.messages.content import ImageContent

pytestmark = pytest.mark.skipif(not resizing_available(), reason="needs Pillow")


def _png(*, damaged: bool = False, size: int = 1) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGBA", (size, size), (255, 0, 0, 255)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    if damaged:  # the last chunk before IEND gets a wrong checksum
        at = data.rfind(b"IEND") - 8
        data[at : at + 4] = (zlib.crc32(b"x") & 0xFFFFFFFF).to_bytes(4, "big")
    return base64.b64encode(bytes(data)).decode()


def test_an_image_that_cannot_be_decoded_is_left_out_with_a_note() -> None:
    image = ImageContent(data=_png(damaged=True), mime_type="image/png")
    text, images = normalize_prompt_images("see", (image,), auto_resize=True)
    assert (text, images) == (f"see\n\n{OMITTED_NOTE}", ())


def test_a_small_image_passes_and_a_large_one_is_fitted_with_a_note() -> None:
    small = ImageContent(data=_png(), mime_type="image/png")
    assert normalize_prompt_images("see", (small,), auto_resize=True) == ("see", (small,))
    large = ImageContent(data=_png(size=3000), mime_type="image/png")
    text, images = normalize_prompt_images("see", (large,), auto_resize=True)
    assert text.startswith("see\n\n[Image: original 3000x3000, displayed at 2000x2000.")
    assert len(images) == 1 and images[0].data != large.data


def test_without_auto_resize_images_pass_as_given() -> None:
    image = ImageContent(data=_png(damaged=True), mime_type="image/png")
    assert normalize_prompt_images("see", (image,), auto_resize=False) == ("see", (image,))
