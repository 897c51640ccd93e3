"""MADQA B.2 layout-element density (Eq. 7-8): PDFs drawn here with known elements (text lines, a
large-type title, images, ruled boxes, check boxes, a text field, a link), counted by the pdfium
fallback as built, the densities per category and domain and their z-scores worked out by hand,
`deskbench analyse layout` end to end (JSON, PNG, the fallback named), and the detector hook."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from conftest import ingest, run_cli
from PIL import Image
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

from deskbench.tracks.docqa.analysis.layout_density import (
    PDF_ELEMENTS,
    PdfObjects,
    density_table,
    layout_density,
)
from deskbench.tracks.docqa.tasks import DocQATask, Evidence


def _image() -> ImageReader:
    data = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(data, "PNG")
    data.seek(0)
    return ImageReader(data)


def _pdfs(folder: Path) -> Path:
    """forms.pdf: 1 page, a 20pt title and 2 body lines, 3 ruled boxes, 2 check boxes, a text field, a
    link. photos.pdf: page 1 a title, 1 body line, 2 images; page 2 three body lines, 1 image.
    plain.pdf: 1 page of 4 body lines (no question cites it)."""
    folder.mkdir(parents=True)
    c = canvas.Canvas(str(folder / "forms.pdf"), pagesize=LETTER)
    c.setFont("Helvetica-Bold", 20)
    c.drawString(72, 700, "Application form")
    c.setFont("Helvetica", 10)
    c.drawString(72, 670, "Fill in every field of this form please.")
    c.drawString(72, 650, "Tick the boxes that apply to your case.")
    for y in (600, 560, 520):
        c.rect(72, y, 200, 20)
    c.acroForm.checkbox(name="a", x=300, y=600, size=12)
    c.acroForm.checkbox(name="b", x=300, y=560, size=12)
    c.acroForm.textfield(name="t", x=300, y=520, width=100, height=18)
    c.linkURL("https://example.org", (72, 480, 200, 495), relative=0, thickness=0)
    c.showPage()
    c.save()
    c = canvas.Canvas(str(folder / "photos.pdf"), pagesize=LETTER)
    c.setFont("Helvetica-Bold", 20)
    c.drawString(72, 700, "Class of 1998")
    c.setFont("Helvetica", 10)
    c.drawString(72, 670, "Our students at the spring picnic by the lake.")
    c.drawImage(_image(), 72, 400, 100, 100)
    c.drawImage(_image(), 200, 400, 100, 100)
    c.showPage()
    c.setFont("Helvetica", 10)
    for i, y in enumerate((700, 680, 660)):
        c.drawString(72, y, f"Line {i} of the yearbook page about the team.")
    c.drawImage(_image(), 72, 400, 100, 100)
    c.showPage()
    c.save()
    c = canvas.Canvas(str(folder / "plain.pdf"), pagesize=LETTER)
    c.setFont("Helvetica", 10)
    for i, y in enumerate((700, 680, 660, 640)):
        c.drawString(72, y, f"Settlement clause number {i} reads as follows.")
    c.showPage()
    c.save()
    return folder


TASKS = [
    DocQATask(id="q1", question="Which boxes?", answer_variants=[["a"]], evidence=[Evidence(document="forms.pdf", page=1)],
              domain="Government", document_category="Form"),
    DocQATask(id="q2", question="Which class?", answer_variants=[["1998"]],
              evidence=[Evidence(document="photos.pdf", page=1)], domain="Education", document_category="Yearbook"),
    DocQATask(id="q3", question="Which picnic?", answer_variants=[["spring"]],
              evidence=[Evidence(document="photos.pdf", page=2)], domain="Education", document_category="Yearbook"),
]
ZERO = dict.fromkeys(PDF_ELEMENTS, 0)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layout")
    c, summary = ingest(root / "corpus", [_pdfs(root / "pdfs")])
    assert summary.files_ok == 3
    c.close()
    (root / "tasks.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    return root / "corpus"


def test_the_fallback_counts_what_was_drawn(corpus_dir: Path) -> None:
    stored = {p.name: p for p in (corpus_dir.parent / "pdfs").glob("*.pdf")}
    counter = PdfObjects()
    assert counter.count_document(stored["forms.pdf"], 1, lambda n: None) == [
        {**ZERO, "text line": 3, "title run": 1, "vector path": 3, "checkbox": 2, "form field": 1, "link": 1}]
    assert counter.count_document(stored["photos.pdf"], 2, lambda n: None) == [
        {**ZERO, "text line": 2, "title run": 1, "image": 2}, {**ZERO, "text line": 3, "image": 1}]


def test_density_and_z_by_hand(corpus_dir: Path) -> None:
    from deskbench.corpus.corpus import Corpus

    corpus = Corpus.open(corpus_dir)
    try:
        report = layout_density(TASKS, corpus, PdfObjects(), fallback="test")
    finally:
        corpus.close()
    assert (report.documents, report.pages, report.unread) == (3, 4, [])
    table = report.by_category
    rows = {g.name: g for g in table.groups}
    assert [g.name for g in table.groups] == ["Yearbook", "Form", "(no question)"]  # by pages; uncited last
    assert (rows["Yearbook"].docs, rows["Yearbook"].pages) == (1, 2)
    # Eq. 7, text lines: Form 3/1, Yearbook (2 + 3)/2 = 2.5, uncited 4/1
    assert [rows[n].density["text line"] for n in ("Form", "Yearbook", "(no question)")] == [3.0, 2.5, 4.0]
    # Eq. 8, images: d = 0, 1.5, 0 -> mu 0.5, sigma sqrt((0.25 + 1 + 0.25) / 3) = sqrt(0.5)
    assert table.mean["image"] == pytest.approx(0.5) and table.sd["image"] == pytest.approx(math.sqrt(0.5))
    assert rows["Yearbook"].z["image"] == pytest.approx(math.sqrt(2))
    assert rows["Form"].z["image"] == pytest.approx(-0.5 / math.sqrt(0.5))
    # check boxes: d = 2, 0, 0 -> mu 2/3, sigma sqrt(((4/3)^2 + 2 (2/3)^2) / 3) = sqrt(8/9); Form z = sqrt(2)
    assert rows["Form"].z["checkbox"] == pytest.approx(math.sqrt(2))
    assert rows["Yearbook"].z["checkbox"] == pytest.approx(-(2 / 3) / math.sqrt(8 / 9))
    assert all(g.z["shading"] == 0.0 for g in table.groups)  # sigma 0: every group at the mean
    # by domain the same documents fall in Government / Education: the same numbers under other names
    assert {g.name: g.density for g in report.by_domain.groups} == {
        {"Form": "Government", "Yearbook": "Education"}.get(g.name, g.name): g.density for g in table.groups}


def test_density_table_takes_any_detectors_counts() -> None:
    """The hook: a detector's own element names (e.g. DocLayout-YOLO's classes) go straight through."""
    pages = {"a.pdf": [{"table": 2}, {"table": 0, "figure": 1}], "b.pdf": [{"table": 1}]}
    table = density_table(pages, {"a.pdf": "Budget", "b.pdf": "Budget"}, "category")
    assert table.elements == ["figure", "table"]
    [budget] = table.groups
    assert budget.density == {"figure": pytest.approx(1 / 3), "table": pytest.approx(1.0)}
    assert budget.z == {"figure": 0.0, "table": 0.0}  # one group: sigma 0


def test_analyse_layout_end_to_end(corpus_dir: Path, tmp_path: Path) -> None:
    tasks = corpus_dir.parent / "tasks.jsonl"
    out, plot = tmp_path / "layout.json", tmp_path / "layout.png"
    proc = run_cli("analyse", "layout", "--tasks", str(tasks), "--corpus", str(corpus_dir), "--output", str(out),
                   "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["detector"].startswith("PDF objects via pdfium (fallback")
    assert report["fallback"].startswith("DocLayout-YOLO is not used")
    assert report["counts"]["checkbox"] == PDF_ELEMENTS["checkbox"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "layout elements from PDF objects via pdfium (fallback" in proc.stderr
    assert "category Form (1 docs, 1 pages): most above the mean: checkbox 2.00/page (z +1.41)" in proc.stderr
    missing = run_cli("analyse", "layout", "--tasks", str(tasks), "--corpus", str(tmp_path / "nope"), "--json")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
