"""Images for the read tool: detection by content, and resizing when Pillow is installed.

Images are recognised by their first bytes (JPEG, PNG, GIF, WebP), never by file name. Above
2000x2000 pixels (or 4.5 MB of base64) an image is scaled down, trying PNG then JPEG at falling
qualities, then smaller sizes, as pi does. Resizing needs the optional ``images`` extra
(Pillow); without it images are passed on unchanged. Blocking work: run it in a thread.
"""

from __future__ import annotations

import base64
import importlib.util
import io
from typing import Any

import attrs

from pitrio.messages.content import ImageContent

MAX_WIDTH = 2000
MAX_HEIGHT = 2000
MAX_BASE64_BYTES = int(4.5 * 1024 * 1024)
JPEG_QUALITIES = (80, 85, 70, 55, 40)
SNIFF_BYTES = 4100


def detect_image_mime(head: bytes) -> str | None:
    """The MIME type of a supported image from its first bytes, else ``None``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def resizing_available() -> bool:
    """Whether an image library (Pillow) is installed."""
    return importlib.util.find_spec("PIL") is not None


@attrs.frozen
class SizedImage:
    """An image ready to send: base64 data, MIME type, original and shown dimensions."""

    data: str
    mime_type: str
    original_width: int
    original_height: int
    width: int
    height: int
    was_resized: bool

    def dimension_note(self) -> str | None:
        """The note telling the model how shown coordinates map to the original."""
        if not self.was_resized:
            return None
        scale = self.original_width / self.width
        return (
            f"[Image: original {self.original_width}x{self.original_height}, displayed at "
            f"{self.width}x{self.height}. Multiply coordinates by {scale:.2f} to map to original "
            "image.]"
        )


def fit_within(width: int, height: int) -> tuple[int, int]:
    """Scale ``width``x``height`` down to fit the limits, keeping the aspect ratio."""
    if width > MAX_WIDTH:
        height = round(height * MAX_WIDTH / width)
        width = MAX_WIDTH
    if height > MAX_HEIGHT:
        width = round(width * MAX_HEIGHT / height)
        height = MAX_HEIGHT
    return max(width, 1), max(height, 1)


def resize_image(data: bytes, mime_type: str) -> SizedImage | None:
    """Fit an image within the limits; ``None`` when it cannot be decoded or made small enough.

    Requires Pillow (check :func:`resizing_available` first).
    """
    from PIL import Image, ImageOps  # optional dependency, imported only when used

    encoded = base64.b64encode(data).decode("ascii")
    try:
        with Image.open(io.BytesIO(data)) as checked:
            checked.verify()  # chunk checksums too: a damaged file is refused, as pi's decoder does
        with Image.open(io.BytesIO(data)) as opened:
            image: Any = ImageOps.exif_transpose(opened) or opened
            image.load()
            width, height = image.size
            if width <= MAX_WIDTH and height <= MAX_HEIGHT and len(encoded) < MAX_BASE64_BYTES:
                return SizedImage(encoded, mime_type, width, height, width, height, False)
            target_w, target_h = fit_within(width, height)
            if image.mode not in ("RGB", "RGBA", "L", "LA"):
                image = image.convert("RGBA")
            while True:
                candidate = _smallest_encoding(image, target_w, target_h)
                if candidate is not None:
                    return SizedImage(
                        candidate[0], candidate[1], width, height, target_w, target_h, True
                    )
                if target_w == 1 and target_h == 1:
                    return None
                next_w = 1 if target_w == 1 else max(1, int(target_w * 0.75))
                next_h = 1 if target_h == 1 else max(1, int(target_h * 0.75))
                if (next_w, next_h) == (target_w, target_h):
                    return None
                target_w, target_h = next_w, next_h
    except Exception:  # any decoding problem means "could not be resized"
        return None


def _smallest_encoding(image: Any, width: int, height: int) -> tuple[str, str] | None:
    """The first of PNG, JPEG at each quality whose base64 fits; ``None`` if none does."""
    from PIL import Image

    resized = image.resize((width, height), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    resized.save(buffer, format="PNG")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    if len(encoded) < MAX_BASE64_BYTES:
        return encoded, "image/png"
    rgb = resized.convert("RGB") if resized.mode != "RGB" else resized
    for quality in JPEG_QUALITIES:
        buffer = io.BytesIO()
        rgb.save(buffer, format="JPEG", quality=quality)
        encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
        if len(encoded) < MAX_BASE64_BYTES:
            return encoded, "image/jpeg"
    return None


OMITTED_NOTE = "[Image omitted: could not be resized below the inline image size limit.]"
"""What stands for an image that cannot be decoded or made small enough (pi 1.6.0)."""


def normalize_prompt_images(
    text: str, images: tuple[ImageContent, ...], *, auto_resize: bool
) -> tuple[str, tuple[ImageContent, ...]]:
    """A prompt's text and images as pi 1.6.0 sends them: each image fitted within the limits
    (when ``auto_resize`` and an image library is there), one that cannot be is left out; the
    notes (left out, or shown at another size) follow the text after a blank line."""
    if not images or not auto_resize or not resizing_available():
        return text, images
    kept: list[ImageContent] = []
    notes: list[str] = []
    for image in images:
        try:
            raw = base64.b64decode(image.data, validate=False)
        except ValueError:
            notes.append(OMITTED_NOTE)
            continue
        sized = resize_image(raw, image.mime_type)
        if sized is None:
            notes.append(OMITTED_NOTE)
            continue
        kept.append(attrs.evolve(image, data=sized.data, mime_type=sized.mime_type))
        if (note := sized.dimension_note()) is not None:
            notes.append(note)
    if notes:
        text = f"{text}\n\n" + "\n".join(notes)
    return text, tuple(kept)
