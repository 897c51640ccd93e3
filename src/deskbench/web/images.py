"""Images every deskbench web app serves: corpus pages by (document id, page number) at fixed
sizes, and files an agent or a judge produced, whose media type is what their bytes decode as
(never the name's suffix: they are untrusted output)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.corpus.images import ImageSpec

if TYPE_CHECKING:
    from fastapi import Response

    from deskbench.corpus import Corpus

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


def page_png(corpus: Corpus, doc: str, number: int, size: str) -> Response:
    """One page of a corpus as PNG, by document id and page number only, for every web app that
    shows pages: 400 for a bad request, 404 for a document or page it does not hold (the stored
    copy must resolve inside the corpus, symlinks included: the corpus's own check), 413 for a
    page too big to draw; never a 500."""
    from fastapi import HTTPException, Response

    from deskbench.errors import UserError
    from deskbench.untrusted import FileLimitError

    if size not in SIZES or not safe_doc_id(doc):
        raise HTTPException(400, "bad image request")
    record = corpus.store.document(doc)
    if record is None:
        raise HTTPException(404, "no such document")
    try:
        if not corpus.stored_file(record).is_file():
            raise HTTPException(404, "no such document")
    except UserError as exc:
        raise HTTPException(404, "no such document") from exc
    try:
        data = corpus.page_image(doc, number, SIZES[size])
    except FileLimitError as exc:
        raise HTTPException(413, exc.verdict.message) from None
    except UserError as exc:
        raise HTTPException(404, "no such page") from exc
    return Response(data, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})
