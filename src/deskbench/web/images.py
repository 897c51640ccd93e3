"""Images every deskbench web app serves: corpus pages by (document id, page number) at fixed
sizes, and files an agent or a judge produced, whose media type is what their bytes decode as
(never the name's suffix: they are untrusted output)."""

from __future__ import annotations

from pathlib import Path

from deskbench.corpus.images import ImageSpec

SIZES = {"thumb": ImageSpec(dpi=40), "view": ImageSpec(dpi=110)}  # a page-image URL names one of these
IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))


def safe_doc_id(doc: str) -> bool:
    """A document id as the corpus names it: a bare file name, never a path."""
    return bool(doc) and len(doc) <= 512 and not any(c in doc for c in "/\\\x00") \
        and not doc.startswith(".") and ":" not in doc[:3]


def image_type(path: Path) -> str | None:
    """The media type of a raster image that really decodes as one (the name's suffix is not
    trusted: a deliverable is agent output), else None."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.verify()
            return IMAGE_TYPES.get(im.format or "")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def png_or_jpeg(data: bytes) -> str | None:
    """image/png or image/jpeg from the bytes' magic number, else None (a chart a judge saw)."""
    return next((mime for magic, mime in _MAGIC if data.startswith(magic)), None)
