"""The real public-records PDFs (../shared): some are broken on purpose."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ingest, require_tool

from deskbench.corpus import Corpus
from deskbench.corpus.ingest import IngestSummary
from deskbench.search.analyzer import analyze

EXPECTED_FAILURES = {
    "password-example.pdf": "encrypted PDF",
    "empty.pdf": "empty file (0 bytes)",
}


@pytest.fixture(scope="module")
def ingested(public_records: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Corpus, IngestSummary]:
    require_tool("tesseract")
    return ingest(tmp_path_factory.mktemp("public") / "corpus", [public_records], workers=2)


def test_every_file_ingests_or_fails_with_its_reason(public_records: Path, ingested: tuple[Corpus, IngestSummary]) -> None:
    c, summary = ingested
    pdfs = sorted(p.name for p in public_records.glob("*.pdf"))
    failed = {Path(f.file).name: f.reason for f in summary.files_failed}
    assert set(failed) == set(EXPECTED_FAILURES)
    for name, fragment in EXPECTED_FAILURES.items():
        assert fragment in failed[name]
    assert sorted(d.doc_id for d in c.documents()) == sorted(set(pdfs) - set(failed))
    assert summary.files_ok == len(pdfs) - len(EXPECTED_FAILURES)
    # malformed-from-issue-932.pdf has a broken xref; pdfium repairs it and its image-only page is OCR'd
    malformed = c.store.page("malformed-from-issue-932.pdf", 1)
    assert malformed is not None and malformed.text_source == "ocr"
    assert summary.pages_ocr >= 1


def _pdfinfo_pages(path: Path) -> int:
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", out, re.M).group(1))  # type: ignore[union-attr]


def _pdftotext(path: Path, page: int) -> str:
    return subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), "-layout", str(path), "-"],
                          capture_output=True, text=True, check=True).stdout


def test_page_numbers_are_one_based_and_match_pdfinfo(public_records: Path, ingested: tuple[Corpus, IngestSummary]) -> None:
    require_tool("pdfinfo")
    c, _ = ingested
    for doc in c.documents():
        path = public_records / doc.doc_id
        assert doc.page_count == _pdfinfo_pages(path), doc.doc_id
        pages = c.store.pages(doc.doc_id)
        assert [p.page for p in pages] == list(range(1, doc.page_count + 1))
        # the words poppler reads on page k are best matched by what deskbench stored as page k
        texts = {p.page: set(analyze(p.text)) for p in pages}
        for page in {1, doc.page_count, (doc.page_count + 1) // 2}:
            if pages[page - 1].text_source == "ocr":
                continue
            theirs = set(analyze(_pdftotext(path, page)))
            if len(theirs) < 20:
                continue
            overlap = {k: len(theirs & ours) / len(theirs) for k, ours in texts.items()}
            assert overlap[page] > 0.5, (doc.doc_id, page, overlap[page])
            assert overlap[page] == max(overlap.values()), (doc.doc_id, page)


def test_non_english_pages_are_searchable(ingested: tuple[Corpus, IngestSummary]) -> None:
    c, _ = ingested
    # Chinese: a word of the page (Whoosh's: a run of word characters), searched, finds that page
    zh = next(p for p in c.store.pages("issue-67-example.pdf") if re.search(r"[\u4e00-\u9fff]{4}", p.text))
    word = next(w for w in analyze(zh.text) if re.search(r"[\u4e00-\u9fff]", w))
    hits = c.search(word, k=50)
    assert ("issue-67-example.pdf", zh.page) in {(h.document, h.page) for h in hits}
    # French: a word with accents, searched with them (Whoosh keeps accents), in any case
    fr = c.store.page("2023-06-20-PV.pdf", 1)
    assert fr is not None
    accented = next(w for w in re.findall(r"\w+", fr.text) if re.search("[éèàç]", w) and len(w) > 5)
    assert analyze(accented) == (accented.lower(),)
    assert ("2023-06-20-PV.pdf", 1) in {(h.document, h.page) for h in c.search(accented.upper(), k=50)}


def test_reingest_of_public_records_is_a_no_op(public_records: Path, ingested: tuple[Corpus, IngestSummary]) -> None:
    c, first = ingested
    _, again = ingest(c.root, [public_records])
    assert again.files_new == again.files_updated == 0 and again.pages == 0
    assert again.files_unchanged == first.files_ok
    assert {Path(f.file).name for f in again.files_failed} == set(EXPECTED_FAILURES)
