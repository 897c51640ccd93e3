"""The page-level tantivy index: one tantivy document per PDF page.

Writes come from one ingest process at a time (tantivy holds a writer lock); searches may run
from any number of threads: each call takes its own searcher from the shared index.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tantivy

from deskbench.errors import UserError
from deskbench.search.analyzer import ANALYZER_NAME, build_analyzer
from deskbench.search.query import highlights, parse_query, to_tantivy
from deskbench.search.snippet import make_snippet

TEXT = "text"
DOC = "doc_id"
PAGE = "page"


@dataclass(frozen=True)
class RawHit:
    document: str
    page: int
    score: float
    snippet: str


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field(DOC, stored=True, tokenizer_name="raw")
    sb.add_integer_field(PAGE, stored=True, indexed=True, fast=True)
    sb.add_text_field(TEXT, stored=True, tokenizer_name=ANALYZER_NAME, index_option="position")
    return sb.build()


class PageIndex:
    """Open (or create) the index directory of a corpus."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if create:
            path.mkdir(parents=True, exist_ok=True)
        elif not (path / "meta.json").exists():
            raise UserError(
                f"no search index at {path}; run 'deskbench ingest' to build it "
                "(with the same PDFs: unchanged files are only re-indexed)"
            )
        self.schema = _schema()
        try:
            self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        except ValueError as exc:
            raise UserError(
                f"search index at {path} is unreadable or from another version ({exc}); "
                "delete that folder and run 'deskbench ingest' again to rebuild it"
            ) from exc
        self.index.register_tokenizer(ANALYZER_NAME, build_analyzer())
        self._reload_lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def writer(self, heap_bytes: int = 256_000_000, threads: int = 0) -> Iterator[IndexWriter]:
        try:
            raw = self.index.writer(heap_size=heap_bytes, num_threads=threads)
        except ValueError as exc:
            if "lock" in str(exc).lower():
                raise UserError(
                    f"another process is writing the index at {self.path}; "
                    "wait for that ingest to finish, then run again"
                ) from exc
            raise
        w = IndexWriter(raw)
        try:
            yield w
        except BaseException:
            raw.rollback()
            raise
        else:
            raw.commit()
            raw.wait_merging_threads()
        finally:
            self.reload()

    def reload(self) -> None:
        with self._reload_lock:
            self.index.reload()

    # -- reading -------------------------------------------------------------------------

    def num_pages(self) -> int:
        return self.index.searcher().num_docs

    def search(self, query: str, k: int = 5) -> list[RawHit]:
        """BM25 top-k pages for a Whoosh-syntax query. Raises QuerySyntaxError on bad syntax."""
        if k < 1:
            return []
        tree = parse_query(query)
        tq = to_tantivy(tree, self.schema, TEXT)
        searcher = self.index.searcher()
        hits = _top_hits_with_ties(searcher, tq, k)
        rows = []
        for score, address in hits:
            doc = searcher.doc(address)
            rows.append((score, doc[DOC][0], int(doc[PAGE][0]), doc[TEXT][0]))
        # Ties are broken by (document, page), not by segment order: the same pages always give
        # the same list, however the index was built.
        rows.sort(key=lambda r: (-r[0], r[1], r[2]))
        hl = highlights(tree)
        return [RawHit(d, p, s, make_snippet(t, hl)) for s, d, p, t in rows[:k]]


def _top_hits_with_ties(
    searcher: tantivy.Searcher, query: tantivy.Query, k: int
) -> list[tuple[float, tantivy.DocAddress]]:
    """The top k hits plus every hit tied with the k-th, scores rounded so float noise is a tie."""
    limit = k + 16
    while True:
        hits = [(round(float(s), 6), a) for s, a in searcher.search(query, limit=limit, count=False).hits]
        if len(hits) < limit or len(hits) < k or hits[-1][0] != hits[k - 1][0]:
            break
        limit *= 4
    if len(hits) <= k:
        return hits
    cut = hits[k - 1][0]
    return [h for h in hits if h[0] >= cut]


class IndexWriter:
    """Replace the pages of whole documents; visible to searchers after the commit."""

    def __init__(self, raw: tantivy.IndexWriter) -> None:
        self._raw = raw

    def replace_document(self, doc_id: str, pages: Iterable[tuple[int, str]]) -> None:
        self._raw.delete_documents_by_term(DOC, doc_id)
        for page, text in pages:
            self._raw.add_document(tantivy.Document(doc_id=doc_id, page=page, text=text))

    def delete_document(self, doc_id: str) -> None:
        self._raw.delete_documents_by_term(DOC, doc_id)

    def commit(self) -> None:
        self._raw.commit()
