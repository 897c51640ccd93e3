"""`deskbench fetch madqa`: MADQA (Hugging Face OxRML/MADQA) from the dataset to a run's inputs.

The dataset (gated: its terms are accepted on the hub) holds the questions in splits train, dev
and test (`id, question, answer_variants, evidence, document_category, domain`) and, in its
`documents` configuration, a `links` split mapping each PDF (`document`, its file name) to the
`url` it is downloaded from (DocumentCloud); the official examples/download_pdfs.py and the
baselines' utils.py read it so. This writes, under --out DIR:

    DIR/<split>.jsonl           the split's rows as deskbench docqa tasks (the official ids kept)
    DIR/pdfs/                   the PDFs, with manifest.json (size and sha256 of each)
    DIR/failed_downloads.jsonl  the PDFs that could not be had, with the reason (absent when none)
    DIR/corpus/                 the corpus the PDFs were ingested into (--page-text: the official OCR)
    DIR/snapshot/               the dataset files, when fetched from the hub (else --from DIR is read)
    DIR/fetch.json              what this run did (the summary printed by --json)

Running it again completes what is missing: PDFs already there are verified against the
manifest (a damaged one is downloaded again), unfinished ones continue, the corpus ingests only
new files. Nothing is downloaded unless this command is run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field, ValidationError

from deskbench.corpus.extract import OcrSettings
from deskbench.corpus.ingest import IngestSummary
from deskbench.corpus.page_text import PageTextSummary
from deskbench.errors import UserError
from deskbench.fetch import download as dl
from deskbench.fetch import snapshot

REPO_ID = "OxRML/MADQA"
SPLITS = ("train", "dev", "test")
DOCUMENTS = ("documents", "links")  # the configuration and split mapping PDFs to URLs
TASK_COLUMNS = ("id", "question", "answer_variants", "evidence", "document_category", "domain")
FAILED_FILE = "failed_downloads.jsonl"


class Progress(Protocol):
    """What the command shows while it works (the CLI draws it with rich)."""

    def stage(self, name: str, total: int) -> None: ...

    def advance(self, current: str) -> None: ...


class _Silent:
    def stage(self, name: str, total: int) -> None:
        pass

    def advance(self, current: str) -> None:
        pass


@dataclass(frozen=True)
class FetchOptions:
    out: Path
    source: Path | None = None  # a snapshot folder; None: the hub
    splits: tuple[str, ...] = SPLITS
    limit: int | None = None  # the first N tasks of each split, and only the PDFs they cite
    workers: int = 4  # downloads in flight (and PDF extraction processes, at most the CPUs)
    page_text: Path | None = None  # the official OCR (Textract JSONL) for the corpus
    ocr: OcrSettings = field(default_factory=OcrSettings)
    download: dl.Settings | None = None  # retries, timeouts, back-off (None: the defaults)


class FailedDownload(BaseModel):
    document: str
    url: str
    reason: str


class FetchSummary(BaseModel):
    """What `deskbench fetch madqa` did; DIR/fetch.json and the --json output."""

    source: str
    revision: str | None = None  # the hub commit downloaded
    tasks: dict[str, str] = Field(default_factory=dict)  # split -> tasks file
    task_counts: dict[str, int] = Field(default_factory=dict)
    documents: int = 0  # PDFs wanted
    downloads: dict[str, int] = Field(default_factory=dict)  # outcome -> count (downloaded, verified, ...)
    failed: list[FailedDownload] = Field(default_factory=list)
    failed_file: str | None = None
    no_url: list[str] = Field(default_factory=list)  # evidence documents the links split has no URL for
    corpus: str = ""
    ingest: IngestSummary | None = None
    page_text: PageTextSummary | None = None
    page_text_skipped: int = 0  # supplied pages of documents the corpus does not hold (not fetched)
    trial: bool = False  # --limit: a corpus of the cited PDFs only, not the whole collection


def _task_config(files: snapshot.DataFiles, splits: Sequence[str], readme: Path) -> str:
    if "default" in files:
        return "default"
    for name, config in files.items():
        if name != DOCUMENTS[0] and all(s in config for s in splits):
            return name
    raise UserError(f"{readme}: no configuration holds the splits {', '.join(splits)}; is this a MADQA snapshot?")


def _patterns(readme: Path, splits: Sequence[str]) -> list[str]:
    """The files the hub download needs: the card's patterns for the chosen splits and the links."""
    files = snapshot.data_files(readme)
    config = _task_config(files, splits, readme)
    wanted = [p for s in splits for p in files[config].get(s, [])]
    wanted += files.get(DOCUMENTS[0], {}).get(DOCUMENTS[1], [])
    return ["README.md", *wanted]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _tasks(root: Path, files: snapshot.DataFiles, config: str, split: str, limit: int | None) -> list[dict[str, Any]]:
    from deskbench.tracks.docqa.tasks import DocQATask

    rows = snapshot.read_rows(snapshot.split_paths(root, files, config, split))
    if limit is not None:
        rows = rows[:limit]
    seen: set[str] = set()
    for i, row in enumerate(rows):
        try:
            task = DocQATask.model_validate(row)
        except ValidationError as exc:
            e = exc.errors(include_url=False)[0]
            raise UserError(f"{root}: {split} row {i} (id {row.get('id')!r}) is not a docqa task: "
                            f"{'.'.join(map(str, e['loc']))}: {e['msg']}; download the snapshot again") from exc
        if task.id in seen:
            raise UserError(f"{root}: {split} has the id {task.id!r} twice; download the snapshot again")
        seen.add(task.id)
    return rows


def _links(root: Path, files: snapshot.DataFiles) -> dict[str, str]:
    config, split = DOCUMENTS
    rows = snapshot.read_rows(snapshot.split_paths(root, files, config, split))
    links: dict[str, str] = {}
    for i, row in enumerate(rows):
        doc, url = row.get("document"), row.get("url")
        if not isinstance(doc, str) or not isinstance(url, str) or not doc or not url:
            raise UserError(f"{root}: {config}/{split} row {i} has no document and url; download the snapshot again")
        links.setdefault(doc, url)
    return links


def fetch_madqa(options: FetchOptions, progress: Progress | None = None) -> FetchSummary:
    """Tasks, PDFs, corpus (see the module's docstring); failed downloads are in the summary."""
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.corpus.page_text import PageTextFile, apply_page_text, read_page_text

    show = progress or _Silent()
    out = options.out
    for split in options.splits:
        if split not in SPLITS:
            raise UserError(f"--split {split!r} is not a MADQA split; use {', '.join(SPLITS)}")
    if options.limit is not None and options.limit < 1:
        raise UserError(f"--limit {options.limit} is not valid; use 1 or more")
    if options.workers < 1:
        raise UserError(f"--workers {options.workers} is not valid; use 1 or more")
    supplied = read_page_text(options.page_text) if options.page_text is not None else None  # its errors first
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror or exc}; choose another folder") from exc

    summary = FetchSummary(source="", trial=options.limit is not None)
    if options.source is not None:
        root = options.source
        if not root.is_dir():
            from deskbench.paths import missing

            raise missing(root, lambda p: p.is_dir() and (p / "README.md").exists(), "snapshot folders",
                          "give the folder `hf download OxRML/MADQA --repo-type dataset --local-dir DIR` made")
        summary.source = str(root)
    else:
        root = out / "snapshot"
        show.stage(f"downloading {REPO_ID} from the hub", 0)
        summary.revision = snapshot.hub_snapshot(REPO_ID, root, lambda card: _patterns(card, options.splits))
        summary.source = f"{snapshot.shown_endpoint()}/datasets/{REPO_ID}"  # kept without HF_ENDPOINT's credentials

    readme = root / "README.md"
    files = snapshot.data_files(readme)
    config = _task_config(files, options.splits, readme)
    cited: list[str] = []
    for split in options.splits:
        rows = _tasks(root, files, config, split, options.limit)
        path = out / f"{split}.jsonl"
        _write_atomic(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))
        summary.tasks[split] = str(path)
        summary.task_counts[split] = len(rows)
        cited += [str(e["document"]) for r in rows for e in (r.get("evidence") or [])
                  if isinstance(e, dict) and isinstance(e.get("document"), str)]
    links = _links(root, files)
    summary.no_url = sorted({d for d in cited if d not in links})
    names = sorted({d for d in cited if d in links}) if options.limit is not None else sorted(links)
    summary.documents = len(names)

    show.stage("PDFs", len(names))
    received = [0]  # bytes so far, shown beside each file as it ends

    def on_bytes(n: int) -> None:
        received[0] += n  # from the download threads: a lost update only blurs the shown total

    result = dl.download([dl.Item(n, links[n]) for n in names], out / "pdfs",
                         options.download or dl.Settings(workers=options.workers),
                         on_file=lambda name, outcome: show.advance(f"{name} {outcome}, "
                                                                    f"{received[0] / 1e6:.1f} MB received"),
                         on_bytes=on_bytes)
    summary.downloads = {o: result.count(o) for o in ("downloaded", "resumed", "verified", "redownloaded",
                                                       "adopted", "failed") if result.count(o)}
    summary.failed = [FailedDownload(document=f.name, url=f.url, reason=f.reason) for f in result.failures]
    failed_path = out / FAILED_FILE
    if summary.failed:
        _write_atomic(failed_path, "".join(f.model_dump_json() + "\n" for f in summary.failed))
        summary.failed_file = str(failed_path)
    else:
        failed_path.unlink(missing_ok=True)

    corpus_dir = out / "corpus"
    summary.corpus = str(corpus_dir)
    ok = [out / "pdfs" / n for n in result.ok]
    if ok:
        corpus = open_or_create(corpus_dir)
        plan = plan_ingest(corpus, ok)
        show.stage("ingest", len(plan.jobs))
        summary.ingest = run_ingest(corpus, plan, options.ocr, workers=min(options.workers, os.cpu_count() or 1),
                                    on_file=lambda doc, pages: show.advance(f"{doc} ({pages} p)"))
        if supplied is not None:
            held = {d.doc_id for d in corpus.documents()}
            kept = [p for p in supplied.pages if p.document in held]
            summary.page_text_skipped = len(supplied.pages) - len(kept)
            if kept:
                summary.page_text = apply_page_text(corpus, PageTextFile(supplied.path, supplied.sha256, kept))
    _write_atomic(out / "fetch.json", summary.model_dump_json(indent=2) + "\n")
    return summary
