"""`deskbench init DIR --track docqa`: a docqa task set over the user's own PDFs (the core's
init command reaches it through Track.scaffolder; helpers in deskbench/scaffold.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deskbench.contract.cli import Scaffolded
from deskbench.errors import UserError
from deskbench.scaffold import TODO, found_files, slug, unique, write_readme
from deskbench.tasks.jsonl import write_jsonl


def first_words(text: str, words: int = 12) -> str:
    found = text.split()
    return " ".join(found[:words]) + (" ..." if len(found) > words else "")


def pick_pages(texts: dict[int, str], count: int = 3) -> list[int]:
    """Up to `count` pages spread over the document (first, middle, last), preferring pages with
    text: a placeholder on a blank page would be a poor start for a question."""
    with_text = [p for p in sorted(texts) if texts[p].strip()] or sorted(texts)
    if len(with_text) <= count:
        return with_text
    picks = [with_text[0], with_text[len(with_text) // 2], with_text[-1]][:count]
    return sorted(dict.fromkeys(picks))


def scaffold_docqa(dest: Path, source: Path | None, *, workers: int = 1,
                   on_file: Callable[[str], None] | None = None) -> Scaffolded:
    """Ingest the PDFs into dest/corpus (the ingest command's code) and write a few TODO questions
    per document, each citing a page the corpus holds."""
    from deskbench.corpus.extract import OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.docqa.tasks import DocQATask, Evidence

    pdfs = found_files(source if source is not None else bundled_dir() / "docqa" / "pdfs", (".pdf",), "PDFs",
                  "give a folder with .pdf files (searched recursively)")
    corpus = open_or_create(dest / "corpus")
    plan = plan_ingest(corpus, pdfs)
    summary = run_ingest(corpus, plan, OcrSettings(), workers=workers,
                         on_file=(lambda doc, _n: on_file(doc)) if on_file else None)
    warnings = [f"{f.file}: not ingested ({f.reason})" for f in summary.files_failed]
    tasks: list[DocQATask] = []
    ids: set[str] = set()
    for doc in corpus.documents():
        texts = dict(zip(range(1, doc.page_count + 1),
                         corpus.page_texts([(doc.doc_id, p) for p in range(1, doc.page_count + 1)]), strict=True))
        for page in pick_pages(texts):
            tasks.append(DocQATask(
                id=unique(f"{slug(doc.doc_id)}/p{page}", ids),
                question=(f"{TODO}: write a question answered on page {page} of {doc.doc_id} "
                          f"(the page begins: {first_words(texts[page])!r})"),
                answer_variants=[[f"{TODO}: the answer"]],
                evidence=[Evidence(document=doc.doc_id, page=page)],
            ))
    if not tasks:
        raise UserError(f"--from {source}: none of the PDFs could be read ({'; '.join(warnings)}); "
                        "give PDFs that open")
    write_jsonl(dest / "tasks.jsonl", tasks)
    command = ["deskbench", "run", "--tasks", str(dest / "tasks.jsonl"), "--corpus", str(dest / "corpus"),
               "--agent", "lexical", "--out", str(dest / "runs" / "lexical")]
    write_readme(dest, "docqa", [
        "corpus/      your PDFs, ingested (deskbench ingest corpus/ MORE.pdf adds more)",
        "tasks.jsonl  one question a line, 3 per document; edit each TODO:",
        "             question, answer_variants (every acceptable answer), evidence (the pages",
        "             that answer it; pages are 1-based)",
    ], command, "The lexical agent needs no model or key; add --agent bm25-agent --model ... for a model.")
    return Scaffolded(tasks=len(tasks), files=summary.files_ok, next_command=command, warnings=warnings)
