"""Ingest: bad files, idempotence, replacement, workers, and surviving a kill."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli_json, ingest, require_tool, run_cli, write_text_pdf
from reportlab.pdfgen import canvas

from deskbench.corpus import Corpus


def _bad_files(folder: Path) -> dict[str, str]:
    """Write one file of each kind of breakage; return name -> expected reason fragment."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "zero.pdf").write_bytes(b"")
    (folder / "notes.pdf").write_text("these are meeting notes, not a PDF\n")
    (folder / "garbage.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    c = canvas.Canvas(str(folder / "locked.pdf"), encrypt="s3cret")
    c.drawString(72, 720, "secret budget")
    c.showPage()
    c.save()
    return {
        "zero.pdf": "empty file (0 bytes)",
        "notes.pdf": "not a PDF",
        "garbage.pdf": "malformed PDF",
        "locked.pdf": "encrypted PDF",
    }


def test_bad_files_are_recorded_and_the_rest_goes_on(tmp_path: Path) -> None:
    pdfs = tmp_path / "pdfs"
    expected = _bad_files(pdfs)
    write_text_pdf(pdfs / "sub" / "good.pdf", ["ordinary text about budgets", "second page text"])
    c, summary = ingest(tmp_path / "corpus", [pdfs, tmp_path / "missing.pdf"])
    assert summary.files_ok == 1 and summary.pages == 2
    reasons = {Path(f.file).name: f.reason for f in summary.files_failed}
    assert set(reasons) == set(expected) | {"missing.pdf"}
    for name, fragment in expected.items():
        assert fragment in reasons[name], reasons[name]
        assert "\n" not in reasons[name]
    assert reasons["missing.pdf"] == "no such file or directory"
    # failures are kept in the store too, and the good file is searchable
    stored = {Path(e.source_path).name for e in c.store.errors()}
    assert stored == set(reasons)
    assert [h.document for h in c.search("budgets")] == ["good.pdf"]
    assert not list((tmp_path / "corpus" / "docs").glob("*.tmp*"))
    # failed files leave no stored copy behind
    assert len(list((tmp_path / "corpus" / "docs").glob("*.pdf"))) == 1


def test_json_summary_and_exit_codes(tmp_path: Path) -> None:
    pdfs = tmp_path / "pdfs"
    _bad_files(pdfs)
    proc = run_cli("ingest", str(pdfs), "--corpus", str(tmp_path / "c1"), "--json", "--quiet")
    assert proc.returncode == 2, proc.stderr  # nothing ingested
    data = json.loads(proc.stdout)
    assert data["files_ok"] == 0 and data["pages"] == 0 and data["pages_ocr"] == 0
    assert {Path(f["file"]).name for f in data["files_failed"]} == {"zero.pdf", "notes.pdf", "garbage.pdf", "locked.pdf"}
    assert all(set(f) == {"file", "reason"} for f in data["files_failed"])
    assert "Traceback" not in proc.stderr

    write_text_pdf(pdfs / "good.pdf", ["one page of text"])
    data = cli_json("ingest", str(pdfs), "--corpus", str(tmp_path / "c1"), "--json", "--quiet")
    assert isinstance(data, dict) and data["files_ok"] == 1 and data["pages"] == 1
    assert len(data["files_failed"]) == 4


def test_reingest_of_unchanged_files_does_nothing(tmp_path: Path) -> None:
    for i in range(3):
        write_text_pdf(tmp_path / "pdfs" / f"d{i}.pdf", [f"document {i} page one", f"document {i} page two"])
    c, first = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    assert (first.files_new, first.pages) == (3, 6)
    before = {d.doc_id: d.ingested_at for d in c.documents()}
    db = tmp_path / "corpus" / "pages.sqlite"
    time.sleep(1.1)
    c2, second = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    assert (second.files_ok, second.files_unchanged, second.files_new, second.pages) == (3, 3, 0, 0)
    assert {d.doc_id: d.ingested_at for d in c2.documents()} == before
    assert c2.index.num_pages() == 6
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM pages").fetchone()[0] == 6


def test_changed_file_replaces_its_pages(tmp_path: Path) -> None:
    pdf = tmp_path / "pdfs" / "report.pdf"
    write_text_pdf(pdf, ["the old wording of the report", "old appendix"])
    c, _ = ingest(tmp_path / "corpus", [pdf])
    old_hash = c.store.document("report.pdf").content_hash  # type: ignore[union-attr]
    write_text_pdf(pdf, ["the new wording", "new appendix", "a third page"])
    c, summary = ingest(tmp_path / "corpus", [pdf])
    assert (summary.files_updated, summary.pages) == (1, 3)
    doc = c.document("report.pdf")
    assert doc.page_count == 3 and doc.content_hash != old_hash
    assert c.search("old") == []
    assert {(h.document, h.page) for h in c.search("new")} == {("report.pdf", 1), ("report.pdf", 2)}
    assert [p.page for p in c.store.pages("report.pdf")] == [1, 2, 3]
    assert not (tmp_path / "corpus" / "docs" / f"{old_hash}.pdf").exists()
    assert c.index.num_pages() == 3


def test_duplicate_file_names_are_refused(tmp_path: Path) -> None:
    write_text_pdf(tmp_path / "a" / "same.pdf", ["first version"])
    write_text_pdf(tmp_path / "b" / "same.pdf", ["second version"])
    _, summary = ingest(tmp_path / "corpus", [tmp_path / "a", tmp_path / "b"])
    assert summary.files_ok == 1
    assert "duplicate document id 'same.pdf'" in summary.files_failed[0].reason


def test_workers_give_the_same_corpus(tmp_path: Path) -> None:
    for i in range(6):
        write_text_pdf(tmp_path / "pdfs" / f"w{i}.pdf", [f"worker test {i} alpha", f"worker test {i} beta"])
    one, s1 = ingest(tmp_path / "c1", [tmp_path / "pdfs"], workers=1)
    two, s2 = ingest(tmp_path / "c2", [tmp_path / "pdfs"], workers=2)
    assert s1.pages == s2.pages == 12
    texts = lambda c: {(p.doc_id, p.page): p.text for d in c.documents() for p in c.store.pages(d.doc_id)}  # noqa: E731
    assert texts(one) == texts(two)
    assert one.search("alpha", k=10) == two.search("alpha", k=10)


def _doc_count(db: Path) -> int:
    try:
        con = sqlite3.connect(db, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_kill_mid_ingest_leaves_a_usable_corpus_that_rerun_completes(tmp_path: Path) -> None:
    require_tool("tesseract")
    words = ["walnut", "harbor", "meadow", "copper", "lantern", "orchard", "granite", "falcon",
             "willow", "saddle", "ember", "quartz"]  # words OCR reads reliably (unlike 0 vs O)
    n = len(words)
    for i, word in enumerate(words):
        write_text_pdf(tmp_path / "pdfs" / f"k{i:02d}.pdf", [f"killtest {word} page"])
    corpus = tmp_path / "corpus"
    args = [sys.executable, "-m", "deskbench.cli", "ingest", str(tmp_path / "pdfs"), "--corpus", str(corpus),
            "--ocr", "always", "--quiet"]  # OCR makes each file slow enough to kill mid-way
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while _doc_count(corpus / "pages.sqlite") < 3:
        assert proc.poll() is None, "ingest finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = _doc_count(corpus / "pages.sqlite")
    assert 3 <= done < n
    con = sqlite3.connect(corpus / "pages.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    c = Corpus.open(corpus)
    assert len(c.documents()) == done
    c.search("killtest")  # usable: no error, whatever the index held at the kill
    c.close()

    c, summary = ingest(corpus, [tmp_path / "pdfs"], ocr="always")
    assert summary.files_unchanged == done and summary.files_new == n - done
    assert len(c.documents()) == n and c.store.unindexed() == []
    assert c.index.num_pages() == n
    for i, word in enumerate(words):
        assert [h.document for h in c.search(word)] == [f"k{i:02d}.pdf"]


def test_index_lagging_the_store_is_completed_on_the_next_run(tmp_path: Path) -> None:
    write_text_pdf(tmp_path / "pdfs" / "lag.pdf", ["lagging index text"])
    c, _ = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    # Simulate a crash between the page-store commit and the index commit.
    with c.index.writer() as w:
        w.delete_document("lag.pdf")
    c.store._conn().execute("UPDATE documents SET indexed_hash = NULL")
    assert c.search("lagging") == []
    info = cli_json("info", "--corpus", str(tmp_path / "corpus"), "--json")
    assert info["documents_not_indexed"] == ["lag.pdf"]  # type: ignore[index]
    c, summary = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    assert summary.files_unchanged == 1 and summary.pages_reindexed == 1
    assert [h.document for h in c.search("lagging")] == ["lag.pdf"]


def test_deleted_index_is_rebuilt_from_the_page_store(tmp_path: Path) -> None:
    import shutil

    write_text_pdf(tmp_path / "pdfs" / "r.pdf", ["rebuild me please", "page two"])
    ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    shutil.rmtree(tmp_path / "corpus" / "index")
    proc = run_cli("search", "--corpus", str(tmp_path / "corpus"), "rebuild")
    assert proc.returncode == 2 and "run 'deskbench ingest' to build it" in proc.stderr
    c, summary = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    assert summary.files_unchanged == 1 and summary.pages_reindexed == 2
    assert [h.document for h in c.search("rebuild")] == ["r.pdf"]


def test_corpus_dir_that_is_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "thesis.tex").write_text("x")
    write_text_pdf(tmp_path / "x.pdf", ["text"])
    proc = run_cli("ingest", str(tmp_path / "x.pdf"), "--corpus", str(tmp_path / "busy"))
    assert proc.returncode == 2
    assert "is not a deskbench corpus" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_unreadable_page_is_recorded_and_the_rest_of_the_file_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deskbench.corpus.extract as extract

    pdf = write_text_pdf(tmp_path / "three.pdf", ["page one text here", "page two text here", "page three text here"])
    real = extract._text_layer

    def flaky(page):  # fault injection: pdfium fails on the second page's text layer
        text = real(page)
        if "two" in text:
            raise RuntimeError("FPDFText_LoadPage failed")
        return text

    monkeypatch.setattr(extract, "_text_layer", flaky)
    result = extract.extract_pdf(str(pdf), extract.OcrSettings(mode="never"))
    assert result.error is None
    assert [p.error for p in result.pages] == [None, "text layer unreadable (FPDFText_LoadPage failed)", None]
    assert "three" in result.pages[2].text


def test_missing_stored_copy_is_a_clear_error(tmp_path: Path) -> None:
    write_text_pdf(tmp_path / "pdfs" / "gone.pdf", ["text"])
    c, _ = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    (c.root / c.document("gone.pdf").stored_path).unlink()
    proc = run_cli("page", "--corpus", str(c.root), "gone.pdf", "1", "--output", str(tmp_path / "x.png"))
    assert proc.returncode == 2 and "is missing; ingest" in proc.stderr and "Traceback" not in proc.stderr
