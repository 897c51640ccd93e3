"""Page images: rendering, formats, caps, the cache, and the `page` command."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from conftest import ingest, run_cli, write_text_pdf
from PIL import Image

from deskbench.corpus import Corpus
from deskbench.corpus.images import ImageSpec
from deskbench.errors import UserError


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("images")
    write_text_pdf(root / "pdfs" / "doc.pdf", ["first page " * 50, "second page " * 80])
    c, _ = ingest(root / "corpus", [root / "pdfs"])
    return c


@pytest.mark.parametrize(("fmt", "pil_format"), [("png", "PNG"), ("jpeg", "JPEG"), ("webp", "WEBP")])
def test_render_formats_and_size(corpus: Corpus, fmt: str, pil_format: str) -> None:
    data = corpus.page_image("doc.pdf", 2, ImageSpec(dpi=150, format=fmt))  # type: ignore[arg-type]
    img = Image.open(io.BytesIO(data))
    assert img.format == pil_format
    assert img.size == (1275, 1650)  # US Letter at 150 DPI


def test_cache_serves_the_same_bytes_without_rendering(corpus: Corpus) -> None:
    spec = ImageSpec(dpi=100, format="png")
    doc = corpus.document("doc.pdf")
    path = corpus.images.path(doc.content_hash, 1, spec)
    assert not path.exists()
    first = corpus.page_image("doc.pdf", 1, spec)
    assert path.read_bytes() == first
    mtime = path.stat().st_mtime_ns
    time.sleep(0.01)
    assert corpus.page_image("doc.pdf", 1, spec) == first
    assert path.stat().st_mtime_ns == mtime
    # a different page, dpi or format is a different entry
    assert corpus.page_image("doc.pdf", 1, ImageSpec(dpi=72, format="png")) != first


def test_max_pixels_and_max_bytes_caps(corpus: Corpus) -> None:
    capped = Image.open(io.BytesIO(corpus.page_image("doc.pdf", 2, ImageSpec(dpi=300, max_pixels=500_000))))
    assert capped.width * capped.height <= 500_000
    assert capped.width * capped.height > 400_000  # rendered to the cap, not far below it
    full = corpus.page_image("doc.pdf", 2, ImageSpec(dpi=300, format="png"))
    limit = len(full) // 3
    small = corpus.page_image("doc.pdf", 2, ImageSpec(dpi=300, format="png", max_bytes=limit))
    assert len(small) <= limit
    w, h = Image.open(io.BytesIO(small)).size
    assert w < 2550 and abs(w / h - 2550 / 3300) < 0.01  # downscaled, aspect kept


def test_bad_requests_raise_user_errors(corpus: Corpus) -> None:
    with pytest.raises(UserError, match="out of range.*pages 1 to 2"):
        corpus.page_image("doc.pdf", 3)
    with pytest.raises(UserError, match="out of range"):
        corpus.page_image("doc.pdf", 0)
    with pytest.raises(UserError, match="not in the corpus"):
        corpus.page_image("nope.pdf", 1)
    with pytest.raises(UserError, match="unknown image format"):
        corpus.page_image("doc.pdf", 1, ImageSpec(format="gif"))  # type: ignore[arg-type]


def test_page_command(corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "p2.jpg"
    proc = run_cli("page", "--corpus", str(corpus.root), "doc.pdf", "2", "--format", "jpeg",
                   "--dpi", "72", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert Image.open(out).size == (612, 792)
    bad = run_cli("page", "--corpus", str(corpus.root), "doc.pdf", "9", "--output", str(tmp_path / "x.png"))
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: page 9 is out of range for doc.pdf: it has pages 1 to 2"


def test_rotated_page_renders_as_displayed(public_records: Path, tmp_path: Path) -> None:
    names = ["nics-background-checks-2015-11-rotated.pdf", "nics-background-checks-2015-11.pdf"]
    c, _ = ingest(tmp_path / "corpus", [public_records / n for n in names])
    rotated, upright = (Image.open(io.BytesIO(c.page_image(n, 1))) for n in names)
    assert upright.size == (2100, 1275)  # 1008 x 612 pt at 150 DPI
    assert rotated.size == (1275, 2100)  # the same page with /Rotate 90
    assert {h.document for h in c.search('"long guns" AND handguns')} == set(names)


def test_png_encoder_is_lossless_in_colour_and_grayscale() -> None:
    import numpy as np

    from deskbench.corpus.images import encode_png

    rng = np.random.default_rng(0)
    colour = rng.integers(0, 256, size=(37, 53, 3), dtype=np.uint8)
    decoded = Image.open(io.BytesIO(encode_png(colour)))
    assert decoded.mode == "RGB" and np.array_equal(np.asarray(decoded), colour)
    gray = np.repeat(rng.integers(0, 256, size=(41, 29, 1), dtype=np.uint8), 3, axis=2)
    decoded = Image.open(io.BytesIO(encode_png(gray)))
    assert decoded.mode == "L" and np.array_equal(np.asarray(decoded.convert("RGB")), gray)


def test_rendered_colour_survives(tmp_path: Path) -> None:
    from reportlab.lib.colors import Color
    from reportlab.pdfgen import canvas

    (tmp_path / "pdfs").mkdir()
    c = canvas.Canvas(str(tmp_path / "pdfs" / "colour.pdf"))
    c.setFillColor(Color(0.9, 0.1, 0.1))
    c.rect(100, 100, 200, 200, fill=1, stroke=0)
    c.drawString(72, 720, "a red square marks the cell that is over budget")
    c.showPage()
    c.save()
    corpus, _ = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    img = Image.open(io.BytesIO(corpus.page_image("colour.pdf", 1, ImageSpec(dpi=72))))
    assert img.mode == "RGB"
    r, g, b = img.convert("RGB").getpixel((200, 792 - 200))
    assert r > 200 and g < 60 and b < 60
