"""`deskbench ingest`: PDFs into a corpus (page store + search index + stored copies).

Each file is committed to the page store in its own transaction as soon as its text is out, and
the index is committed every few thousand pages; the store remembers which version the index
holds. A crash or kill therefore loses at most the files in flight, and the next run indexes
what the index missed and extracts only new or changed files (by content hash).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from deskbench.corpus.corpus import Corpus
from deskbench.corpus.creation import is_half_made
from deskbench.corpus.extract import ExtractResult, OcrSettings, extract_pdf
from deskbench.corpus.page_text import PageTextSummary
from deskbench.corpus.store import DocumentRecord, IngestError, PageRecord, PageStore
from deskbench.search.analyzer import ANALYZER_NAME
from deskbench.search.index import IndexWriter, PageIndex, index_analyzer
from deskbench.untrusted import LimitExceeded, ReaderCrashed, run_limited

FLUSH_PAGES = 20_000
FLUSH_SECONDS = 15.0


class FileFailure(BaseModel):
    file: str
    reason: str


class IngestSummary(BaseModel):
    """What `deskbench ingest --json` prints: counts of this run."""

    files_ok: int = 0
    files_failed: list[FileFailure] = Field(default_factory=list)
    pages: int = 0
    pages_ocr: int = 0
    pages_failed: int = 0
    files_new: int = 0
    files_updated: int = 0
    files_unchanged: int = 0
    pages_reindexed: int = 0
    warnings: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    page_text: PageTextSummary | None = None  # --page-text: what the supplied text changed


@dataclass(frozen=True)
class Job:
    source: Path
    doc_id: str
    content_hash: str
    size: int
    stored_path: str  # relative to the corpus root
    replaces: str | None  # content hash of the version being replaced


@dataclass
class Plan:
    jobs: list[Job] = field(default_factory=list)
    unchanged: int = 0
    failures: list[FileFailure] = field(default_factory=list)


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[FileFailure]]:
    """Files named directly are taken as they are; folders are searched for *.pdf recursively."""
    found: list[Path] = []
    failures: list[FileFailure] = []
    for p in paths:
        if p.is_dir():
            found.extend(
                sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() == ".pdf")
            )
        elif p.is_file():
            found.append(p)
        else:
            failures.append(FileFailure(file=str(p), reason="no such file or directory"))
    seen: set[Path] = set()
    unique = []
    for f in found:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(r)
    return unique, failures


def file_hash(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def plan_ingest(corpus: Corpus, paths: Iterable[Path]) -> Plan:
    """Hash every file and decide: unchanged (skip), new/changed (extract), or failed."""
    files, failures = discover(paths)
    plan = Plan(failures=failures)
    claimed: dict[str, Path] = {}
    for path in files:
        doc_id = path.name
        if doc_id in claimed:
            plan.failures.append(FileFailure(
                file=str(path),
                reason=f"duplicate document id {doc_id!r} (also {claimed[doc_id]}); "
                "file names must be unique in a corpus: rename one",
            ))
            continue
        claimed[doc_id] = path
        try:
            digest, size = file_hash(path)
        except OSError as exc:
            plan.failures.append(FileFailure(file=str(path), reason=f"unreadable file ({exc.strerror or exc})"))
            continue
        existing = corpus.store.document(doc_id)
        if existing is not None and existing.content_hash == digest:
            plan.unchanged += 1
            continue
        plan.jobs.append(Job(
            source=path,
            doc_id=doc_id,
            content_hash=digest,
            size=size,
            stored_path=f"docs/{digest}.pdf",
            replaces=existing.content_hash if existing else None,
        ))
    return plan


def _store_copy(corpus: Corpus, job: Job) -> None:
    """Copy the PDF into the corpus under its hash (atomic rename), unless it is already there."""
    target = corpus.root / job.stored_path
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    os.close(fd)
    try:
        shutil.copyfile(job.source, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _IndexFeed:
    """Batches index writes and records in the store what each commit made searchable."""

    def __init__(self, corpus: Corpus, writer: IndexWriter) -> None:
        self.corpus = corpus
        self.writer = writer
        self.pending: list[tuple[str, str]] = []
        self.pending_pages = 0
        self.last_flush = time.monotonic()

    def add(self, doc_id: str, content_hash: str, pages: list[PageRecord]) -> None:
        self.writer.replace_document(doc_id, ((p.page, p.text) for p in pages))
        self.pending.append((doc_id, content_hash))
        self.pending_pages += len(pages)
        if self.pending_pages >= FLUSH_PAGES or time.monotonic() - self.last_flush > FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        self.writer.commit()
        self.corpus.store.mark_indexed(self.pending)
        self.pending, self.pending_pages = [], 0
        self.last_flush = time.monotonic()


ProgressCallback = Callable[[str, int], None]
"""Called once per finished file with its document id and page count."""


BATCH_FILES = 8
BATCH_BYTES = 32 << 20
"""Files extracted by one worker process: a process per file costs ~30 ms, a third of a 100-page
PDF's extraction; a batch that hits a limit is split and its files retried alone."""


def extract_batch(paths: list[str], settings: OcrSettings) -> list[ExtractResult]:
    """In the worker: the PDFs one after the other."""
    return [extract_pdf(path, settings) for path in paths]


def _failed(job: Job, outcome: LimitExceeded | ReaderCrashed) -> ExtractResult:
    if isinstance(outcome, LimitExceeded):
        return ExtractResult(path=str(job.source), error=outcome.about("the PDF").message)
    return ExtractResult(path=str(job.source), error=f"the PDF crashed the extraction process ({outcome.how}); "
                         "repair or re-save it and ingest again")


def _extract_limited(corpus: Corpus, batch: list[Job], settings: OcrSettings) -> list[ExtractResult]:
    """A batch of PDFs' pages from one worker process under the untrusted-file limits (the time
    limit per page: extract_pdf reports progress); a PDF over a limit (a content-stream bomb) or one that crashes pdfium fails
    alone, with the reason, and the ingest goes on."""
    try:
        out: list[ExtractResult] | LimitExceeded | ReaderCrashed = run_limited(
            extract_batch, [str(corpus.root / j.stored_path) for j in batch], settings)
    except ReaderCrashed as exc:
        out = exc
    if isinstance(out, list):
        return out
    if len(batch) > 1:  # find the file to blame: each alone
        return [r for job in batch for r in _extract_limited(corpus, [job], settings)]
    return [_failed(batch[0], out)]


def _batches(jobs: list[Job]) -> list[list[Job]]:
    batches: list[list[Job]] = []
    for job in jobs:
        last = batches[-1] if batches else None
        if last is None or len(last) >= BATCH_FILES or sum(j.size for j in last) + job.size > BATCH_BYTES:
            batches.append([job])
        else:
            last.append(job)
    return batches


def _extract_all(
    corpus: Corpus, jobs: list[Job], settings: OcrSettings, workers: int
) -> Iterable[tuple[Job, ExtractResult]]:
    """Yield extraction results as their batches finish, `workers` batches at a time, each in a
    limited worker process (untrusted/worker.py)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        inflight: dict[Future[list[ExtractResult]], list[Job]] = {}
        queue = list(reversed(_batches(jobs)))
        while queue or inflight:
            # twice as many as run: a worker starts the next batch while this thread stores one
            while queue and len(inflight) < 2 * max(1, workers):
                batch = queue.pop()
                inflight[pool.submit(_extract_limited, corpus, batch, settings)] = batch
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in done:
                yield from zip(inflight.pop(fut), fut.result(), strict=True)


def run_ingest(
    corpus: Corpus,
    plan: Plan,
    settings: OcrSettings,
    workers: int = 1,
    on_file: ProgressCallback | None = None,
) -> IngestSummary:
    started = time.monotonic()
    summary = IngestSummary(files_unchanged=plan.unchanged, files_failed=list(plan.failures))
    for f in plan.failures:
        corpus.store.record_error(IngestError(source_path=f.file, doc_id=Path(f.file).name, content_hash=None, reason=f.reason))
    redo = {j.doc_id for j in plan.jobs}
    backlog = [d for d in corpus.store.unindexed() if d.doc_id not in redo]
    warnings: set[str] = set()
    with corpus.index.writer() as writer:
        feed = _IndexFeed(corpus, writer)
        for doc in backlog:
            pages = corpus.store.pages(doc.doc_id)
            feed.add(doc.doc_id, doc.content_hash, pages)
            summary.pages_reindexed += len(pages)
        for job in plan.jobs:
            _store_copy(corpus, job)
        for job, result in _extract_all(corpus, plan.jobs, settings, workers):
            warnings.update(result.warnings)
            if result.error is not None:
                summary.files_failed.append(FileFailure(file=str(job.source), reason=result.error))
                corpus.store.record_error(IngestError(str(job.source), job.doc_id, job.content_hash, result.error))
                _drop_unreferenced(corpus, job.stored_path)
                if on_file:
                    on_file(job.doc_id, 0)
                continue
            pages = [PageRecord(job.doc_id, p.page, p.text, p.source, p.error) for p in result.pages]
            n_ocr = sum(p.text_source == "ocr" for p in pages)
            n_failed = sum(p.error is not None for p in pages)
            corpus.store.replace_document(
                DocumentRecord(
                    doc_id=job.doc_id,
                    source_path=str(job.source),
                    stored_path=job.stored_path,
                    content_hash=job.content_hash,
                    size_bytes=job.size,
                    page_count=len(pages),
                    pages_ocr=n_ocr,
                    pages_failed=n_failed,
                    ingested_at=corpus.store.now(),
                    indexed_hash=None,
                ),
                pages,
            )
            feed.add(job.doc_id, job.content_hash, pages)
            if job.replaces:
                summary.files_updated += 1
                _drop_unreferenced(corpus, f"docs/{job.replaces}.pdf")
            else:
                summary.files_new += 1
            summary.pages += len(pages)
            summary.pages_ocr += n_ocr
            summary.pages_failed += n_failed
            if on_file:
                on_file(job.doc_id, len(pages))
        feed.flush()
    summary.files_ok = summary.files_new + summary.files_updated + summary.files_unchanged
    summary.warnings = sorted(warnings)
    summary.seconds = round(time.monotonic() - started, 3)
    return summary


def _drop_unreferenced(corpus: Corpus, stored_path: str) -> None:
    if not any(d.stored_path == stored_path for d in corpus.store.documents()):
        (corpus.root / stored_path).unlink(missing_ok=True)


def open_or_create(root: Path) -> Corpus:
    """The corpus to ingest into; a missing or deleted index, or one built by another analyzer
    version, is rebuilt from the page store."""
    if not (root / PageStore.FILENAME).exists() or is_half_made(root):  # a killed creation is rebuilt
        return Corpus.create(root)
    index = root / "index"
    if (index / "meta.json").exists() and index_analyzer(index) != ANALYZER_NAME:
        shutil.rmtree(index)  # built by another analyzer: the page store rebuilds it, not mixed
    if not (index / "meta.json").exists():
        store = PageStore(root / PageStore.FILENAME)
        store.forget_index()
        return Corpus(root, store, PageIndex(index, create=True))
    return Corpus.open(root)
