"""OCR: a scanned page (rendered to an image and wrapped back into a PDF) becomes searchable."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ingest, require_tool, write_text_pdf

from deskbench.corpus.extract import is_garbage, needs_ocr, printable_count
from deskbench.generate.pdfs import rasterize_pdf


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scan")
    src = write_text_pdf(root / "src.pdf", [
        "The council approved the Hollow Creek culvert replacement.",
        "Second page mentions the lighthouse restoration fund.",
    ])
    out = root / "pdfs" / "minutes-scan.pdf"
    rasterize_pdf(src, out, dpi=200, noise_seed=3)
    write_text_pdf(root / "pdfs" / "born-digital.pdf", ["A born-digital page about the culvert budget."])
    return root / "pdfs"


def test_scanned_pages_are_ocrd_and_searchable(tmp_path: Path, scanned: Path) -> None:
    require_tool("tesseract")
    c, summary = ingest(tmp_path / "corpus", [scanned], ocr="auto")
    assert summary.pages == 3 and summary.pages_ocr == 2
    sources = {(p.doc_id, p.page): p.text_source for d in c.documents() for p in c.store.pages(d.doc_id)}
    assert sources == {("minutes-scan.pdf", 1): "ocr", ("minutes-scan.pdf", 2): "ocr",
                       ("born-digital.pdf", 1): "text_layer"}
    assert {(h.document, h.page) for h in c.search("culvert")} == {("minutes-scan.pdf", 1), ("born-digital.pdf", 1)}
    assert [(h.document, h.page) for h in c.search('"lighthouse restoration"')] == [("minutes-scan.pdf", 2)]


def test_ocr_never_leaves_scans_unsearchable(tmp_path: Path, scanned: Path) -> None:
    c, summary = ingest(tmp_path / "corpus", [scanned], ocr="never")
    assert summary.pages_ocr == 0
    assert [h.document for h in c.search("culvert")] == ["born-digital.pdf"]
    assert c.search("lighthouse") == []


def test_ocr_always_reads_every_page(tmp_path: Path, scanned: Path) -> None:
    require_tool("tesseract")
    c, summary = ingest(tmp_path / "corpus", [scanned], ocr="always")
    assert summary.pages_ocr == 3
    assert c.store.page("born-digital.pdf", 1).text_source == "ocr"  # type: ignore[union-attr]
    assert "culvert" in c.store.page("born-digital.pdf", 1).text.lower()  # type: ignore[union-attr]


def test_ocr_decision_rule() -> None:
    assert printable_count("  a-b \ufffd\x01 ") == 3
    assert needs_ocr("", n_images=1, n_paths=0)
    assert needs_ocr("Page 3", n_images=2, n_paths=0)  # a page number over a scanned image
    assert not needs_ocr("", n_images=0, n_paths=0)  # a blank page
    assert not needs_ocr("x" * 25, n_images=1, n_paths=0)
    assert needs_ocr("", n_images=0, n_paths=500)  # text drawn as outlines
    garbage = "\x01\x02\x03\ufffd\ufffd\ufffd ab"
    assert is_garbage(garbage) and needs_ocr(garbage * 10, n_images=0, n_paths=0)
    assert not is_garbage("Ordinary text, with punctuation: 12.5%")


def test_rapidocr_is_the_fallback_when_tesseract_is_absent(
    scanned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("rapidocr_onnxruntime", reason="the test extra installs rapidocr-onnxruntime")
    from deskbench.corpus.extract import OcrSettings, extract_pdf
    from deskbench.corpus.ocr import RapidOcr, make_engine

    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on PATH
    monkeypatch.setattr("deskbench.corpus.extract._ENGINES", {})
    assert isinstance(make_engine("auto"), RapidOcr)
    result = extract_pdf(str(scanned / "minutes-scan.pdf"), OcrSettings(mode="auto", engine="auto"))
    assert result.error is None
    first = result.pages[0]
    assert first.source == "ocr" and first.error is None
    # rapidocr's bundled model often drops spaces between English words: check letters, not tokens
    assert "culvert" in first.text.lower().replace(" ", "")


def test_no_ocr_engine_is_reported_not_fatal(scanned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deskbench.corpus import ocr
    from deskbench.corpus.extract import OcrSettings, extract_pdf

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("deskbench.corpus.extract._ENGINES", {})
    monkeypatch.setitem(ocr.OCR_ENGINES, "rapidocr", ocr.OCR_ENGINES["tesseract"])  # both absent now
    result = extract_pdf(str(scanned / "minutes-scan.pdf"), OcrSettings(mode="auto", engine="auto"))
    assert result.error is None and len(result.pages) == 2
    assert all(p.error == "needs OCR but no OCR engine is available" for p in result.pages)
    assert result.warnings and "apt-get install tesseract-ocr" in result.warnings[0]
