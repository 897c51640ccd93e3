"""Seeded docqa benchmark generator: multi-page PDFs in clusters, questions, manifest (MADQA §2).

`generate_docqa(out, docs=N, questions=M, seed=S)` writes out/pdfs/*.pdf, out/tasks.jsonl and
out/manifest.jsonl; the same arguments give byte-identical files. `validate_docqa(out)` re-checks
a generated collection from its files alone.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from deskbench.tracks.docqa.generate.clusters import build_world
from deskbench.tracks.docqa.generate.facts import Fact
from deskbench.tracks.docqa.generate.inject import plant_injections
from deskbench.tracks.docqa.generate.layouts import render_document
from deskbench.tracks.docqa.generate.manifest import DocQAGenReport, FactRecord, ManifestRecord
from deskbench.tracks.docqa.generate.questions import candidates, select
from deskbench.tracks.docqa.generate.validate import lexical_miss_share, validate_docqa
from deskbench.tracks.docqa.tasks import DocQATask

MIN_DOCS = 8

__all__ = ["DocQAGenReport", "ManifestRecord", "generate_docqa", "lexical_miss_share", "validate_docqa"]


def _fact_record(f: Fact) -> FactRecord:
    return FactRecord(id=f.id, document=f.document, page=f.page, subject=f.subject, attribute=f.attribute,
                      value=f.value, number=f.number, layout=f.layout, scanned=f.scanned, options=list(f.options))


def generate_docqa(out: Path, *, docs: int, questions: int, seed: int, injections: float = 0.0,
                   progress: Callable[[int, int], None] | None = None) -> DocQAGenReport:
    """Write the collection; `progress(done_pages, total_pages)` is called as pages render."""
    if docs < MIN_DOCS:
        raise ValueError(f"docs={docs} is too small: the generator needs at least {MIN_DOCS} documents")
    if questions < 1:
        raise ValueError(f"questions={questions} must be at least 1")
    rng = random.Random(seed)
    world = build_world(rng, docs)
    chosen = select(rng, candidates(world), questions, docs)
    planted = {p.question: p.injection for p in plant_injections(rng, chosen, world.docs, injections)}

    pdf_dir = out / "pdfs"
    pdf_dir.mkdir(parents=True, exist_ok=True)
    total = sum(len(d.pages) for d in world.docs)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    for d in world.docs:
        render_document(pdf_dir / d.name, d.title, d.pages, tick)

    tasks, manifest = [], []
    for n, c in enumerate(chosen, start=1):
        tid = f"gen/{n:04d}"
        inj = planted.get(n - 1)
        tasks.append(DocQATask(id=tid, question=c.question, answer_variants=c.variants, evidence=c.evidence,
                               domain=c.domain, document_category=c.category, injection=inj))
        manifest.append(ManifestRecord(id=tid, kind=c.kind, hop_type=c.hop, facts=[_fact_record(f) for f in c.facts],
                                       needs_vision=bool(c.vision), vision=c.vision,
                                       computation=c.computation, injection_kind=inj.kind if inj else None))
    (out / "tasks.jsonl").write_text("".join(t.model_dump_json(exclude_none=True) + "\n" for t in tasks))
    (out / "manifest.jsonl").write_text("".join(m.model_dump_json(exclude_none=True) + "\n" for m in manifest))

    vision = Counter(v for m in manifest for v in m.vision)
    return DocQAGenReport(
        documents=len(world.docs),
        distractors=sum(d.distractor for d in world.docs),
        pages=total,
        scanned_pages=sum(p.scanned for d in world.docs for p in d.pages),
        questions=len(manifest),
        by_kind=dict(sorted(Counter(m.kind for m in manifest).items())),
        by_hop_type=dict(sorted(Counter(m.hop_type for m in manifest).items())),
        by_vision=dict(sorted(vision.items())),
        multi_hop_share=sum(m.hop_type != "single" for m in manifest) / len(manifest),
        vision_share=sum(m.needs_vision for m in manifest) / len(manifest),
        injected=len(planted),
    )
