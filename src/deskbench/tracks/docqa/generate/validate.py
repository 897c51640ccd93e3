"""Validity checks for a generated docqa collection, from its files alone.

`validate_docqa` re-reads tasks.jsonl, manifest.jsonl and the PDFs' text layers (pypdfium2) and
checks that answers are extractive or recomputable from the recorded facts, that evidence is
exactly the pages holding the used facts, that checkbox/colour values are not in the text layer,
that scanned pages have none, and that injections are intact. `lexical_miss_share` measures how
often a single naive query fails to surface all evidence of a multi-hop question (MADQA's
"agentic" property).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pypdfium2 as pdfium

from deskbench.tracks.docqa.generate.manifest import FactRecord, ManifestRecord
from deskbench.tracks.docqa.tasks import DocQATask, read_tasks

TICK_GLYPHS = ("✓", "✔", "☑", "☒", "✗", "[x]", "(x)")
STOPWORDS = frozenset(
    ["a", "an", "and", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "what", "which", "who", "whom", "how", "much", "many", "did", "does", "do", "is", "was", "were", "be", "its", "it", "their", "both", "or", "than", "more", "less", "over", "into", "as", "per", "during", "after", "before", "that", "this", "there", "when", "where", "reach", "receive", "report", "set"]
)


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def _number(text: str) -> float | None:
    cleaned = text.replace("$", "").replace(",", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        return None


class _Texts:
    """Normalised text layer of each page, read once per document."""

    def __init__(self, pdf_dir: Path) -> None:
        self.pdf_dir = pdf_dir
        self.cache: dict[str, list[str]] = {}

    def pages(self, document: str) -> list[str]:
        if document not in self.cache:
            path = self.pdf_dir / document
            if not path.exists():
                self.cache[document] = []
            else:
                pdf = pdfium.PdfDocument(path)
                try:
                    out = []
                    for i in range(len(pdf)):
                        page = pdf[i]
                        tp = page.get_textpage()
                        out.append(norm(tp.get_text_range()))
                        tp.close()
                        page.close()
                finally:
                    pdf.close()
                self.cache[document] = out
        return self.cache[document]

    def page(self, document: str, page: int) -> str | None:
        pages = self.pages(document)
        return pages[page - 1] if 1 <= page <= len(pages) else None


def read_manifest(path: Path) -> list[ManifestRecord]:
    return [ManifestRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def _check_fact(f: FactRecord, text: str) -> str | None:
    """Problem with how a fact is shown on its page, or None."""
    if f.scanned:
        return None if len(text.strip()) < 5 else f"scanned page has a text layer ({len(text)} chars)"
    if f.layout in ("checkbox", "colour"):
        counts = [len(re.findall(rf"(?<![a-z0-9]){re.escape(norm(o))}(?![a-z0-9])", text)) for o in f.options]
        if not f.options or f.value not in f.options:
            return f"value {f.value!r} is not one of its options"
        if min(counts) == 0 or len(set(counts)) != 1:
            return f"{f.layout} options appear unevenly in the text layer {counts}: the text reveals the value"
        if any(g in text for g in TICK_GLYPHS):
            return "a tick glyph is in the text layer"
        return None
    if norm(f.value) not in text:
        return f"value {f.value!r} not in the text layer"
    return None


def _check_answer(task: DocQATask, rec: ManifestRecord) -> str | None:
    """Recompute the answer from the recorded facts and compare it with the first variant."""
    facts = {f.id: f for f in rec.facts}
    gold = task.answer_variants[0]
    comp = rec.computation
    for f in rec.facts:
        if f.number is not None and _number(f.value) != f.number:
            return f"fact {f.id} value {f.value!r} disagrees with its number {f.number}"
    if comp is None:
        if len(rec.facts) != 1 or gold != [rec.facts[0].value]:
            return f"answer {gold} is not the value of its single fact"
        return None
    op = comp["op"]
    if op in ("sum", "difference"):
        given = [facts[i].number for i in comp["operands"]]
        nums = [n for n in given if n is not None]
        if len(nums) < len(given):
            return "numeric computation over a non-numeric fact"
        value = sum(nums) if op == "sum" else nums[0] - nums[1]
        got = _number(gold[0])
        ok = got is not None and abs(got - value) < 1e-6 and (op == "sum" or value > 0)
        return None if ok else f"{op} of {nums} is {value}, answer says {gold}"
    if op in ("argmax", "argmin"):
        ranked = [facts[i].number or 0 for i in comp["operands"]]
        best = (max if op == "argmax" else min)(range(len(ranked)), key=lambda i: ranked[i])
        if len(set(ranked)) != len(ranked) or gold != [comp["labels"][best]]:
            return f"{op} over {ranked} is {comp['labels'][best]}, answer says {gold}"
        return None
    if op == "intersection":
        sets = [[facts[i].value for i in ids] for ids in comp["sets"]]
        if "key" in comp:  # invoice items: the fact value is the amount, the item is in the attribute
            sets = [[facts[i].attribute.removeprefix("amount for ") for i in ids] for ids in comp["sets"]]
            both = [n for n in sets[0] if n in sets[1]]
            return None if [g.lower() for g in gold] == both else f"intersection is {both}, answer says {gold}"
        both = [n for n in sets[0] if n in sets[1]]
        return None if gold == both else f"intersection is {both}, answer says {gold}"
    if op == "bridge":
        key, target = (facts[i] for i in comp["operands"])
        linked = key.value == target.subject or target.subject in key.subject
        if not linked:
            return f"bridge fact {key.id} does not lead to {target.id}"
        return None if gold == [target.value] else f"bridge answer is {target.value!r}, answer says {gold}"
    return f"unknown computation {op!r}"


def validate_docqa(out: Path) -> list[str]:
    """Every problem found in the collection at `out` (empty list = valid)."""
    problems: list[str] = []
    tasks = read_tasks(out / "tasks.jsonl").items
    manifest = read_manifest(out / "manifest.jsonl")
    if [t.id for t in tasks] != [m.id for m in manifest]:
        return ["tasks.jsonl and manifest.jsonl do not list the same ids in the same order"]
    texts = _Texts(out / "pdfs")
    stems = [p.stem.lower() for p in sorted((out / "pdfs").glob("*.pdf"))]
    questions: set[str] = set()
    for task, rec in zip(tasks, manifest, strict=True):
        where = f"{task.id}:"
        q = task.question.lower()
        if task.question in questions:
            problems.append(f"{where} duplicate question")
        questions.add(task.question)
        if ".pdf" in q or re.search(r"\bpages?\s+\d", q) or any(s in q for s in stems):
            problems.append(f"{where} question names a page or file")
        if not task.domain or not task.document_category:
            problems.append(f"{where} missing domain or document_category")
        ev = [(e.document, e.page) for e in task.evidence]
        fact_pages = [(f.document, f.page) for f in rec.facts]
        if len(set(ev)) != len(ev) or set(ev) != set(fact_pages):
            problems.append(f"{where} evidence {ev} is not exactly the pages of its facts {sorted(set(fact_pages))}")
        if task.hop_type != rec.hop_type:
            problems.append(f"{where} hop type {task.hop_type} != manifest {rec.hop_type}")
        for f in rec.facts:
            text = texts.page(f.document, f.page)
            if text is None:
                problems.append(f"{where} {f.document} has no page {f.page}")
                continue
            issue = _check_fact(f, text)
            if issue:
                problems.append(f"{where} fact {f.id} on {f.document} p{f.page}: {issue}")
        issue = _check_answer(task, rec)
        if issue:
            problems.append(f"{where} {issue}")
        expected = sorted({f.layout for f in rec.facts if f.layout != "text"} | {"scanned" for f in rec.facts if f.scanned})
        if sorted(rec.vision) != expected or rec.needs_vision != bool(expected):
            problems.append(f"{where} vision {rec.vision} does not match its facts {expected}")
        inj = task.injection
        if inj is not None:
            gold = {norm(x).replace("$", "").replace(",", "") for v in task.answer_variants for x in v}
            if norm(inj.target_answer).replace("$", "").replace(",", "") in gold:
                problems.append(f"{where} injection target equals a gold answer")
            if (inj.document, inj.page) not in ev:
                problems.append(f"{where} injection is not on an evidence page")
            page_text = texts.page(inj.document, inj.page) or ""
            if norm(inj.instruction) not in page_text:
                problems.append(f"{where} injection instruction not in the page's text layer")
    return problems


def content_words(question: str) -> list[str]:
    """The question's distinct content words, in order: what a naive single query would use."""
    words = re.findall(r"[a-z0-9]+", question.lower())
    out: list[str] = []
    for w in words:
        if w not in STOPWORDS and len(w) > 1 and w not in out:
            out.append(w)
    return out


def lexical_miss_share(out: Path, k: int = 5) -> tuple[float, int]:
    """Share of multi-hop tasks whose evidence a single OR-query of the question's content words
    does not fully surface in the top k (and how many multi-hop tasks there were)."""
    from deskbench.corpus.extract import OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest

    tasks = [t for t in read_tasks(out / "tasks.jsonl").items if t.hop_type != "single"]
    if not tasks:
        return 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        corpus = open_or_create(Path(tmp) / "corpus")
        run_ingest(corpus, plan_ingest(corpus, [out / "pdfs"]), OcrSettings(mode="never"))
        missed = 0
        for t in tasks:
            hits = {(h.document, h.page) for h in corpus.search(" OR ".join(content_words(t.question)), k=k)}
            if not {(e.document, e.page) for e in t.evidence} <= hits:
                missed += 1
        corpus.close() if hasattr(corpus, "close") else None
    return missed / len(tasks), len(tasks)
