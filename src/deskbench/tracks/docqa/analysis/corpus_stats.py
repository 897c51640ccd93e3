"""Corpus statistics by domain and by document category (MADQA Table 2 and Table 6, App. B.1).

Table 2, per domain: Docs, Pages, Pg/Doc, Qs, Q/Doc; Table 6, per category, sorted by document
count: Docs, Pages, Mean, Med., Max (pages per document); plus the totals of Table 2's caption
(median, mean and max pages per document) and the hop-type split of §2.2 (X-Page, X-Doc shares).

Pages are each document's page count in the corpus (pages.sqlite). Questions carry a domain and a
category, documents do not: a document takes the domain and the category most of the questions
citing it as evidence have (ties: the first in alphabetical order; `mixed_labels` lists the
documents whose questions disagree). A document no question cites is in the "(no question)" row;
a document a question cites that is not in the corpus is listed in `missing_documents` and
counted in no row (its pages are unknown, not 0). Qs counts questions by their own domain.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.tracks.docqa.tasks import HOP_TYPES, DocQATask

UNCITED = "(no question)"
NONE = "(none)"


class DomainRow(BaseModel):
    """One row of Table 2."""

    domain: str
    docs: int
    pages: int
    pages_per_doc: float | None
    questions: int
    questions_per_doc: float | None


class CategoryRow(BaseModel):
    """One row of Table 6."""

    category: str
    docs: int
    pages: int
    mean: float | None
    median: float | None
    max: int | None


class CorpusStats(BaseModel):
    documents: int
    pages: int
    questions: int
    mean_pages: float | None
    median_pages: float | None
    max_pages: int | None
    hop_types: dict[str, int]  # questions per hop type (single, cross_page, cross_doc)
    by_domain: list[DomainRow]  # Table 2, by document count
    by_category: list[CategoryRow]  # Table 6, by document count
    mixed_labels: list[str]  # documents whose citing questions disagree on domain or category
    missing_documents: list[str]  # cited as evidence but not in the corpus


def _majority(values: Sequence[str]) -> str:
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], v))


def _order(rows: Mapping[str, list[int]]) -> list[str]:
    """By document count, largest first; the uncited row last."""
    return sorted(rows, key=lambda k: (k == UNCITED, -len(rows[k]), k))


def corpus_stats(tasks: Sequence[DocQATask], page_counts: Mapping[str, int]) -> CorpusStats:
    """Tables 2 and 6 from the tasks and each corpus document's page count."""
    domains: dict[str, list[str]] = defaultdict(list)
    categories: dict[str, list[str]] = defaultdict(list)
    cited: set[str] = set()
    for t in tasks:
        for doc in dict.fromkeys(e.document for e in t.evidence):
            cited.add(doc)
            domains[doc].append(t.domain or NONE)
            categories[doc].append(t.document_category or NONE)
    by_domain: dict[str, list[int]] = defaultdict(list)
    by_category: dict[str, list[int]] = defaultdict(list)
    for doc, pages in page_counts.items():
        by_domain[_majority(domains[doc]) if doc in domains else UNCITED].append(pages)
        by_category[_majority(categories[doc]) if doc in categories else UNCITED].append(pages)
    questions = Counter(t.domain or NONE for t in tasks)
    for d in questions:
        by_domain.setdefault(d, [])
    all_pages = list(page_counts.values())
    return CorpusStats(
        documents=len(all_pages), pages=sum(all_pages), questions=len(tasks),
        mean_pages=statistics.fmean(all_pages) if all_pages else None,
        median_pages=float(statistics.median(all_pages)) if all_pages else None,
        max_pages=max(all_pages, default=None),
        hop_types={h: sum(t.hop_type == h for t in tasks) for h in HOP_TYPES},
        by_domain=[DomainRow(domain=d, docs=len(p), pages=sum(p), pages_per_doc=sum(p) / len(p) if p else None,
                             questions=questions.get(d, 0),
                             questions_per_doc=questions.get(d, 0) / len(p) if p else None)
                   for d in _order(by_domain) for p in [by_domain[d]]],
        by_category=[CategoryRow(category=c, docs=len(p), pages=sum(p), mean=statistics.fmean(p) if p else None,
                                 median=float(statistics.median(p)) if p else None, max=max(p, default=None))
                     for c in _order(by_category) for p in [by_category[c]]],
        mixed_labels=sorted(d for d in page_counts if len(set(domains.get(d, []))) > 1 or len(set(categories.get(d, []))) > 1),
        missing_documents=sorted(cited - set(page_counts)),
    )


def page_counts(corpus_dir: Path) -> dict[str, int]:
    """Each document's page count, read from the corpus's page store (no search index needed)."""
    from deskbench.corpus.store import PageStore
    from deskbench.paths import require_corpus

    require_corpus(corpus_dir)  # a typo names the corpora nearby
    store = PageStore(corpus_dir / PageStore.FILENAME)
    try:
        return {d.doc_id: d.page_count for d in store.documents()}
    finally:
        store.close()


def load_corpus_stats(tasks_path: Path, corpus_dir: Path) -> CorpusStats:
    from deskbench.tracks.docqa.tasks import read_tasks

    counts = page_counts(corpus_dir)
    if not counts:
        raise UserError(f"the corpus {corpus_dir} holds no documents; ingest some with: deskbench ingest PDFS... --corpus {corpus_dir}")
    return corpus_stats(read_tasks(tasks_path).items, counts)


def corpus_figure(stats: CorpusStats) -> Any:
    """Documents and questions per domain (Table 2 as bars)."""
    import numpy as np

    from deskbench.analysis.plotting import pyplot

    fig, ax = pyplot().subplots(figsize=(max(6.0, 0.6 * len(stats.by_domain) + 2), 4))
    x = np.arange(len(stats.by_domain))
    ax.bar(x - 0.2, [r.docs for r in stats.by_domain], 0.4, label="documents")
    ax.bar(x + 0.2, [r.questions for r in stats.by_domain], 0.4, label="questions")
    ax.set_xticks(x, [r.domain for r in stats.by_domain], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("count")
    ax.set_title(f"Corpus by domain: {stats.documents} documents, {stats.pages} pages, {stats.questions} questions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
