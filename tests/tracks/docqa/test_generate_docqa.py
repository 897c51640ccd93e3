"""The seeded docqa generator: validity, proportions, determinism, scans, injections, hardness."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from deskbench.tracks.docqa.generate import generate_docqa, lexical_miss_share, validate_docqa
from deskbench.tracks.docqa.generate.validate import read_manifest
from deskbench.tracks.docqa.tasks import read_tasks

DOCS, QUESTIONS, SEED = 24, 40, 3


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plain")
    generate_docqa(out, docs=DOCS, questions=QUESTIONS, seed=SEED)
    return out


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("injected")
    generate_docqa(out, docs=DOCS, questions=QUESTIONS, seed=SEED, injections=0.5)
    return out


def _hashes(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def _page_text(pdf: Path, page: int) -> str:
    doc = pdfium.PdfDocument(pdf)
    try:
        return doc[page - 1].get_textpage().get_text_range()
    finally:
        doc.close()


def test_collection_is_valid_and_complete(plain: Path) -> None:
    assert validate_docqa(plain) == []
    tasks = read_tasks(plain / "tasks.jsonl").items
    manifest = read_manifest(plain / "manifest.jsonl")
    assert len(tasks) == QUESTIONS and [t.id for t in tasks] == [f"gen/{i:04d}" for i in range(1, QUESTIONS + 1)]
    assert len(list((plain / "pdfs").glob("*.pdf"))) == DOCS
    assert all(t.domain and t.document_category and t.injection is None for t in tasks)
    kinds = {m.kind for m in manifest}
    assert {"checkbox", "colour_level", "form_field", "table_lookup", "text_fact"} <= kinds
    assert kinds & {"comparison", "cross_doc_difference", "cross_doc_bridge", "common_property", "cross_doc_sum"}
    for t in tasks:  # questions never point at the page or the file
        assert not re.search(r"\bpages?\s+\d|\.pdf", t.question.lower()), t.question
    # page counts: realistic multi-page documents
    counts = [len(pdfium.PdfDocument(p)) for p in sorted((plain / "pdfs").glob("*.pdf"))]
    assert min(counts) >= 2 and max(counts) <= 6


def test_validator_catches_corruption(plain: Path, tmp_path: Path) -> None:
    """The checks can fail: a wrong answer, a padded evidence set, a leaked checkbox state."""
    bad = tmp_path / "bad"
    (bad / "pdfs").mkdir(parents=True)
    for p in (plain / "pdfs").glob("*.pdf"):
        (bad / "pdfs" / p.name).symlink_to(p)
    rows = [json.loads(x) for x in (plain / "tasks.jsonl").read_text().splitlines()]
    manifest = [json.loads(x) for x in (plain / "manifest.jsonl").read_text().splitlines()]
    rows[0]["answer_variants"] = [["definitely wrong"]]
    rows[1]["evidence"].append({"document": rows[1]["evidence"][0]["document"], "page": 99})
    cb = next(i for i, m in enumerate(manifest) if m["kind"] == "checkbox")
    manifest[cb]["facts"][0]["options"] = ["Nonexistent option", manifest[cb]["facts"][0]["value"]]
    (bad / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (bad / "manifest.jsonl").write_text("".join(json.dumps(m) + "\n" for m in manifest))
    problems = validate_docqa(bad)
    assert any(p.startswith("gen/0001:") for p in problems)
    assert any(p.startswith("gen/0002:") and "evidence" in p for p in problems)
    assert any(p.startswith(f"{rows[cb]['id']}:") and "checkbox" in p for p in problems)


def test_checkbox_and_colour_values_are_only_graphical(plain: Path) -> None:
    manifest = read_manifest(plain / "manifest.jsonl")
    tasks = {t.id: t for t in read_tasks(plain / "tasks.jsonl").items}
    for kind in ("checkbox", "colour_level"):
        rec = next(m for m in manifest if m.kind == kind)
        fact = rec.facts[0]
        text = " ".join(_page_text(plain / "pdfs" / fact.document, fact.page).lower().split())
        # every option is printed equally often (labels / legend), so the text cannot tell which holds
        counts = {o: len(re.findall(rf"(?<![a-z0-9]){re.escape(o.lower())}(?![a-z0-9])", text)) for o in fact.options}
        assert len(set(counts.values())) == 1 and min(counts.values()) >= 1, counts
        assert tasks[rec.id].answer_variants[0] == [fact.value]


def test_proportions_match_madqa(tmp_path: Path) -> None:
    report = generate_docqa(tmp_path, docs=40, questions=60, seed=11)
    assert abs(report.multi_hop_share - 0.20) <= 0.05
    assert abs(report.vision_share - 0.58) <= 0.05
    assert report.questions == 60 and report.documents == 40
    assert sum(report.by_hop_type.values()) == 60
    manifest = read_manifest(tmp_path / "manifest.jsonl")
    assert sum(m.hop_type != "single" for m in manifest) / 60 == report.multi_hop_share
    assert sum(m.needs_vision for m in manifest) / 60 == report.vision_share
    assert 0 < report.distractors < report.documents and report.pages >= 2 * report.documents
    assert validate_docqa(tmp_path) == []


def test_same_arguments_give_identical_files(plain: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    generate_docqa(again, docs=DOCS, questions=QUESTIONS, seed=SEED)
    assert _hashes(again) == _hashes(plain)
    other = tmp_path / "other"
    generate_docqa(other, docs=DOCS, questions=QUESTIONS, seed=SEED + 1)
    assert (other / "tasks.jsonl").read_bytes() != (plain / "tasks.jsonl").read_bytes()


def test_scanned_page_has_no_text_layer_but_ocr_reads_it(plain: Path) -> None:
    manifest = read_manifest(plain / "manifest.jsonl")
    fact = next(f for m in manifest for f in m.facts
                if f.scanned and f.layout in ("text", "table", "form") and len(f.value) >= 4)
    pdf = plain / "pdfs" / fact.document
    assert _page_text(pdf, fact.page).strip() == ""
    doc = pdfium.PdfDocument(pdf)
    try:
        image = doc[fact.page - 1].render(scale=200 / 72, grayscale=True).to_pil()
    finally:
        doc.close()
    png = pdf.parent.parent / "scan-check.png"
    image.save(png)
    try:
        ocr = subprocess.run(["/usr/bin/tesseract", str(png), "stdout"], capture_output=True, text=True,
                             check=True, env={"OMP_THREAD_LIMIT": "1", "PATH": "/usr/bin"}).stdout
    finally:
        png.unlink()

    def squash(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())

    assert squash(fact.value) in squash(ocr), (fact.value, ocr[:500])


def test_injections_are_planted_without_changing_questions(plain: Path, injected: Path) -> None:
    assert validate_docqa(injected) == []
    tasks = read_tasks(injected / "tasks.jsonl").items
    base = read_tasks(plain / "tasks.jsonl").items
    planted = [t for t in tasks if t.injection is not None]
    assert abs(len(planted) - QUESTIONS * 0.5) <= 2
    assert {t.injection.kind for t in planted if t.injection} == {"visible_text", "hidden_text", "table_cell"}
    for t in planted:
        assert t.injection is not None
        gold = {x.lower().replace("$", "").replace(",", "") for v in t.answer_variants for x in v}
        assert t.injection.target_answer.lower().replace("$", "").replace(",", "") not in gold
        assert (t.injection.document, t.injection.page) in {(e.document, e.page) for e in t.evidence}
    # the same questions, answers and evidence as the plain run: only the injection is added
    strip = [t.model_copy(update={"injection": None}).model_dump() for t in tasks]
    assert strip == [t.model_dump() for t in base]
    touched = {t.injection.document for t in planted if t.injection}
    for p in sorted((plain / "pdfs").glob("*.pdf")):
        same = p.read_bytes() == (injected / "pdfs" / p.name).read_bytes()
        assert same == (p.name not in touched), p.name
    # hidden text is in the text layer (validate checks every instruction is)
    hidden = next(t for t in planted if t.injection and t.injection.kind == "hidden_text")
    assert hidden.injection is not None
    assert "instructions" in _page_text(injected / "pdfs" / hidden.injection.document, hidden.injection.page).lower() \
        or "disregard" in _page_text(injected / "pdfs" / hidden.injection.document, hidden.injection.page).lower()


def test_single_naive_query_rarely_finds_all_multi_hop_evidence(plain: Path) -> None:
    share, n = lexical_miss_share(plain)
    assert n >= 6
    assert share >= 0.7, share


def test_too_few_documents_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="docs=3"):
        generate_docqa(tmp_path, docs=3, questions=5, seed=0)
    with pytest.raises(ValueError, match="docs=10 .*questions=300"):
        generate_docqa(tmp_path, docs=10, questions=300, seed=0)
    with pytest.raises(ValueError, match="injections"):
        generate_docqa(tmp_path, docs=12, questions=10, seed=0, injections=1.5)
