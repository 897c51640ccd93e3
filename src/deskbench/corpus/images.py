"""Page images: rendered with pdfium, size-capped, cached on disk.

Rendering stays in the process (it is the agents' hot path): the page's content was parsed under
the untrusted-file limits when the PDF was ingested, and the bitmap is bounded here by the
page-image pixel limit (a 14,400 pt page at 110 dpi would be 484 megapixels), so a page costs at
most ~9 bytes a pixel of that limit.

The cache key is (document content hash, page, dpi, format, caps), so a changed document never
serves a stale image. Byte caps downscale progressively with Lanczos, as MADQA did for
providers with a 5 MB image limit.
"""

from __future__ import annotations

import io
import math
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pypdfium2 as pdfium
from PIL import Image

from deskbench.untrusted.checks import check_page_pixels

ImageFormat = Literal["png", "jpeg", "webp"]
FORMATS: tuple[ImageFormat, ...] = ("png", "jpeg", "webp")
MIME: dict[ImageFormat, str] = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}

DOWNSCALE_STEP = 0.75
"""Each byte-cap retry shrinks both sides to 75%."""


@dataclass(frozen=True)
class ImageSpec:
    """How to render a page; part of the cache key."""

    dpi: int = 150
    format: ImageFormat = "png"
    max_pixels: int | None = None
    max_bytes: int | None = None

    def key(self) -> str:
        caps = f"-px{self.max_pixels or 0}-b{self.max_bytes or 0}"
        return f"{self.dpi}dpi{caps}.{self.format}"

    def validate(self) -> None:
        from deskbench.errors import UserError

        if self.format not in FORMATS:
            raise UserError(f"unknown image format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if not 18 <= self.dpi <= 1200:
            raise UserError(f"dpi {self.dpi} is out of range; use a value from 18 to 1200")
        if self.max_pixels is not None and self.max_pixels < 10_000:
            raise UserError(f"max pixels {self.max_pixels} is too small; use at least 10000")
        if self.max_bytes is not None and self.max_bytes < 1_000:
            raise UserError(f"max bytes {self.max_bytes} is too small; use at least 1000")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(pixels: np.ndarray) -> bytes:
    """A PNG of an RGB (h, w, 3) array: grayscale when all channels agree, filter 0, zlib level 1.

    Rendered pages are mostly flat colour, so skipping PNG's per-row filters costs almost no
    size, and it is 2-3x faster than Pillow's encoder, which dominated cold render time.
    """
    if pixels.ndim == 3 and np.array_equal(pixels[..., 0], pixels[..., 1]) and np.array_equal(
        pixels[..., 1], pixels[..., 2]
    ):
        pixels = pixels[..., 0]
    height, width = pixels.shape[:2]
    colour_type = 0 if pixels.ndim == 2 else 2
    rows = np.empty((height, 1 + pixels[0].size), dtype=np.uint8)
    rows[:, 0] = 0  # filter type None on every row
    rows[:, 1:] = pixels.reshape(height, -1)
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"".join((
        b"\x89PNG\r\n\x1a\n",
        _chunk(b"IHDR", header),
        _chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)),
        _chunk(b"IEND", b""),
    ))


def encode(image: Image.Image | np.ndarray, fmt: ImageFormat) -> bytes:
    if fmt == "png":
        return encode_png(np.asarray(image.convert("RGB")) if isinstance(image, Image.Image) else image)
    pil = Image.fromarray(image) if isinstance(image, np.ndarray) else image
    buf = io.BytesIO()
    if fmt == "jpeg":
        pil.convert("RGB").save(buf, format="JPEG", quality=90)
    else:
        pil.save(buf, format="WEBP", quality=90, method=2)
    return buf.getvalue()


def render_page(pdf_path: Path, page: int, spec: ImageSpec) -> bytes:
    """Render 1-based `page` of the PDF as encoded image bytes honouring the caps."""
    pdf = pdfium.PdfDocument(pdf_path)
    try:
        pg = pdf[page - 1]
        try:
            # pdfium rounds pixel sizes up; a hair under the exact scale keeps 792 pt at 150 DPI
            # at 1650 px (as pdftoppm), not 1651.
            scale = spec.dpi / 72 * (1 - 1e-9)
            width, height = pg.get_size()
            if spec.max_pixels:
                pixels = (width * scale) * (height * scale)
                if pixels > spec.max_pixels:
                    scale *= math.sqrt(spec.max_pixels / pixels)
                    while math.ceil(width * scale) * math.ceil(height * scale) > spec.max_pixels:
                        scale *= 0.999
            # a bitmap over the page-image limit is refused before pdfium allocates it
            check_page_pixels(width, height, scale * 72, f"page {page}")
            bitmap = pg.render(scale=scale, rev_byteorder=True)
            array = np.array(bitmap.to_numpy()[..., :3])  # own the memory before pdfium frees it
            bitmap.close()
        finally:
            pg.close()
    finally:
        pdf.close()
    data = encode(array, spec.format)
    if spec.max_bytes and len(data) > spec.max_bytes:
        return shrink_to_bytes(Image.fromarray(array), spec.format, spec.max_bytes)
    return data


def shrink_to_bytes(image: Image.Image, fmt: ImageFormat, max_bytes: int) -> bytes:
    """Downscale by 75% steps with Lanczos until the encoded image fits (MADQA's 5 MB rule)."""
    data = encode(image, fmt)
    while len(data) > max_bytes and min(image.size) > 32:
        size = (max(1, int(image.width * DOWNSCALE_STEP)), max(1, int(image.height * DOWNSCALE_STEP)))
        image = image.resize(size, Image.Resampling.LANCZOS)
        data = encode(image, fmt)
    return data


class PageImageCache:
    """Files under `<corpus>/cache/pages/`, written atomically (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, content_hash: str, page: int, spec: ImageSpec) -> Path:
        return self.root / content_hash[:2] / f"{content_hash}-p{page}-{spec.key()}"

    def get(self, content_hash: str, page: int, spec: ImageSpec) -> bytes | None:
        try:
            return self.path(content_hash, page, spec).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, content_hash: str, page: int, spec: ImageSpec, data: bytes) -> None:
        target = self.path(content_hash, page, spec)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
